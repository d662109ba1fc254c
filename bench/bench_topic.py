"""Topic relevance on real sites with labels nobody here wrote: precision, recall and F1
of trained and keyword topics, every page scored and in the focused crawl, and the
harvest rate over the crawl, breadth-first and best-first.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_topic.py [--only gimp,python] [--kinds trained,keywords]
        [--set NAME=VALUE ...] [--plot bench/harvest.svg] [--samples even|random|first] [--keep]

The corpora (:mod:`topic_corpus`) are Debian documentation packages served as local
sites: every page carries its site's template, and the sites fall into sibling sections
that share most of their vocabulary. A page's label is its section. For each corpus,
each section of at least :data:`MIN_TARGET_PAGES` pages is the target in turn, and the
seeds are every section's start page, at depth :data:`DEPTH`, as a user would crawl a
product's help. The topic is given two ways:

* **trained**: ``-a train=`` with :data:`SAMPLES` pages of the section, picked evenly
  through its sorted page list (``--samples`` picks them otherwise); they are left out
  of the evaluation;
* **keywords**: :data:`KEYWORDS`, eight weighted words per section written from what
  each section is about before any score was seen (the GIMP and LilyPond pages mix
  Chinese menus with English bodies, so their keywords mix both).

Each runs as real ``scrapy crawl`` runs at the defaults but for the politeness delay:

1. **every page scored** (``TOPIC_FOLLOW_ALL``): precision and recall over the pages the
   crawl reached, at the topic's own threshold (the report's ``relevance_threshold``);
2. **focused** (the defaults): links followed from relevant pages only; recall also
   counts the target pages the focus never reached (those the first crawl reached);
3. **best-first** (``TOPIC_BEST_FIRST``), trained topics only: with 2 the harvest rate
   over the crawl, relevant pages (by the crawler's verdict, as ACHE measures it) per
   page fetched, plotted in ``--plot``.

The cost of the model per page (``topic/score_seconds`` / ``topic/scored``) and the time
to sample the background and train are read from the crawls' stats.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from common import REPO, BenchFailure, header_lines, run_in_scratch, write_svg
from topic_corpus import SPECS, Corpus, build_corpus

sys.path.insert(0, str(REPO))

from topicspider.localsite import spawn  # noqa: E402
from topicspider.runner import crawl_command, project_env  # noqa: E402

DEPTH = 3
SAMPLES = 10
MIN_TARGET_PAGES = 20
FAST = {"DOWNLOAD_DELAY": 0, "DOWNLOAD_DELAY_JITTER": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "LOG_LEVEL": "INFO"}
# Written before any keyword score was seen: what each section is about.
KEYWORDS: dict[tuple[str, str], dict[str, float]] = {
    ("gimp", "menus"): {"菜单": 3, "menu": 3, "命令": 2, "command": 2, "子菜单": 1, "submenu": 1, "菜单栏": 1, "menubar": 1},
    ("gimp", "filters"): {"滤镜": 3, "filter": 3, "filters": 2, "效果": 1, "effect": 1, "blur": 1, "distort": 1, "render": 1},
    ("gimp", "gimp-tools"): {"工具": 3, "tool": 3, "工具箱": 2, "toolbox": 2, "工具选项": 1, "options": 1, "画笔": 1, "选区": 1},
    ("gimp", "dialogs"): {"对话框": 3, "dialog": 3, "停靠": 1, "dockable": 2, "标签": 1, "tab": 1, "面板": 1, "窗口": 1},
    ("gimp", "gimp-painting"): {"绘画": 3, "painting": 3, "画笔": 2, "brush": 2, "路径": 1, "path": 1, "渐变": 1, "gradient": 1},
    ("gimp", "gimp-getting-unstuck"): {"问题": 2, "problem": 2, "stuck": 3, "卡住": 2, "unresponsive": 2, "无响应": 2, "修复": 1,
                                       "fix": 1},
    ("lilypond", "learning"): {"教程": 3, "tutorial": 3, "学习": 2, "音符": 2, "记谱": 2, "notation": 1, "输入": 1, "乐谱": 1},
    ("lilypond", "web"): {"下载": 3, "download": 3, "社区": 2, "community": 2, "安装": 1, "新闻": 1, "介绍": 1, "特性": 1},
    ("debian-books", "handbook"): {"管理员": 3, "系统管理": 2, "服务器": 2, "服务": 1, "网络": 1, "安全": 1, "配置": 1, "apt": 1},
    ("debian-books", "install"): {"安装程序": 3, "安装": 2, "引导": 2, "分区": 2, "硬盘": 1, "启动": 1, "安装介质": 1,
                                  "debian-installer": 2},
    ("python", "library"): {"module": 3, "function": 2, "class": 2, "returns": 1, "argument": 1, "method": 1, "object": 1,
                            "standard": 1},
    ("python", "c-api"): {"pyobject": 3, "api": 2, "reference": 1, "pointer": 2, "macro": 1, "null": 1, "interpreter": 1,
                          "struct": 1},
    ("python", "whatsnew"): {"new": 3, "pep": 2, "deprecated": 2, "removed": 1, "changes": 2, "improved": 1, "release": 1,
                             "added": 1},
    ("python", "howto"): {"howto": 3, "guide": 2, "how": 2, "example": 1, "tutorial": 1, "introduction": 1, "examples": 1,
                          "document": 1},
    # Written 2026-12-06 from the manual's table of contents, before any score of this corpus was seen.
    ("postgresql", "tutorial"): {"tutorial": 3, "introduction": 2, "basics": 2, "getting": 1, "started": 1, "example": 1,
                                 "beginner": 1, "concepts": 1},
    ("postgresql", "sql"): {"sql": 3, "syntax": 2, "query": 2, "expression": 2, "operator": 1, "function": 1, "type": 1,
                            "index": 1},
    ("postgresql", "admin"): {"server": 3, "administration": 3, "configuration": 2, "backup": 2, "replication": 2,
                              "authentication": 1, "monitoring": 1, "installation": 1},
    ("postgresql", "client-interfaces"): {"libpq": 3, "client": 3, "interface": 2, "ecpg": 2, "connection": 1,
                                          "application": 1, "embedded": 1, "program": 1},
    ("postgresql", "server-programming"): {"extension": 3, "procedural": 2, "trigger": 2, "plpgsql": 2, "spi": 2,
                                           "language": 1, "function": 1, "callback": 1},
    ("postgresql", "reference"): {"command": 3, "synopsis": 3, "parameters": 2, "compatibility": 2, "description": 1,
                                  "examples": 1, "options": 1, "utility": 1},
    ("postgresql", "internals"): {"internals": 3, "planner": 2, "executor": 2, "catalog": 2, "protocol": 2, "storage": 1,
                                  "wal": 1, "implementation": 1},
    ("postgresql", "appendixes"): {"appendix": 3, "release": 2, "module": 2, "contrib": 2, "additional": 1,
                                   "supplied": 1, "errors": 1, "version": 1},
}


@dataclass(frozen=True)
class Crawl:
    scores: dict[str, float]  # page path -> score, every scored page
    fetched: list[str]  # crawl pages answered, in order (the background sample's downloads left out)
    threshold: float
    stats: dict[str, object]

    def relevant(self) -> set[str]:
        return {path for path, score in self.scores.items() if score >= self.threshold}


@dataclass(frozen=True)
class Measure:
    precision: float
    recall: float

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


class Site:
    """A corpus, served by a ``topicspider.localsite`` subprocess."""

    def __init__(self, root: Path) -> None:
        try:
            self.process, port = spawn(root, "--port", "0")
        except RuntimeError as exc:
            raise BenchFailure(str(exc)) from None
        self.url = f"http://127.0.0.1:{port}/"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def path_of(url: str) -> str:
    path = unquote(urlsplit(url).path).lstrip("/")
    return path + "index.html" if path == "" or path.endswith("/") else path


def crawl(site: Site, corpus: Corpus, workdir: Path, settings: dict[str, object], **arguments: str) -> Crawl:
    workdir.mkdir(parents=True)
    seeds = ",".join(site.url + start for start in corpus.starts.values())
    command = crawl_command(seeds, DEPTH, {**FAST, **settings}, **arguments)
    done = subprocess.run(command, cwd=workdir, env=project_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchFailure(f"crawl in {workdir} exited {done.returncode}: {done.stderr[-3000:]}")
    scores: dict[str, float] = {}
    fetched: list[str] = []
    for line in (workdir / "crawl.log").read_text("utf-8").splitlines():
        _, url, _, depth, score, _ = line.split("\t")
        if depth == "-":
            continue  # robots.txt, samples, the background sample
        fetched.append(path_of(url))
        if score != "-":
            scores[path_of(url)] = float(score)
    document = json.loads((workdir / "stats.json").read_text("utf-8"))
    return Crawl(scores, fetched, float(document["report"]["relevance_threshold"]), document["stats"])


def measure(chosen: set[str], corpus: Corpus, target: str, wanted: set[str], left_out: set[str]) -> Measure:
    chosen = {path for path in chosen if path in corpus.labels and path not in left_out}
    hits = sum(corpus.labels[path] == target for path in chosen)
    return Measure(hits / len(chosen) if chosen else 0.0, hits / len(wanted) if wanted else 0.0)


# How a section's samples are picked from its sorted page list (--samples).
SAMPLE_PICKS = ("even", "random", "first")


def sample_pages(corpus: Corpus, target: str, count: int, pick: str = "even") -> list[str]:
    """``count`` pages of the section: spread evenly through its sorted page list, drawn
    at random (a fixed seed per section), or its first pages, which on most corpora are
    the pages of one chapter (a topic is what its samples share: see docs/topic.md,
    "Which ten samples")."""
    pages = corpus.pages_of(target)
    if pick == "first":
        return pages[:count]
    if pick == "random":
        return sorted(random.Random(f"{corpus.name}/{target}").sample(pages, min(count, len(pages))))
    return [pages[(index + 1) * len(pages) // (count + 1)] for index in range(count)]


def keyword_file(workdir: Path, words: dict[str, float]) -> Path:
    path = workdir / "keywords.txt"
    path.write_text("".join(f"{word} {weight}\n" for word, weight in words.items()), "utf-8")
    return path


def harvest_curve(run: Crawl) -> list[float]:
    """The harvest rate after each page fetched: relevant pages so far / pages so far."""
    relevant, curve = 0, []
    seen: set[str] = set()
    for path in run.fetched:
        if path in seen or path not in run.scores:
            continue
        seen.add(path)
        relevant += run.scores[path] >= run.threshold
        curve.append(relevant / len(seen))
    return curve


def first_half(curve: list[float]) -> float:
    """The mean harvest rate over the first half of the crawl: the figure the docs give."""
    return statistics.fmean(curve[: max(len(curve) // 2, 1)]) if curve else 0.0


def evaluate_corpus(name: str, scratch: Path, options: argparse.Namespace) -> list[dict[str, object]]:
    corpus = build_corpus(name)
    targets = [label for label, count in corpus.sizes().most_common() if count >= MIN_TARGET_PAGES]
    site = Site(corpus.root)
    rows = []
    try:
        for target in targets:
            for kind in options.kinds:
                if kind == "keywords" and (name, target) not in KEYWORDS:
                    continue
                workdir = scratch / name / target / kind
                workdir.mkdir(parents=True)
                samples = sample_pages(corpus, target, SAMPLES, options.samples) if kind == "trained" else []
                if kind == "trained":
                    arguments = {"train": ",".join(site.url + page for page in samples)}
                else:
                    arguments = {"topic": "@" + str(keyword_file(workdir, KEYWORDS[name, target]))}
                left_out = set(samples)
                every = crawl(site, corpus, workdir / "all", {**options.settings, "TOPIC_FOLLOW_ALL": True},
                              **arguments)
                wanted = {path for path in every.scores
                          if corpus.labels.get(path) == target and path not in left_out}
                focused = crawl(site, corpus, workdir / "focused", options.settings, **arguments)
                bfs_curve = harvest_curve(focused)
                row: dict[str, object] = {
                    "corpus": name, "target": target, "kind": kind, "pages": len(wanted),
                    "all": measure(every.relevant(), corpus, target, wanted, left_out),
                    "focused": measure(focused.relevant(), corpus, target, wanted, left_out),
                    "fetched": len(set(focused.fetched)), "threshold": every.threshold,
                    "ms_per_page": 1000 * float(every.stats.get("topic/score_seconds", 0.0)) / max(
                        int(every.stats.get("topic/scored", 1)), 1),
                    "train_seconds": float(every.stats.get("topic/train_seconds", 0.0)),
                    "background_seconds": float(every.stats.get("topic/background_seconds", 0.0)),
                    "bfs_curve": bfs_curve,
                }
                if kind == "trained" and options.plot:
                    best = crawl(site, corpus, workdir / "best", {**options.settings, "TOPIC_BEST_FIRST": True},
                                 **arguments)
                    row["best_curve"] = best_curve = harvest_curve(best)
                    print(f"  {name:<12} {target:<22} harvest over the first half: breadth-first "
                          f"{first_half(bfs_curve):.2f}, best-first {first_half(best_curve):.2f}")
                rows.append(row)
                print_row(row)
    finally:
        site.stop()
    return rows


def print_row(row: dict[str, object]) -> None:
    every, focused = row["all"], row["focused"]
    assert isinstance(every, Measure) and isinstance(focused, Measure)
    print(f"  {row['corpus']:<12} {row['target']:<22} {row['kind']:<8} {row['pages']:>5} "
          f"{every.precision:>5.2f} {every.recall:>5.2f} {every.f1:>5.2f}   "
          f"{focused.precision:>5.2f} {focused.recall:>5.2f} {focused.f1:>5.2f} {row['fetched']:>7} "
          f"{row['threshold']:>8.4f} {row['ms_per_page']:>6.2f} {row['train_seconds']:>6.2f}", flush=True)


def print_summary(rows: list[dict[str, object]]) -> None:
    print("\nMeans by corpus (F1 every page scored / focused), worst corpus first:")
    for kind in ("trained", "keywords"):
        chosen = [row for row in rows if row["kind"] == kind]
        if not chosen:
            continue
        corpora = sorted({str(row["corpus"]) for row in chosen})
        means = {}
        for name in corpora:
            own = [row for row in chosen if row["corpus"] == name]
            means[name] = tuple(statistics.fmean(getattr(row[mode], field) for row in own)  # type: ignore[arg-type]
                                for mode in ("all", "focused") for field in ("precision", "recall", "f1"))
        for name in sorted(corpora, key=lambda corpus_name: means[corpus_name][2]):
            p, r, f, fp, fr, ff = means[name]
            print(f"  {kind:<8} {name:<12} all P {p:.2f} R {r:.2f} F1 {f:.2f} | focused P {fp:.2f} R {fr:.2f} F1 {ff:.2f}")
        print(f"  {kind:<8} {'WORST':<12} all F1 {min(m[2] for m in means.values()):.2f} | focused F1 "
              f"{min(m[5] for m in means.values()):.2f};  mean of corpora all {statistics.fmean(m[2] for m in means.values()):.2f}"
              f" focused {statistics.fmean(m[5] for m in means.values()):.2f}")
    trained = [row for row in rows if row["kind"] == "trained"]
    if trained:
        print(f"\n  model cost per page {statistics.fmean(float(r['ms_per_page']) for r in trained):.2f} ms (mean); "
              f"training {statistics.fmean(float(r['train_seconds']) for r in trained):.2f} s after sampling the "
              f"background in {statistics.fmean(float(r['background_seconds']) for r in trained):.1f} s (means)")


def plot_harvest(rows: list[dict[str, object]], path: Path) -> None:
    """An SVG of the harvest rate over the crawl, one panel per corpus (mean over its
    targets), breadth-first and best-first."""
    corpora = sorted({str(row["corpus"]) for row in rows if "best_curve" in row})
    width, height, pad = 300, 200, 40
    panels = []
    for index, name in enumerate(corpora):
        own = [row for row in rows if row["corpus"] == name and "best_curve" in row]
        x0 = index * (width + pad) + pad
        lines = []
        for key, colour, label in (("bfs_curve", "#1f77b4", "breadth-first"), ("best_curve", "#d62728", "best-first")):
            curves = [row[key] for row in own if row[key]]  # type: ignore[misc]
            length = min(len(curve) for curve in curves)  # type: ignore[arg-type]
            mean = [statistics.fmean(curve[i] for curve in curves) for i in range(length)]  # type: ignore[index]
            print(f"  {name:<12} {label:<13} mean harvest over the first half of the crawl {first_half(mean):.2f}")
            points = " ".join(f"{x0 + width * i / max(length - 1, 1):.1f},{pad + height * (1 - value):.1f}"
                              for i, value in enumerate(mean))
            lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
            legend_y = pad + height + 30 + (12 if key == "best_curve" else 0)
            lines.append(f'<text x="{x0}" y="{legend_y}" font-size="11" fill="{colour}">{label} ({length} pages)</text>')
        panels.append(
            f'<rect x="{x0}" y="{pad}" width="{width}" height="{height}" fill="none" stroke="#999"/>'
            f'<text x="{x0}" y="{pad - 8}" font-size="13">{name}: harvest rate over the crawl</text>'
            f'<text x="{x0 - 30}" y="{pad + 4}" font-size="10">1.0</text>'
            f'<text x="{x0 - 30}" y="{pad + height}" font-size="10">0.0</text>'
            f'<text x="{x0 + width - 90}" y="{pad + height + 14}" font-size="10">pages fetched →</text>' + "".join(lines))
    total_width = len(corpora) * (width + pad) + pad
    write_svg(path, total_width, height + 2 * pad + 40, "".join(panels))
    print(f"\nharvest-rate plot written to {path}")


def evaluate(scratch: Path, options: argparse.Namespace) -> None:
    print("\n".join(header_lines("bench_topic: topic relevance on real sites with sibling sections",
                                 ["scrapy", "jieba", "rjieba"])))
    print(f"  settings      defaults, with {FAST} and {options.settings}; depth {DEPTH}, {SAMPLES} samples")
    print(f"\n  {'corpus':<12} {'target':<22} {'kind':<8} {'pages':>5} {'P':>5} {'R':>5} {'F1':>5}   "
          f"{'P':>5} {'R':>5} {'F1':>5} {'fetched':>7} {'thresh':>8} {'ms/pg':>6} {'train':>6}")
    print(f"  {'':<49}{'every page scored':<20} {'focused crawl'}")
    rows = []
    for name in options.only:
        rows += evaluate_corpus(name, scratch, options)
    print_summary(rows)
    if options.plot:
        plot_harvest(rows, options.plot)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SPECS), help="corpora, comma-separated")
    parser.add_argument("--kinds", default="trained,keywords")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting for every crawl")
    parser.add_argument("--plot", type=Path, default=None, help="write the harvest-rate plot (SVG) here")
    parser.add_argument("--samples", choices=SAMPLE_PICKS, default="even",
                        help="how a trained topic's samples are picked from the section's sorted pages (default even)")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args(argv)
    options.only = options.only.split(",")
    options.kinds = options.kinds.split(",")
    options.settings = dict(item.split("=", 1) for item in options.set)
    return run_in_scratch("bench_topic", "bench-topic-", options.keep, lambda scratch: evaluate(scratch, options))


if __name__ == "__main__":
    sys.exit(main())

"""Topic relevance on real Chinese pages with labels nobody here wrote: precision,
recall and harvest rate of a trained topic and of a keyword topic.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_topic.py [--thresholds 0.5,0.75,...] [--samples 3]
        [--budget 40] [--segmenter jieba] [--keep]

The corpus (:mod:`topic_corpus`) is four Debian documentation packages in Chinese on
one local site, each under its own directory; a page's label is the package it came
from. The site's root links to the four packages' start pages. For each package as
the target topic, with the topic given two ways:

* **trained**: ``scrapy topic-train`` on ``--samples`` pages of the package, picked
  evenly through its sorted page list (they stay in the evaluation);
* **keywords**: a handful of words per package, listed below in ``KEYWORDS`` and
  chosen from what each package is about, before any score was seen (the samples stay
  in the evaluation, which flatters the trained topics a little);

it runs real crawls of the site with ``scrapy crawl topic`` from the root:

1. **all pages scored** (``TOPIC_FOLLOW_ALL``): every reachable page's score, read from
   the crawl log, gives precision and recall at each threshold of ``--thresholds``;
2. **focused** at the default ``TOPIC_THRESHOLD``: links are followed from relevant
   pages only, as by default. Recall here also counts the target pages the focus
   never reached; the harvest rate is relevant / scored as the crawler reports it,
   and "on-label" is target-package pages / pages requested;
3. **budget** of ``--budget`` pages (``CLOSESPIDER_PAGECOUNT``), breadth-first against
   best-first (``TOPIC_BEST_FIRST``), both focused and following every link: target
   pages among all pages requested (a 404 costs a request too).

Precision and recall count HTML pages with a label (the root page has none); recall's
denominator is the target's pages that the all-pages crawl reached.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from common import REPO, BenchFailure, header_lines, run_in_scratch
from topic_corpus import build_corpus, entry_pages

sys.path.insert(0, str(REPO))

from topicspider.localsite import spawn  # noqa: E402
from topicspider.runner import crawl_command, project_env  # noqa: E402

CORPUS = REPO / "bench" / ".cache" / "topic-corpus"
KEYWORDS: dict[str, list[str]] = {
    "reference": ["系统管理", "网络", "配置", "命令", "shell", "数据备份"],
    "lilypond": ["lilypond", "乐谱", "音符", "音乐", "记谱", "排版"],
    "faq": ["常见问题", "faq", "发行版", "debian", "升级", "安装"],
    "maint-guide": ["打包", "维护者", "上游", "源代码包", "debian", "构建"],
}
FAST = {"DOWNLOAD_DELAY": 0, "DOWNLOAD_DELAY_JITTER": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "LOG_LEVEL": "WARNING"}
DEPTH = 20


@dataclass(frozen=True)
class Crawl:
    scores: dict[str, float]  # page path -> score, every scored page
    fetched: list[str]  # paths of every page request answered (errors and redirects too), in order
    report: dict[str, object]
    seconds: float


class Site:
    """The corpus, served by a ``topicspider.localsite`` subprocess."""

    def __init__(self, root: Path) -> None:
        try:
            self.process, port = spawn(root, "--port", "0")
        except RuntimeError as exc:
            raise BenchFailure(str(exc)) from None
        self.url = f"http://127.0.0.1:{port}/"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def scrapy(args: list[str], workdir: Path) -> None:
    done = subprocess.run(args, cwd=workdir, env=project_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchFailure(f"{' '.join(args[2:5])}... exited {done.returncode}: {done.stderr[-2000:]}")


def train(corpus: Path, pages: Sequence[str], workdir: Path, options: argparse.Namespace) -> Path:
    output = workdir / "topic.txt"
    samples = ",".join(str(corpus / page) for page in pages)
    top_k = [] if options.top_k is None else ["-s", f"TOPIC_TOP_K={options.top_k}"]
    scrapy([sys.executable, "-m", "scrapy", "topic-train", "-a", f"train={samples}", "-o", str(output),
            "-s", f"TOPIC_SEGMENTER={options.segmenter}", "-s", "LOG_LEVEL=WARNING", *top_k], workdir)
    return output


def crawl(site: Site, topic: str, workdir: Path, settings: dict[str, object]) -> Crawl:
    workdir.mkdir(parents=True)
    command = crawl_command(site.url, DEPTH, {**FAST, **settings}, topic=topic)
    started = time.monotonic()
    scrapy(command, workdir)
    seconds = time.monotonic() - started
    scores: dict[str, float] = {}
    fetched: list[str] = []
    for line in (workdir / "crawl.log").read_text("utf-8").splitlines():
        _, url, status, depth, score = line.split("\t")
        path = urlsplit(url).path.lstrip("/")
        if depth == "-":
            continue  # robots.txt
        fetched.append(path)
        if score != "-":
            scores[path] = float(score)
    report = json.loads((workdir / "stats.json").read_text("utf-8"))["report"]
    return Crawl(scores, fetched, report, seconds)


def precision_recall(scores: dict[str, float], labels: dict[str, str], target: str, threshold: float,
                     reachable: int) -> tuple[float, float]:
    chosen = [path for path, score in scores.items() if score >= threshold and path in labels]
    hits = sum(labels[path] == target for path in chosen)
    precision = hits / len(chosen) if chosen else 0.0
    return precision, hits / reachable if reachable else 0.0


def f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def sample_pages(labels: dict[str, str], target: str, count: int) -> list[str]:
    pages = sorted(path for path, label in labels.items() if label == target)
    return [pages[(index + 1) * len(pages) // (count + 1)] for index in range(count)]


def evaluate(scratch: Path, options: argparse.Namespace) -> None:
    labels = build_corpus(CORPUS)
    entry_pages(CORPUS)
    thresholds = [float(value) for value in options.thresholds.split(",")]
    site = Site(CORPUS)
    try:
        print("\n".join(header_lines("bench_topic: topic relevance on Debian's Chinese documentation",
                                     ["scrapy", "jieba"])))
        print(f"  corpus        {len(labels)} pages: "
              + ", ".join(f"{label} {list(labels.values()).count(label)}" for label in sorted(set(labels.values()))))
        print(f"  segmenter     {options.segmenter}; samples per trained topic {options.samples}, top K "
              f"{options.top_k or 'default'}; budget {options.budget}")
        sweeps: dict[tuple[str, str], dict[float, tuple[float, float]]] = {}
        rows = []
        for target in sorted(set(labels.values())):
            workdir = scratch / target
            workdir.mkdir()
            topics = {
                "trained": "@" + str(train(CORPUS, sample_pages(labels, target, options.samples), workdir, options)),
                "keywords": ",".join(KEYWORDS[target]),
            }
            for kind, topic in topics.items():
                base = {"TOPIC_SEGMENTER": options.segmenter}
                every = crawl(site, topic, workdir / f"{kind}-all", {**base, "TOPIC_FOLLOW_ALL": True})
                reachable = sum(labels.get(path) == target for path in every.scores)
                sweeps[target, kind] = {t: precision_recall(every.scores, labels, target, t, reachable) for t in thresholds}
                if options.sweep_only:
                    continue
                focused = crawl(site, topic, workdir / f"{kind}-focused", base)
                precision, recall = precision_recall(focused.scores, labels, target, options.default, reachable)
                on_label = sum(labels.get(path) == target for path in focused.fetched) / max(len(focused.fetched), 1)
                budget = {}
                for follow in ("focused", "all"):
                    for order, extra in (("bfs", {}), ("best", {"TOPIC_BEST_FIRST": True})):
                        run = crawl(site, topic, workdir / f"{kind}-{follow}-{order}", {
                            **base, **extra, "CLOSESPIDER_PAGECOUNT": options.budget, "TOPIC_FOLLOW_ALL": follow == "all"})
                        budget[follow, order] = sum(labels.get(path) == target for path in run.fetched) / max(len(run.fetched), 1)
                rows.append((target, kind, reachable, precision, recall, focused.report["harvest_rate"], on_label,
                             len(focused.fetched), *budget.values()))
        print_sweep(sweeps, thresholds)
        if rows:
            print_rows(rows, options.default)
    finally:
        site.stop()


def print_sweep(sweeps: dict[tuple[str, str], dict[float, tuple[float, float]]], thresholds: list[float]) -> None:
    print("\nAll pages scored: precision / recall (F1) by threshold")
    print(f"  {'target':<12} {'topic':<9} " + " ".join(f"{t:>17}" for t in thresholds))
    for (target, kind), sweep in sweeps.items():
        cells = [f"{p:.2f}/{r:.2f} ({f1(p, r):.2f})" for p, r in (sweep[t] for t in thresholds)]
        print(f"  {target:<12} {kind:<9} " + " ".join(f"{cell:>17}" for cell in cells))
    for kind in ("trained", "keywords", None):
        chosen = [sweep for (_, k), sweep in sweeps.items() if kind in (None, k)]
        means = [statistics.mean(f1(*sweep[t]) for sweep in chosen) for t in thresholds]
        print(f"  {'mean F1':<12} {kind or 'both':<9} " + " ".join(f"{m:>17.3f}" for m in means))


def print_rows(rows: list[tuple], default: float) -> None:
    print(f"\nFocused crawl at TOPIC_THRESHOLD={default}; then target pages per page requested within the budget,"
          " breadth-first (bfs) and best-first (best), focused and following all links")
    columns = [("pages", 5, "d"), ("precision", 9, ".2f"), ("recall", 6, ".2f"), ("harvest", 7, ".2f"),
               ("on-label", 8, ".2f"), ("fetched", 7, "d"), ("foc bfs", 7, ".2f"), ("foc best", 8, ".2f"),
               ("all bfs", 7, ".2f"), ("all best", 8, ".2f")]
    print(f"  {'target':<12} {'topic':<9} " + " ".join(f"{name:>{width}}" for name, width, _ in columns))
    for target, kind, *values in rows:
        print(f"  {target:<12} {kind:<9} " + " ".join(f"{v:>{w}{f}}" for v, (_, w, f) in zip(values, columns, strict=True)))
    for kind in ("trained", "keywords"):
        chosen = [row[2:] for row in rows if row[1] == kind]
        means = [statistics.mean(row[i] for row in chosen) for i in range(len(columns))]
        print(f"  {'mean':<12} {kind:<9} " + " ".join(
            f"{'':>{w}}" if f == "d" else f"{m:>{w}{f}}" for m, (_, w, f) in zip(means, columns, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thresholds", default="0.3,0.5,0.6,0.75,1,1.5,2")
    parser.add_argument("--default", type=float, default=None, help="threshold of the focused runs (default: the setting's)")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=None, help="TOPIC_TOP_K of the trained topics (default: the setting's)")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--segmenter", default="jieba")
    parser.add_argument("--sweep-only", action="store_true", help="only the all-pages crawls and the threshold sweep")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args(argv)
    if options.default is None:
        from topicspider import settings

        options.default = settings.TOPIC_THRESHOLD
    return run_in_scratch("bench_topic", "bench-topic-", options.keep, lambda scratch: evaluate(scratch, options))


if __name__ == "__main__":
    sys.exit(main())

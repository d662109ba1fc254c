"""Crawl throughput of topicspider, with and without topic scoring, against a Scrapy baseline.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_crawl.py [--pages 1000] [--links 5] [--rounds 3]
        [--variants baseline,plain,jieba,rjieba,inline,mysql,noindex,nodup]
        [--mysql-url URL] [--body-chars 3000] [--topic WORD,...]
        [--concurrency 16] [--backlog 128] [--segmentation-only]
        [--profile [--profile-variant plain] [--profile-out FILE]] [--keep]

It generates a linked static site of Chinese pages with
:func:`topicspider.localsite.generate_site` in a temporary directory, serves it with
:mod:`topicspider.localsite` on 127.0.0.1, and then, for each round, crawls the whole
site once with each variant:

* **baseline**: ``scrapy runspider bench/baseline_spider.py``, a minimal breadth-first
  link follower on stock Scrapy, run outside the project (no ``scrapy.cfg``, no
  ``SCRAPY_SETTINGS_MODULE``);
* **plain**: ``scrapy crawl topic`` as the tests run it (:mod:`topicspider.runner`),
  with the project's settings, so every feature is on (robots.txt, site scope, encoding
  fix, SQLite storage, crawl log, report, level scheduler...), but with no politeness
  delay and the baseline's concurrency, to a depth that reaches every page; no topic;
* **jieba**, **rjieba**: the same with a keyword topic (``-a topic=``, ``--topic``) and
  ``TOPIC_SEGMENTER`` set to that segmenter, so every page is segmented and scored;
  ``TOPIC_FOLLOW_ALL`` and ``TOPIC_STORE_ALL`` make it fetch and store every page, as
  the others do, whatever its score; pages are read in the page-analysis processes
  (``PAGE_PROCESSES=2``, the default);
* **inline**: rjieba with ``PAGE_PROCESSES=0``, every page parsed, extracted and scored
  on the reactor thread;
* **unpooled**, **plain-1proc** (not run unless named): plain with ``PAGE_PROCESSES=0``,
  and with one page-analysis process;
* **mysql** (not run unless named): plain, storing into MySQL (``--mysql-url``, a
  database dropped and created afresh before every run) instead of SQLite;
* **noindex** (not run unless named): plain with ``SEARCH_INDEX=false``, pages stored
  without their search index, to show what indexing costs a crawl;
* **nodup** (not run unless named): plain with ``DUPLICATE_CONTENT=false``, no page's
  digest nor SimHash worked out or looked up, to show what duplicate content costs;
* **trained**, **trained-noindex**, **trained-1proc** (not run unless named): a centroid
  topic learnt from 10 of the site's pages against the background sampled from it,
  scoring and storing every page; the same without the search index, and with one
  page-analysis process (``PAGE_PROCESSES=1``, the default until 2026-12-06) instead of two;
* **plain-pygc**, **trained-pygc**, **baseline-gc** (not run unless named): plain and
  trained with Python's own thresholds for the crawler's garbage collector
  (``GC_THRESHOLDS`` empty: 700, 10, 10), and the baseline with topicspider's
  (``-a gc_thresholds=``), to show what the setting is worth to each;
* **jobdir**, **mysql-jobdir** (not run unless named): plain and mysql with a
  ``JOBDIR``, so that the URL store is the durable frontier (every request written as
  it is queued, every URL marked finished once its page is stored), to show what
  durability costs; the summary gives their URL-store writes per page.

Each page's body holds ``--body-chars`` characters of real Chinese prose (0: none, the
generator's one-line pages): the visible text of the ``reference``, ``faq`` and
``maint-guide`` pages of the ``debian-books`` corpus (:mod:`topic_corpus`, built
once into ``bench/.cache/topic-corpora``), a line per block element, lines holding a Han
character only, cut into consecutive windows that wrap around when the site needs more
text than the corpus holds.

The variants run in turn, and their order flips every round (B,P,J,R then R,J,P,B...)
so that drift of the machine does not favour one. Each crawl runs in a fresh working
directory. A run's rate is pages fetched / crawl seconds, both as measured inside the
crawler process from spider opened to spider closed (start-up and imports excluded,
but not the topic's set-up, e.g. jieba loading its dictionary; the "wall" column has
the whole process). The "span" rate divides the same pages by the time from the
first page request to the end of the last, as the site's server logged them, which
leaves out the crawler's set-up and close for every variant alike. Each variant's
ratio to the baseline is taken within a round. The scoring cost per page is
``topic/score_seconds / topic/scored`` from the crawl's stats (the time spent in
segmentation and scoring, in the page-analysis process, or on the reactor thread for
**inline**, the rjieba variant with ``PAGE_PROCESSES=0``). The site's request log checks
independently that each crawl asked for every page; any missing page, error or failed
run stops the benchmark with exit status 1, keeping its files for inspection. Linux's
listen-overflow counter is read around each run, and a warning printed if a
connection was dropped.

Before the crawls, the raw segmentation speed (characters per second) of each
segmenter is measured in this process on the site's page bodies, each cut at
``TOPIC_MAX_CHARS`` as the spider cuts it: the segmenter's own cut (jieba precise mode
with HMM, rjieba with hmm, and jieba_fast if it is importable) and topicspider's
:class:`~topicspider.topic.segment.Segmenter` (cut, then term filtering); best of five
passes, the segmenters taking turns in each. ``--segmentation-only`` stops there.

``--profile`` then runs one topicspider variant (``--profile-variant``) once more under
cProfile and prints the costliest functions by cumulative and by own time, own time per
package, and topicspider's own functions. cProfile sees the reactor thread only (the
SQLite writes run on the storage pipeline's thread), and slows the crawl, so its
pages/s is not comparable.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import pstats
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

import lxml.html
import topic_corpus
from common import REPO, BenchFailure, header_lines, run_in_scratch

BASELINE_SPIDER = REPO / "bench" / "baseline_spider.py"
PROSE_CORPUS = "debian-books"
sys.path.insert(0, str(REPO))

import topicspider.settings as project_settings  # noqa: E402
from topicspider.localsite import generate_site, spawn  # noqa: E402
from topicspider.runner import crawl_command, project_env  # noqa: E402

# Project settings that make up "every feature on"; printed with the results.
TOPICSPIDER_SETTINGS_SHOWN = (
    "ROBOTSTXT_OBEY", "DEPTH_PRIORITY", "SCHEDULER", "SCHEDULER_LEVEL_SYNC",
    "SCHEDULER_MEMORY_QUEUE", "REQUEST_FINGERPRINTER_CLASS", "DUPEFILTER_CLASS",
    "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS", "DATABASE_URL",
    "STORAGE_BATCH_SIZE", "STORAGE_FLUSH_INTERVAL", "CRAWL_LOG", "STATS_FILE", "LOG_LEVEL",
    "TOPIC_MAX_CHARS", "TOPIC_THRESHOLD", "EXTRACT_TEXT_MAX_CHARS",
)
TOP_FUNCTIONS = 25
TARGET_RATIO = 1.0  # issue 20's goal: every feature on, at least the baseline's pages/s
THIRDS_TARGET = 0.95  # and the last third of the crawl at 0.95 of the first third's rate, or more

# The corpus packages of running prose (lilypond's pages are mostly menus and music).
PROSE_LABELS = ("reference", "faq", "maint-guide")
# Elements that end a line of the extracted prose.
LINE_TAGS = ("p", "li", "dt", "dd", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "tr",
             "div", "br", "blockquote", "caption", "table", "title")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
DEFAULT_TOPIC = "软件包,安装,内核,配置,维护者,debian"
SEGMENTATION_PASSES = 5


# --- the variants --------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One crawler set-up: the baseline, or topicspider with extra settings and topic."""

    name: str
    settings: Mapping[str, object] = field(default_factory=dict)  # -s beyond the shared ones
    topic: str = ""  # -a topic=..., empty for none
    train: int = 0  # pages of the site to learn a topic from (-a train=...), 0 for none

    @property
    def is_baseline(self) -> bool:
        """Stock Scrapy's spider (``baseline``, or ``baseline-gc`` with the crawler's
        garbage collector tuned as topicspider's is); ratios are to ``baseline``."""
        return self.name.startswith("baseline")

    @property
    def initial(self) -> str:
        return self.name[0].upper()


VARIANT_NAMES = ("baseline", "plain", "jieba", "rjieba", "inline", "unpooled", "mysql", "noindex", "trained",
                 "trained-noindex", "trained-1proc", "plain-1proc", "jobdir", "mysql-jobdir", "nodup",
                 "plain-pygc", "trained-pygc", "baseline-gc")
TRAINING_PAGES = 10
DEFAULT_VARIANTS = ("baseline", "plain", "jieba", "rjieba", "inline")
DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/topicspider_bench"
# Each durable variant against the same crawler without a JOBDIR, for what durability costs.
WITHOUT_JOBDIR = {"jobdir": "plain", "mysql-jobdir": "mysql"}


def make_variants(names: Sequence[str], topic: str, mysql_url: str = DEFAULT_MYSQL_URL) -> list[Variant]:
    """The named variants, in the order given; the topic ones score with ``topic``."""
    everything = {"TOPIC_FOLLOW_ALL": "true", "TOPIC_STORE_ALL": "true"}
    table = {
        "baseline": Variant("baseline"),
        # The baseline with the garbage collector's thresholds topicspider sets (GC_THRESHOLDS).
        "baseline-gc": Variant("baseline-gc", {"GC_THRESHOLDS": ",".join(map(str, project_settings.GC_THRESHOLDS))}),
        "plain": Variant("plain"),
        "jieba": Variant("jieba", {"TOPIC_SEGMENTER": "jieba", **everything}, topic),
        "rjieba": Variant("rjieba", {"TOPIC_SEGMENTER": "rjieba", **everything}, topic),
        # rjieba with every page read on the reactor thread, as before topicspider.pagepool.
        "inline": Variant("inline", {"TOPIC_SEGMENTER": "rjieba", "PAGE_PROCESSES": "0", **everything}, topic),
        # plain with every page read on the reactor thread.
        "unpooled": Variant("unpooled", {"PAGE_PROCESSES": "0"}),
        # plain with one page-analysis process rather than two.
        "plain-1proc": Variant("plain-1proc", {"PAGE_PROCESSES": "1"}),
        # plain, storing into MySQL: a database created afresh for every run.
        "mysql": Variant("mysql", {"DATABASE_URL": mysql_url}),
        # plain, storing pages without indexing them for search.
        "noindex": Variant("noindex", {"SEARCH_INDEX": "false"}),
        # plain, with no duplicate content looked for (no digest, no SimHash).
        "nodup": Variant("nodup", {"DUPLICATE_CONTENT": "false"}),
        # A centroid topic learnt from 10 of the site's pages against the background
        # sampled from it (the defaults), scoring every page; without the search index too.
        "trained": Variant("trained", everything, train=TRAINING_PAGES),
        "trained-noindex": Variant("trained-noindex", {"SEARCH_INDEX": "false", **everything}, train=TRAINING_PAGES),
        # The trained topic with one page-analysis process instead of two.
        "trained-1proc": Variant("trained-1proc", {"PAGE_PROCESSES": "1", **everything}, train=TRAINING_PAGES),
        # plain and trained with Python's own garbage collector thresholds (700, 10, 10).
        "plain-pygc": Variant("plain-pygc", {"GC_THRESHOLDS": ""}),
        "trained-pygc": Variant("trained-pygc", {"GC_THRESHOLDS": "", **everything}, train=TRAINING_PAGES),
        # plain and mysql with the durable frontier (a JOBDIR in the run's fresh directory).
        "jobdir": Variant("jobdir", {"JOBDIR": "job"}),
        "mysql-jobdir": Variant("mysql-jobdir", {"DATABASE_URL": mysql_url, "JOBDIR": "job"}),
    }
    return [table[name] for name in names]


@dataclass(frozen=True)
class Run:
    crawler: str  # the variant's name
    pages: int  # pages fetched, as the crawler counts them
    elapsed: float  # crawl seconds, spider opened to spider closed, inside the process
    wall: float  # the whole subprocess, interpreter start-up included
    requests: int  # page requests the server saw (robots.txt excluded)
    span: float  # first page request's start to last page request's end, as the server logged them
    overflows: int | None = None  # listen queue overflows during the run, machine-wide
    score_seconds: float | None = None  # topic/score_seconds, for a run with a topic
    scored: int | None = None  # topic/scored
    store_writes: int = 0  # dupefilter/store_writes: URL-store rows written
    store_batches: int = 0  # dupefilter/store_batches: their transactions
    cpu: float = 0.0  # CPU seconds of the crawler and its page-analysis processes, whole run
    max_rss_mb: float = 0.0  # the largest resident set among them
    reactor_cpu: float | None = None  # the reactor thread's CPU seconds, spider opened to closed
    thirds: float | None = None  # request rate over the last third of the pages, over the first third's
    gc_seconds: float | None = None  # the crawler process's garbage collections while it crawled

    @property
    def rate(self) -> float:
        return self.pages / self.elapsed

    @property
    def span_rate(self) -> float:
        return self.requests / self.span

    @property
    def cpu_per_1000(self) -> float:
        """CPU seconds, all processes, per 1000 pages."""
        return 1000 * self.cpu / self.pages

    @property
    def reactor_us(self) -> float | None:
        """The reactor thread's CPU microseconds per page."""
        return None if self.reactor_cpu is None else 1e6 * self.reactor_cpu / self.pages

    @property
    def gc_share(self) -> float | None:
        """The share of the crawl's seconds the crawler process spent collecting garbage."""
        return None if self.gc_seconds is None else self.gc_seconds / self.elapsed

    @property
    def score_ms(self) -> float | None:
        """Mean milliseconds of scoring per scored page."""
        if self.score_seconds is None or not self.scored:
            return None
        return 1000 * self.score_seconds / self.scored


# --- the page bodies -----------------------------------------------------------------

def page_lines(path: Path) -> list[str]:
    """The visible text of an HTML page, a line per block element, whitespace
    normalised; only the lines that hold a Han character."""
    root = lxml.html.fromstring(path.read_bytes())
    for hidden in root.xpath("//script | //style | //noscript"):
        hidden.drop_tree()
    for element in root.iter(*LINE_TAGS):
        element.tail = "\n" + (element.tail or "")
    body = root.find("body")
    text = (root if body is None else body).text_content()
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return [line for line in lines if _HAN.search(line)]


def chinese_prose(name: str = PROSE_CORPUS) -> str:
    """The prose of the corpus's :data:`PROSE_LABELS` pages, a line per paragraph, in
    the order of their paths; the corpus is built first if it is not complete."""
    corpus = topic_corpus.build_corpus(name)
    pages = sorted(path for path, label in corpus.labels.items() if label in PROSE_LABELS)
    return "\n".join(line for path in pages for line in page_lines(corpus.root / path))


def body_source(prose: str, chars: int) -> Callable[[int], str]:
    """Page ``i``'s body: the ``chars`` characters of ``prose`` from ``i * chars`` on,
    wrapping around at its end."""
    looped = (prose + "\n") * (chars // (len(prose) + 1) + 2)

    def body(index: int) -> str:
        start = (index * chars) % (len(prose) + 1)
        return looped[start : start + chars]

    return body


def han_share(text: str) -> float:
    """The share of Han characters among the non-space characters of ``text``."""
    visible = sum(1 for char in text if not char.isspace())
    return len(_HAN.findall(text)) / visible if visible else 0.0


# --- segmentation speed --------------------------------------------------------------

@dataclass(frozen=True)
class SegmentationSpeed:
    name: str
    chars: int
    seconds: float  # the best pass

    @property
    def chars_per_second(self) -> float:
        return self.chars / self.seconds


def _cut_functions() -> dict[str, Callable[[str], object] | str]:
    """Each segmenter's own cut, as topicspider calls it, or why it is missing."""
    cuts: dict[str, Callable[[str], object] | str] = {}
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    cuts["jieba lcut(HMM=True)"] = partial(jieba.lcut, HMM=True)
    try:
        import rjieba
    except ImportError:
        cuts["rjieba cut(hmm=True)"] = "not installed"
    else:
        cuts["rjieba cut(hmm=True)"] = partial(rjieba.cut, hmm=True)
    try:
        import jieba_fast
    except ImportError:
        cuts["jieba_fast lcut(HMM=True)"] = "not installed (not a dependency; measured when importable)"
    else:
        jieba_fast.setLogLevel(logging.WARNING)
        jieba_fast.initialize()
        cuts["jieba_fast lcut(HMM=True)"] = partial(jieba_fast.lcut, HMM=True)
    return cuts


def _topicspider_terms(topic: str) -> dict[str, Callable[[str], object] | str]:
    """topicspider's Segmenter per backend, with the topic's words kept whole as in a
    crawl, or why it could not be set up."""
    from topicspider.topic.segment import Segmenter

    words = [word.strip().lower() for word in topic.split(",") if word.strip()]
    functions: dict[str, Callable[[str], object] | str] = {}
    for backend in ("jieba", "rjieba"):
        name = f"topicspider Segmenter({backend!r}).terms"
        segmenter = Segmenter(backend, keep=words)
        try:
            segmenter.load()
        except Exception as exc:  # noqa: BLE001 - a broken backend is reported, not fatal here
            functions[name] = f"failed to load: {type(exc).__name__}: {exc}"
        else:
            functions[name] = segmenter.terms
    return functions


def pass_time(function: Callable[[str], object], texts: Sequence[str]) -> float:
    """Seconds for ``function`` over every text once."""
    started = time.perf_counter()
    for text in texts:
        function(text)
    return time.perf_counter() - started


def segmentation_speeds(texts: Sequence[str], topic: str) -> list[SegmentationSpeed | str]:
    """Each segmenter's speed over ``texts`` (the best of :data:`SEGMENTATION_PASSES`
    passes, the segmenters taking turns in each), or a note for one that is missing."""
    functions = {**_cut_functions(), **_topicspider_terms(topic)}
    ready = {name: function for name, function in functions.items() if not isinstance(function, str)}
    best = dict.fromkeys(ready, float("inf"))
    for _ in range(SEGMENTATION_PASSES):
        for name, function in ready.items():
            best[name] = min(best[name], pass_time(function, texts))
    chars = sum(len(text) for text in texts)
    return [f"{name}: {function}" if isinstance(function, str) else SegmentationSpeed(name, chars, best[name])
            for name, function in functions.items()]


def print_segmentation(texts: Sequence[str], topic: str, body_chars: int) -> None:
    max_chars = project_settings.TOPIC_MAX_CHARS
    print(f"segmentation speed: {len(texts)} distinct page bodies of at most {max_chars} characters "
          f"(TOPIC_MAX_CHARS), {sum(map(len, texts))} characters; best of {SEGMENTATION_PASSES} passes, "
          "in this process", flush=True)
    per_page = min(body_chars, max_chars)
    print(f"  {'segmenter':<42} {'chars/s':>11} {'ms per ' + str(per_page) + ' chars':>20}")
    for result in segmentation_speeds(texts, topic):
        if isinstance(result, str):
            print(f"  {result}")
        else:
            print(f"  {result.name:<42} {result.chars_per_second:>11,.0f} "
                  f"{1000 * per_page / result.chars_per_second:>20.2f}")
    print(flush=True)


# --- the site and the crawls ---------------------------------------------------------

def listen_overflows() -> int | None:
    """Linux's count of connections dropped because a listen queue was full, machine-wide."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split(), values.split()))
            return int(table["ListenOverflows"]) if "ListenOverflows" in table else None
    return None


class Site:
    """The generated site, served by a ``topicspider.localsite`` subprocess."""

    def __init__(self, root: Path, log_path: Path, depths: Mapping[str, int], backlog: int) -> None:
        self.root = root
        self.log_path = log_path
        self.depths = dict(depths)
        self.backlog = backlog
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self._log_offset = 0

    def start(self) -> None:
        try:
            self.process, port = spawn(self.root, "--port", "0", "--log", str(self.log_path),
                                       "--backlog", str(self.backlog))
        except RuntimeError as exc:
            raise BenchFailure(str(exc)) from None
        self.url = f"http://127.0.0.1:{port}/"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def new_requests(self) -> list[dict[str, Any]]:
        """Requests logged since the last call, once the log has stopped growing."""
        size, deadline = -1, time.monotonic() + 2.0
        while time.monotonic() < deadline:
            current = self.log_path.stat().st_size if self.log_path.exists() else 0
            if current == size:
                break
            size = current
            time.sleep(0.1)
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._log_offset += len(complete)
        return [json.loads(line) for line in complete.splitlines()]

    def check_requests(self, crawler: str, workdir: Path) -> Served:
        """Raise unless every page was requested and answered 200; what the server saw."""
        pages = [r for r in self.new_requests() if r["path"] != "/robots.txt"]
        bad = [r for r in pages if r["status"] != 200]
        missing = set(self.depths) - {r["path"] for r in pages}
        if bad or missing:
            raise BenchFailure(
                f"{crawler}: the server saw {len(bad)} non-200 answers and "
                f"{len(missing)} of {len(self.depths)} pages were never requested "
                f"(e.g. {sorted(missing)[:3]}); see {workdir}"
            )
        starts = sorted(r["start"] for r in pages)
        return Served(len(pages), max(r["end"] for r in pages) - starts[0], thirds_ratio(starts))


@dataclass(frozen=True)
class Served:
    requests: int  # page requests the server saw (robots.txt excluded)
    span: float  # first page request's start to last page request's end
    thirds: float | None  # pages/s over the last third of the requests, over the first third's


def thirds_ratio(starts: Sequence[float]) -> float | None:
    """The request rate over the last third of ``starts`` (sorted), against the first
    third's: below 1, the crawl slowed as it went."""
    third = len(starts) // 3
    if third < 2:
        return None
    first, last = starts[third] - starts[0], starts[-1] - starts[-1 - third]
    return first / last if first > 0 and last > 0 else None


def _baseline_env() -> dict[str, str]:
    """The environment for the baseline: nothing that would find the project's settings
    (no ``SCRAPY_*`` variables, the repository off ``PYTHONPATH``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _setting_args(settings: Mapping[str, object]) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


@dataclass(frozen=True)
class Process:
    wall: float  # the whole subprocess, interpreter start-up included
    cpu: float  # user + system CPU seconds of the process and every process it waited for
    max_rss_mb: float  # the largest resident set of any of them


def _run(command: Sequence[str], workdir: Path, env: Mapping[str, str], timeout: float,
         crawler: str) -> Process:
    """Run a crawl in ``workdir`` with its output in files there; its wall time, CPU
    time (page-analysis processes included: the crawler reaps them) and peak RSS."""
    workdir.mkdir(parents=True)
    started = time.monotonic()
    with (workdir / "stdout.txt").open("w") as out, (workdir / "stderr.txt").open("w") as err:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=err)
        while True:
            # wait4, not wait: the rusage of this child and of the children it reaped.
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                process.kill()
                process.wait()
                raise BenchFailure(f"{crawler} did not finish in {timeout:g}s; see {workdir}")
            time.sleep(0.05)
    wall = time.monotonic() - started
    process.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise BenchFailure(f"{crawler} exited with status {code}:\n{_tail(workdir / 'stderr.txt')}")
    return Process(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def topicspider_command(site: Site, shared: Mapping[str, object], variant: Variant,
                        prefix: Sequence[str] = ()) -> list[str]:
    """The tests' ``scrapy crawl topic`` command (:mod:`topicspider.runner`) for the
    whole site, with the variant's settings and topic; ``prefix`` goes between the
    interpreter and ``-m scrapy``."""
    command = crawl_command(site.url, depth=max(site.depths.values()), settings={**shared, **variant.settings})
    if variant.topic:
        command += ["-a", f"topic={variant.topic}"]
    if variant.train:
        pages = sorted(site.depths)
        chosen = [pages[(index + 1) * len(pages) // (variant.train + 1)] for index in range(variant.train)]
        command += ["-a", "train=" + ",".join(site.url.rstrip("/") + path for path in chosen)]
    return [command[0], *prefix, *command[1:]]


def run_topicspider(site: Site, workdir: Path, shared: Mapping[str, object], timeout: float,
                    *, variant: Variant, prefix: Sequence[str] = ()) -> Run:
    command = topicspider_command(site, shared, variant, prefix)
    mysql_url = str(variant.settings.get("DATABASE_URL", ""))
    if mysql_url:
        fresh_mysql_database(mysql_url)
    process = _run(command, workdir, project_env(), timeout, variant.name)
    stats_path = workdir / "stats.json"
    if not stats_path.exists():
        raise BenchFailure(f"{variant.name} wrote no stats.json:\n{_tail(workdir / 'stderr.txt')}")
    document = json.loads(stats_path.read_text())
    report, stats = document["report"], document["stats"]
    stored = count_mysql_pages(mysql_url) if mysql_url else count_sqlite_pages(workdir / "topicspider.db")
    expected = len(site.depths)
    scored = stats.get("topic/scored") if variant.topic or variant.train else None
    if (report["pages_fetched"] != expected or stored != expected or report["errors"]
            or report["finish_reason"] != "finished" or scored not in (None, expected)):
        raise BenchFailure(
            f"{variant.name}: {report['pages_fetched']} pages fetched, {stored} stored, {scored} scored, "
            f"{report['errors']} errors, finish reason {report['finish_reason']!r}; "
            f"expected {expected} pages; see {workdir}"
        )
    served = site.check_requests(variant.name, workdir)
    score_seconds = stats.get("topic/score_seconds", 0.0) if variant.topic or variant.train else None
    return Run(variant.name, report["pages_fetched"], report["elapsed_seconds"], process.wall, served.requests,
               served.span, score_seconds=score_seconds, scored=scored,
               store_writes=stats.get("dupefilter/store_writes", 0),
               store_batches=stats.get("dupefilter/store_batches", 0), cpu=process.cpu,
               max_rss_mb=process.max_rss_mb, reactor_cpu=stats.get("crawl/reactor_cpu_seconds"),
               thirds=served.thirds, gc_seconds=stats.get("gc/seconds"))


def count_sqlite_pages(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM pages").fetchone()[0])


def _mysql_server(url: str) -> tuple[Any, str]:
    """A connection to ``url``'s server (no database selected), and the database's name."""
    from topicspider.storage.mysql import parse_mysql_url

    target = parse_mysql_url(url)
    import pymysql

    connection = pymysql.connect(host=target.host, port=target.port, user=target.user, password=target.password,
                                 charset="utf8mb4", autocommit=True)
    return connection, target.database


def fresh_mysql_database(url: str) -> None:
    connection, database = _mysql_server(url)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    connection.close()


def count_mysql_pages(url: str) -> int:
    connection, database = _mysql_server(url)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM `{database}`.pages")
        (count,) = cursor.fetchone()
    connection.close()
    return int(count)


def run_baseline(site: Site, workdir: Path, shared: Mapping[str, object], timeout: float,
                 variant: Variant = Variant("baseline")) -> Run:
    if workdir.resolve().is_relative_to(REPO):
        raise BenchFailure(f"the baseline must run outside the repository, not in {workdir}")
    result_path = workdir / "result.json"
    command = [sys.executable, "-m", "scrapy", "runspider", str(BASELINE_SPIDER),
               "-a", f"url={site.url}", "-a", f"result={result_path}", *_setting_args(shared)]
    process = _run(command + _baseline_arguments(variant), workdir, _baseline_env(), timeout, variant.name)
    if not result_path.exists():
        raise BenchFailure(f"baseline wrote no result.json:\n{_tail(workdir / 'stderr.txt')}")
    result = json.loads(result_path.read_text())
    if result["bot_name"] != "scrapybot":
        raise BenchFailure(f"baseline ran with project settings (bot {result['bot_name']!r})")
    if result["items"] < len(site.depths) or result["finish_reason"] != "finished":
        raise BenchFailure(
            f"baseline: {result['items']} items, finish reason {result['finish_reason']!r}; "
            f"expected {len(site.depths)} pages; see {workdir}"
        )
    served = site.check_requests(variant.name, workdir)
    return Run(variant.name, result["pages"], result["elapsed_seconds"], process.wall, served.requests, served.span,
               cpu=process.cpu, max_rss_mb=process.max_rss_mb, reactor_cpu=result.get("reactor_cpu_seconds"),
               thirds=served.thirds, gc_seconds=result.get("gc_seconds"))


def _baseline_arguments(variant: Variant) -> list[str]:
    """The baseline spider's arguments beyond its URL and result file: ``baseline-gc``'s thresholds."""
    if "GC_THRESHOLDS" not in variant.settings:
        return []
    return ["-a", f"gc_thresholds={variant.settings['GC_THRESHOLDS']}"]


def crawler_for(variant: Variant) -> Callable[[Site, Path, Mapping[str, object], float], Run]:
    """The function that crawls the site once as ``variant``."""
    return partial(run_baseline if variant.is_baseline else run_topicspider, variant=variant)


def _load_baseline_settings() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("baseline_spider", BASELINE_SPIDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.BaselineSpider.custom_settings)


def print_conditions(options: argparse.Namespace, site: Site, shared: Mapping[str, object],
                     variants: Sequence[Variant], bodies: Sequence[str]) -> None:
    print("\n".join(header_lines("topicspider crawl benchmark",
                                 ("scrapy", "twisted", "lxml", "parsel", "w3lib", "tldextract", "jieba",
                                  "rjieba"))))
    depth = max(site.depths.values())
    print(f"  site          {len(site.depths)} pages, {options.links} random links per page + a spanning "
          f"tree, seed {options.seed}, max depth {depth}; topicspider.localsite at {site.url} "
          "(threaded http.server, same machine)")
    if options.body_chars:
        sample = "".join(bodies)
        print(f"  page bodies   {options.body_chars} characters of Chinese prose each (--body-chars), "
              f"{len(bodies)} distinct windows of the Debian documentation corpus ({', '.join(PROSE_LABELS)}; "
              f"corpus {PROSE_CORPUS}), {100 * han_share(sample):.0f}% Han characters "
              f"(of non-space); mean page size {_mean_page_bytes(site.root):,.0f} bytes")
    else:
        print(f"  page bodies   none (--body-chars 0): one line per page; mean page size "
              f"{_mean_page_bytes(site.root):,.0f} bytes")
    print(f"  server        listen backlog {site.backlog} (--backlog)")
    order = ",".join(v.initial for v in variants)
    reverse = ",".join(v.initial for v in reversed(variants))
    print(f"  rounds        {options.rounds}, order alternating ({order} / {reverse}); fresh working "
          "directory per run")
    print("  rate          pages fetched / crawl seconds (spider opened to spider closed, measured in the "
          "crawler process; start-up excluded, topic set-up included)")
    print("  span rate     page requests / server-logged seconds from the first page request to the "
          "end of the last")
    print("  shared        " + " ".join(f"-s {k}={v}" for k, v in shared.items()))
    for variant in variants:
        if variant.is_baseline:
            print(f"  {variant.name:<13} python -m scrapy runspider {BASELINE_SPIDER.relative_to(REPO)} "
                  f"-a url={site.url} -a result=result.json " + " ".join([*_baseline_arguments(variant),
                                                                          *_setting_args(shared)]))
        else:
            print(f"  {variant.name:<13} " + " ".join(["python", *topicspider_command(site, shared, variant)[1:]]))
    if any(not variant.is_baseline for variant in variants):
        print("  topicspider   with SCRAPY_SETTINGS_MODULE=topicspider.settings; project settings in effect:")
        for name in TOPICSPIDER_SETTINGS_SHOWN:
            print(f"                  {name} = {getattr(project_settings, name)!r}")
    if any(variant.is_baseline for variant in variants):
        print("  baseline      outside the project (no scrapy.cfg, no SCRAPY_SETTINGS_MODULE); custom_settings:")
        for name, value in _load_baseline_settings().items():
            print(f"                  {name} = {value!r}" + ("  (overridden by -s)" if name in shared else ""))
    print(flush=True)


def _mean_page_bytes(root: Path) -> float:
    sizes = [path.stat().st_size for path in root.glob("*.html")]
    return sum(sizes) / len(sizes)


Round = tuple[str, dict[str, Run]]  # the order, e.g. "B,P,J,R", and each variant's run


def _ratio_text(ratios: Sequence[float]) -> str:
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def print_rounds(variants: Sequence[Variant], rounds: Sequence[Round]) -> None:
    """One line per round: each variant's crawl seconds and pages/s, and its ratio to the baseline."""
    names = [variant.name for variant in variants]
    compared = [name for name in names if name != "baseline"] if "baseline" in names else []
    header = (f"{'round':<6} {'order':<8}| " + " | ".join(f"{name:^15}" for name in names)
              + (" | " + " ".join(f"{name[:6] + '/B':>8}" for name in compared) if compared else ""))
    units = (f"{'':<15}| " + " | ".join(f"{'crawl s':>7} {'pages/s':>7}" for _ in names)
             + (" | " + " ".join(f"{'':>8}" for _ in compared) if compared else ""))
    print(header)
    print(units)
    print("-" * len(header))
    for index, (order, runs) in enumerate(rounds, 1):
        cells = " | ".join(f"{runs[name].elapsed:>7.2f} {runs[name].rate:>7.1f}" for name in names)
        ratios = " ".join(f"{runs[name].rate / runs['baseline'].rate:>8.3f}" for name in compared)
        print(f"{index:<6} {order:<8}| {cells}" + (f" | {ratios}" if compared else ""))
    print()


def _print_head(title: str, header: str) -> None:
    print(title)
    print(header)
    print("-" * len(header))


def print_summary(variants: Sequence[Variant], rounds: Sequence[Round]) -> None:
    """Per variant: median pages/s, ratio to the baseline (median and range over the
    rounds), the same by span rate, and the scoring cost."""
    names = [variant.name for variant in variants]
    has_baseline = "baseline" in names
    header = (f"{'variant':<9} {'pages':>6} {'crawl s':>8} {'wall s':>7} {'pages/s':>8} {'ratio to baseline':>22} "
              f"{'span p/s':>9} {'span ratio':>22} {'score ms/page':>14} {'score % of crawl':>17}")
    _print_head("summary: medians over the rounds; ratios are median (min-max) of the per-round ratios", header)
    for name in names:
        runs = [r[name] for _, r in rounds]
        if has_baseline and name != "baseline":
            ratio = _ratio_text([r[name].rate / r["baseline"].rate for _, r in rounds])
            span_ratio = _ratio_text([r[name].span_rate / r["baseline"].span_rate for _, r in rounds])
        else:
            ratio = span_ratio = ""
        scored = [run for run in runs if run.score_ms is not None]
        if scored:
            total_seconds = sum(run.score_seconds or 0.0 for run in scored)
            score_ms = f"{1000 * total_seconds / sum(run.scored or 0 for run in scored):.2f}"
            share = f"{100 * total_seconds / sum(run.elapsed for run in scored):.1f}"
        else:
            score_ms = share = ""
        print(f"{name:<9} {runs[0].pages:>6} {statistics.median(r.elapsed for r in runs):>8.2f} "
              f"{statistics.median(r.wall for r in runs):>7.2f} {statistics.median(r.rate for r in runs):>8.1f} "
              f"{ratio:>22} {statistics.median(r.span_rate for r in runs):>9.1f} {span_ratio:>22} "
              f"{score_ms:>14} {share:>17}")
    print()
    if has_baseline:
        for name in names:
            if name == "baseline":
                continue
            ratios = [r[name].rate / r["baseline"].rate for _, r in rounds]
            verdict = "met" if statistics.median(ratios) >= TARGET_RATIO else "NOT met"
            low = "" if min(ratios) >= TARGET_RATIO else f" (lowest round {min(ratios):.3f})"
            print(f"target {TARGET_RATIO}x the baseline's pages/s: {name} {verdict} at median "
                  f"{statistics.median(ratios):.3f}{low}")


def _median_text(values: Sequence[float | None], form: str) -> str:
    known = [value for value in values if value is not None]
    return format(statistics.median(known), form) if known else "-"


def print_costs(variants: Sequence[Variant], rounds: Sequence[Round]) -> None:
    """Per variant, medians over the rounds: CPU seconds per 1000 pages (the crawler
    and its page-analysis processes), the reactor thread's CPU per page, the peak
    RSS of any one process, how the request rate held up (last third against first), and
    the share of the crawl the crawler process spent collecting garbage."""
    header = (f"{'variant':<9} {'CPU s/1000 pages':>17} {'reactor µs/page':>16} {'peak RSS MB':>12} "
              f"{'last/first third':>17} {'GC % of crawl':>14}")
    _print_head("costs: medians over the rounds (CPU: all processes, whole run, start-up included)", header)
    for variant in variants:
        runs = [r[variant.name] for _, r in rounds]
        print(f"{variant.name:<9} {_median_text([r.cpu_per_1000 for r in runs], '.2f'):>17} "
              f"{_median_text([r.reactor_us for r in runs], '.0f'):>16} "
              f"{_median_text([r.max_rss_mb for r in runs], '.0f'):>12} "
              f"{_median_text([r.thirds for r in runs], '.3f'):>17} "
              f"{_median_text([None if r.gc_share is None else 100 * r.gc_share for r in runs], '.1f'):>14}")
    print()
    for variant in variants:
        thirds = [r[variant.name].thirds for _, r in rounds if r[variant.name].thirds is not None]
        if thirds and variant.name != "baseline":
            verdict = "met" if statistics.median(thirds) >= THIRDS_TARGET else "NOT met"
            print(f"target last third at {THIRDS_TARGET}x the first's rate: {variant.name} {verdict} at median "
                  f"{statistics.median(thirds):.3f}")
    print()


def print_checks(variants: Sequence[Variant], rounds: Sequence[Round]) -> None:
    writes = {name: (sum(r[name].store_writes for _, r in rounds), sum(r[name].store_batches for _, r in rounds),
                     sum(r[name].pages for _, r in rounds)) for name in (v.name for v in variants) if name != "baseline"}
    for durable, volatile in WITHOUT_JOBDIR.items():
        if durable in writes and volatile in writes:
            ratios = [r[durable].rate / r[volatile].rate for _, r in rounds]
            print(f"{durable} against {volatile} (pages/s, paired per round): median {statistics.median(ratios):.3f}"
                  f" ({min(ratios):.3f}-{max(ratios):.3f})")
    print("URL-store rows written per page (transactions per page): "
          + ", ".join(f"{name} {rows / pages:.2f} ({batches / pages:.3f})"
                      for name, (rows, batches, pages) in writes.items() if pages))
    requests = {(run.crawler, run.requests) for _, runs in rounds for run in runs.values()}
    print("page requests seen by the server per run: "
          + ", ".join(f"{name} {count}" for name, count in sorted(requests)))
    overflows = {v.name: [runs[v.name].overflows for _, runs in rounds] for v in variants}
    print("listen queue overflows during each run (machine-wide, Linux): "
          + "; ".join(f"{name} {counts}" for name, counts in overflows.items()))
    if any(count for counts in overflows.values() for count in counts):
        print("WARNING: connections were dropped and retried a second later (raise --backlog, or "
              "another process overflowed its queue); these figures are suspect")
    sys.stdout.flush()


def print_results(variants: Sequence[Variant], rounds: Sequence[Round]) -> None:
    print_rounds(variants, rounds)
    print_summary(variants, rounds)
    print_costs(variants, rounds)
    print_checks(variants, rounds)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"finished {datetime.now().astimezone().isoformat(timespec='seconds')}; load average {load}")


# --- profile -----------------------------------------------------------------------

Key = tuple[str, int, str]


def _short(key: Key) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    text = filename.replace("\\", "/")
    for marker in ("site-packages/", f"/python{sys.version_info.major}.{sys.version_info.minor}/"):
        if marker in text:
            return f"{text.split(marker, 1)[1]}:{line}({function})"
    path = Path(filename)
    if path.is_relative_to(REPO):
        text = str(path.relative_to(REPO))
    return f"{text}:{line}({function})"


def _package(key: Key) -> str:
    """Who a function belongs to: topicspider, a third-party package, the standard
    library, or, for C functions, the module named in their description ("(C)")."""
    filename, _, function = key
    if filename == "~":
        for prefix in ("<method '", "<built-in method ", "<function "):
            function = function.replace(prefix, "")
        owner = function.split(" of '", 1)[1] if " of '" in function else function
        module = owner.split(".", 1)[0].strip("'<>") if "." in owner else "builtins"
        return f"{module} (C)"
    text = filename.replace("\\", "/")
    if "site-packages/" in text:
        return text.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    path = Path(filename)
    if path.is_relative_to(REPO):
        return path.relative_to(REPO).parts[0]
    stdlib = f"/python{sys.version_info.major}.{sys.version_info.minor}/"
    module = text.split(stdlib, 1)[1] if stdlib in text else text.lstrip("<").split(">", 1)[0]
    return "stdlib " + module.split("/", 1)[0].removesuffix(".py")


def _print_functions(title: str, rows: list[tuple[Key, tuple[Any, ...]]], total: float, out: IO[str]) -> None:
    print(f"\n{title}", file=out)
    print(f"{'ncalls':>9} {'tottime':>8} {'cumtime':>8} {'cum %':>6}  function", file=out)
    for key, (_, ncalls, tottime, cumtime, _) in rows:
        print(f"{ncalls:>9} {tottime:>8.3f} {cumtime:>8.3f} {100 * cumtime / total:>5.1f}%  {_short(key)}", file=out)


def print_profile(path: Path, top: int = TOP_FUNCTIONS, out: IO[str] = sys.stdout) -> None:
    stats = pstats.Stats(str(path))
    entries: dict[Key, tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]
    print(f"\nprofile {path}: {total:.2f}s of the reactor thread in total "
          "(idle time is in the selector's poll)", file=out)
    by_cumulative = sorted(entries.items(), key=lambda item: item[1][3], reverse=True)
    by_own = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)
    # Functions run once are the start-up chain (runpy, cmdline, reactor.run...) and
    # module bodies: they would fill the list with ~100% entries that say nothing.
    repeated = [item for item in by_cumulative if item[1][1] > 1]
    _print_functions(f"top {top} by cumulative time (functions called more than once)",
                     repeated[:top], total, out)
    _print_functions(f"top {top} by own time (tottime)", by_own[:top], total, out)

    per_package: dict[str, float] = defaultdict(float)
    for key, (_, _, tottime, _, _) in entries.items():
        per_package[_package(key)] += tottime
    print("\nown time per package", file=out)
    for package, seconds in sorted(per_package.items(), key=lambda item: item[1], reverse=True)[:20]:
        print(f"  {seconds:>8.3f}s {100 * seconds / total:>5.1f}%  {package}", file=out)

    ours = [item for item in by_cumulative if _package(item[0]) == "topicspider"]
    _print_functions("topicspider's own functions by cumulative time (includes the library calls they make)",
                     ours[:top], total, out)


# --- main ----------------------------------------------------------------------------

def _variant_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANT_NAMES]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"give distinct names among {','.join(VARIANT_NAMES)} (got {text!r})")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pages", type=int, default=1000, help="pages in the site (default 1000)")
    parser.add_argument("--links", type=int, default=5, help="random links per page (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the site (default 0)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every variant (default 3)")
    parser.add_argument("--variants", type=_variant_names, default=list(DEFAULT_VARIANTS),
                        help=f"crawlers to compare, in the order of the first round, of {','.join(VARIANT_NAMES)}"
                             f" (default {','.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--mysql-url", default=DEFAULT_MYSQL_URL,
                        help="the mysql variant's DATABASE_URL; that database is dropped and created for every run"
                             f" (default {DEFAULT_MYSQL_URL})")
    parser.add_argument("--body-chars", type=int, default=3000,
                        help="characters of Chinese prose per page body; 0 for none (default 3000)")
    parser.add_argument("--topic", default=DEFAULT_TOPIC,
                        help=f"keywords of the jieba and rjieba variants' topic (default {DEFAULT_TOPIC})")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="CONCURRENT_REQUESTS and CONCURRENT_REQUESTS_PER_DOMAIN of all (default 16)")
    parser.add_argument("--backlog", type=int, default=128,
                        help="listen backlog of the site's server (default 128)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per crawl (default 300)")
    parser.add_argument("--segmentation-only", action="store_true",
                        help="measure the segmenters' speed on the page bodies, crawl nothing")
    parser.add_argument("--profile", action="store_true", help="then profile one topicspider crawl")
    parser.add_argument("--profile-variant", choices=[n for n in VARIANT_NAMES if n != "baseline"], default="plain",
                        help="the variant to profile (default plain)")
    parser.add_argument("--profile-out", type=Path, help="keep the cProfile output in this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args(argv)
    if min(options.links, options.rounds, options.concurrency, options.backlog) < 1 or options.pages < 2:
        parser.error("--pages must be at least 2; --links, --rounds, --concurrency and --backlog at least 1")
    if options.body_chars < 0:
        parser.error("--body-chars must be 0 or more")
    if options.segmentation_only and not options.body_chars:
        parser.error("--segmentation-only needs page bodies (--body-chars above 0)")
    return options


def _counting_overflows(crawl: Callable[[Site, Path, Mapping[str, object], float], Run], site: Site,
                        workdir: Path, shared: Mapping[str, object], timeout: float) -> Run:
    """``crawl(site, workdir, shared, timeout)``, with the listen overflows it caused."""
    before = listen_overflows()
    run = crawl(site, workdir, shared, timeout)
    after = listen_overflows()
    return run if before is None or after is None else replace(run, overflows=after - before)


def page_bodies(options: argparse.Namespace) -> tuple[Callable[[int], str] | None, list[str]]:
    """The site's body text function, and the distinct bodies (cut at
    ``TOPIC_MAX_CHARS``) for the segmentation speeds; none for ``--body-chars 0``."""
    if not options.body_chars:
        return None, []
    prose = chinese_prose()
    body = body_source(prose, options.body_chars)
    distinct = min(options.pages, -(-(len(prose) + 1) // options.body_chars))
    return body, [body(index)[: project_settings.TOPIC_MAX_CHARS] for index in range(distinct)]


def crawl_rounds(options: argparse.Namespace, site: Site, shared: Mapping[str, object],
                 variants: Sequence[Variant], scratch: Path) -> list[Round]:
    """Every variant once per round, the order reversed every other round."""
    rounds: list[Round] = []
    for index in range(1, options.rounds + 1):
        runs_dir = scratch / "runs" / f"round{index}"
        order = list(variants) if index % 2 == 1 else list(reversed(variants))
        done: dict[str, Run] = {}
        for variant in order:
            print(f"round {index}: {variant.name}...", end=" ", flush=True)
            done[variant.name] = _counting_overflows(crawler_for(variant), site, runs_dir / variant.name,
                                                     shared, options.timeout)
            print(f"{done[variant.name].rate:.1f} pages/s", flush=True)
        rounds.append((",".join(v.initial for v in order), done))
    print()
    return rounds


def profile(options: argparse.Namespace, site: Site, shared: Mapping[str, object], scratch: Path) -> None:
    variant = make_variants([options.profile_variant], options.topic)[0]
    profile_path = (options.profile_out or scratch / "topicspider.prof").resolve()
    prefix = ("-m", "cProfile", "-o", str(profile_path))
    print(f"\nprofiling {variant.name}:", " ".join(topicspider_command(site, shared, variant, prefix)))
    run = run_topicspider(site, scratch / "runs" / "profile", shared, options.timeout * 3,
                          variant=variant, prefix=prefix)
    print(f"profiled crawl: {run.pages} pages in {run.elapsed:.2f}s ({run.rate:.1f} pages/s under the profiler)")
    print_profile(profile_path)


def benchmark(options: argparse.Namespace, scratch: Path) -> None:
    shared = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": options.concurrency,
              "CONCURRENT_REQUESTS_PER_DOMAIN": options.concurrency}
    variants = make_variants(options.variants, options.topic, options.mysql_url)
    body, bodies = page_bodies(options)
    if options.segmentation_only:
        print("\n".join(header_lines("topicspider segmentation speed", ("jieba", "rjieba"))))
        print(f"  page bodies   {options.body_chars} characters (--body-chars), "
              f"{100 * han_share(''.join(bodies)):.0f}% Han characters (of non-space)\n")
        print_segmentation(bodies, options.topic, options.body_chars)
        return
    depths = generate_site(scratch / "site", options.pages, options.links, seed=options.seed, body_text=body)
    site = Site(scratch / "site", scratch / "requests.log", depths, options.backlog)
    site.start()
    try:
        print_conditions(options, site, shared, variants, bodies)
        if bodies:
            print_segmentation(bodies, options.topic, options.body_chars)
        print_results(variants, crawl_rounds(options, site, shared, variants, scratch))
        if options.profile:
            profile(options, site, shared, scratch)
    finally:
        site.stop()


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_in_scratch("bench_crawl", "topicspider-bench-", options.keep,
                          lambda scratch: benchmark(options, scratch))


if __name__ == "__main__":
    sys.exit(main())

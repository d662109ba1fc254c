"""What runs in a page-analysis process of :mod:`topicspider.pagepool`
(``PAGE_PROCESSES``): its start, the rules it holds, and each page read under them.

Kept apart from the pool, which runs on the reactor: a worker imports this module to
unpickle its functions, and loads only what reads a page (lxml, the segmenters), never
Scrapy or Twisted, which took a third of a second of each worker's start.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
from collections.abc import Callable
from multiprocessing.synchronize import Barrier

from topicspider.analysis import Page, PageAnalysis, PageRules, analyse_page, load_dictionaries

Analyse = Callable[[Page, PageRules], PageAnalysis]

# What a worker answers for a page sent under rules other than its own, without them.
STALE_RULES = "stale rules"

_worker_rules: PageRules | None = None
_worker_version = 0
_worker_analyse: Analyse = analyse_page
_all_started: Barrier | None = None  # the pool's, one party per worker


def init_worker(rules: PageRules, version: int, analyse: Analyse, segmenter: str,
                all_started: Barrier | None = None) -> None:
    """A worker's start: ``rules`` at ``version``, read by ``analyse``, with the
    dictionary of ``segmenter`` (if any) and the Public Suffix List loaded;
    ``all_started``, a barrier :func:`worker_ready` waits at."""
    global _worker_analyse, _all_started
    _all_started = all_started
    # Ctrl-C reaches the whole process group; the crawler decides when to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_the_crawler()
    _worker_analyse = analyse
    if segmenter:
        # Rules that come later with a topic find its dictionary loaded.
        from topicspider.topic.segment import Segmenter

        Segmenter(segmenter).load()
    _take_rules(rules, version)
    from topicspider.urls import has_public_suffix

    has_public_suffix("example.com")  # loads the Public Suffix List


def _exit_with_the_crawler() -> None:
    """End this worker when the crawler's process ends, however it ends. A worker waits
    for pages on a queue whose writing end it holds too, so a crawler killed outright
    (SIGKILL, out of memory) would leave it waiting for good; multiprocessing's sentinel
    of the parent becomes readable when the parent is gone."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_for_the_crawler() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=wait_for_the_crawler, name="crawler-watch", daemon=True).start()


def _take_rules(rules: PageRules, version: int) -> None:
    global _worker_rules, _worker_version
    load_dictionaries(rules)
    _worker_rules, _worker_version = rules, version


def analyse_in_worker(page: Page, version: int, rules: bytes | None) -> PageAnalysis | str:
    """``page`` read under the rules of ``version`` (``rules``, pickled, when the pool
    has them), or :data:`STALE_RULES` when this worker holds others and was not sent
    them."""
    if version != _worker_version:
        if rules is None:
            return STALE_RULES
        given: PageRules = pickle.loads(rules)  # noqa: S301 - from the crawler process, not the network
        if version < _worker_version:
            # A page sent before newer rules reached this worker: read under its own.
            return _worker_analyse(page, given)
        _take_rules(given, version)
    assert _worker_rules is not None
    return _worker_analyse(page, _worker_rules)


def worker_ready() -> bool:
    """What a worker answers once started: the pool waits for as many answers as it
    has workers. Each waits at the pool's barrier until every worker has taken one such
    call, so that no worker answers twice for one still loading (whose load would then
    take CPU from the crawl's first pages)."""
    if _all_started is not None:
        _all_started.wait()
    return True

"""Page analysis off the reactor thread, in worker processes.

``PAGE_PROCESSES`` (default 1) worker processes run :func:`topicspider.analysis.analyse_page`
for the ``topic`` spider: parsing, extraction, segmentation and scoring take a few
milliseconds of CPU per page, which would otherwise hold the reactor, the one thread
that downloads, schedules and stores. Processes, not threads: lxml and the segmenters
hold the GIL. ``PAGE_PROCESSES = 0`` analyses pages on the reactor thread.

The workers are started with ``spawn`` (a fork of a process running a reactor and
threads could inherit a held lock) and each loads the crawl's :class:`PageRules`,
segmenter dictionary included, once. A worker that dies (killed, out of memory, a
crash in a C library) breaks the pool, and every page it held fails with it: a new
pool is started (``pagepool/restarts``), and those pages are analysed again one at a
time in a pool of one process of their own, so that the page that kills a worker there
is the culprit: it is given up and counted (``pagepool/lost``), the others are read.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred, DeferredLock

from topicspider.analysis import Page, PageAnalysis, PageRules, analyse_page
from topicspider.config import get_int

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

Analyse = Callable[[Page, PageRules], PageAnalysis]

_worker_rules: PageRules | None = None
_worker_analyse: Analyse = analyse_page


class PageLost(Exception):
    """A page broke the pool on every attempt."""


def _init_worker(rules: PageRules, analyse: Analyse) -> None:
    global _worker_rules, _worker_analyse
    # Ctrl-C reaches the whole process group; the crawler decides when to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_rules, _worker_analyse = rules, analyse
    if rules.topic is not None:
        rules.topic.segmenter.load()
    from topicspider.urls import has_public_suffix

    has_public_suffix("example.com")  # loads the Public Suffix List


def _analyse_in_worker(page: Page) -> PageAnalysis:
    assert _worker_rules is not None
    return _worker_analyse(page, _worker_rules)


def _ready() -> bool:
    return True


class PagePool:
    def __init__(self, crawler: Crawler, processes: int, analyse: Analyse = analyse_page) -> None:
        self.crawler = crawler
        self.processes = processes
        self.analyse_function = analyse
        self.rules: PageRules | None = None
        self._executor: ProcessPoolExecutor | None = None
        # Pages whose pool broke, retried one at a time.
        self._quarantine: ProcessPoolExecutor | None = None
        self._quarantine_lock = DeferredLock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PagePool:
        return cls(crawler, get_int(crawler.settings, "PAGE_PROCESSES"))

    def start(self, rules: PageRules) -> None:
        """Start the workers now (they load while the seeds download)."""
        self.rules = rules
        if self.processes:
            self._executor = self._new_executor(self.processes)
            for _ in range(self.processes):
                self._executor.submit(_ready)

    def _new_executor(self, processes: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(self.rules, self.analyse_function),
        )

    async def analyse(self, page: Page) -> PageAnalysis:
        assert self.rules is not None, "PagePool.start() first"
        if self._executor is None:
            return self.analyse_function(page, self.rules)
        executor = self._executor
        try:
            return await _submit(executor, page)
        except BrokenProcessPool:
            self._replace(executor)
        return await self._analyse_alone(page)

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        if self._executor is not broken:
            return  # another page's failure replaced it already
        logger.error("A page-analysis process died; starting new ones")
        self._count("pagepool/restarts")
        broken.shutdown(wait=False, cancel_futures=True)
        self._executor = self._new_executor(self.processes)

    async def _analyse_alone(self, page: Page) -> PageAnalysis:
        await maybe_deferred_to_future(self._quarantine_lock.acquire())
        try:
            if self._quarantine is None:
                self._quarantine = self._new_executor(1)
            try:
                return await _submit(self._quarantine, page)
            except BrokenProcessPool:
                self._quarantine.shutdown(wait=False)
                self._quarantine = None
        finally:
            self._quarantine_lock.release()
        self._count("pagepool/lost")
        raise PageLost(f"a page-analysis process dies reading {page.url}")

    def close(self) -> None:
        for executor in (self._executor, self._quarantine):
            if executor is not None:
                # Not wait=True: that would block the reactor until every worker has exited.
                executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._quarantine = None

    def _count(self, key: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key)


async def _submit(executor: ProcessPoolExecutor, page: Page) -> PageAnalysis:
    return await maybe_deferred_to_future(_deferred(executor.submit(_analyse_in_worker, page)))


def _deferred(future: Future[Any]) -> Deferred[Any]:
    """A Deferred fired on the reactor thread when ``future`` is done."""
    from twisted.internet import reactor

    deferred: Deferred[Any] = Deferred()

    def fire(done: Future[Any]) -> None:
        try:
            result = done.result()  # raises CancelledError for a page left at close
        except BaseException as error:
            deferred.errback(error)
        else:
            deferred.callback(result)

    future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
    return deferred

"""Page analysis off the reactor thread, in worker processes.

``PAGE_PROCESSES`` (default 1) worker processes run :func:`topicspider.analysis.analyse_page`
for the ``topic`` spider: parsing, extraction, segmentation and scoring take a few
milliseconds of CPU per page, which would otherwise hold the reactor, the one thread
that downloads, schedules and stores. Processes, not threads: lxml and the segmenters
hold the GIL. ``PAGE_PROCESSES = 0`` analyses pages on the reactor thread.

The workers are started with ``spawn`` (a fork of a process running a reactor and
threads could inherit a held lock) and each loads the crawl's :class:`PageRules`,
segmenter dictionary included, once. A worker that dies (killed, out of memory, a
crash in a C library), or one that takes over ``PAGE_TIMEOUT`` seconds on a page (one
more such allowance for each page queued before it) and is stopped, breaks the pool, and every page it held fails with it: a new pool is started
(``pagepool/restarts``), and those pages are analysed again one at a time in a pool of
one process of their own, so that a page that kills or hangs a worker there is the
culprit: it is given up and counted (``pagepool/lost``), the others are read. After
:data:`MAX_DEATHS_IN_A_ROW` restarts with no page read in between (a worker that
cannot start, memory exhausted), :class:`PagePoolFailed` ends the crawl.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from collections.abc import Callable
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet.defer import Deferred, DeferredLock

from topicspider.analysis import Page, PageAnalysis, PageRules, analyse_page
from topicspider.config import get_float, get_int
from topicspider.reactor_tools import deferred_from_future

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

Analyse = Callable[[Page, PageRules], PageAnalysis]

# Seconds a worker may take to start (imports, dictionary), apart from PAGE_TIMEOUT.
WORKER_START_TIMEOUT = 120.0
# A page's future fails so when its pool breaks, is shut down, or the page runs too long.
POOL_FAILURES = (BrokenProcessPool, CancelledError, defer.TimeoutError)
# Worker deaths (or hangs) with no page read in between before the crawl gives up.
MAX_DEATHS_IN_A_ROW = 5

_worker_rules: PageRules | None = None
_worker_analyse: Analyse = analyse_page


class PageLost(Exception):
    """A page killed or hung a page-analysis process even when read alone."""


class PagePoolFailed(PageLost):
    """Page-analysis processes keep dying whatever the page: the crawl cannot go on."""


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
    def __init__(self, crawler: Crawler, processes: int, timeout: float = 60.0, analyse: Analyse = analyse_page) -> None:
        self.crawler = crawler
        self.processes = processes
        self.timeout = timeout
        self.analyse_function = analyse
        self._deaths_in_a_row = 0
        self._in_flight = 0
        self._starting: list[Deferred[Any]] = []
        self.rules: PageRules | None = None
        self._executor: ProcessPoolExecutor | None = None
        # Pages whose pool broke, retried one at a time.
        self._quarantine: ProcessPoolExecutor | None = None
        self._quarantine_lock = DeferredLock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PagePool:
        settings = crawler.settings
        return cls(crawler, get_int(settings, "PAGE_PROCESSES"), get_float(settings, "PAGE_TIMEOUT"))

    def start(self, rules: PageRules) -> None:
        """Start the workers; :meth:`ready` waits until they have loaded."""
        self.rules = rules
        if self.processes:
            self._executor = self._new_executor(self.processes)
            self._starting = [deferred_from_future(self._executor.submit(_ready)) for _ in range(self.processes)]

    async def ready(self) -> None:
        """Return once every worker has loaded (its imports and dictionary take about a
        second of CPU, better spent before the first requests than among them); raise
        :class:`PagePoolFailed` if they cannot start."""
        starting, self._starting = self._starting, []
        if self._executor is not None and not await _started(self._executor, starting):
            _stop_workers(self._executor)
            raise PagePoolFailed(f"the page-analysis processes did not start in {WORKER_START_TIMEOUT:g} s")

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
            analysis = await self._submit(executor, page, self.processes)
        except POOL_FAILURES as exc:
            self._replace(executor, exc)
            return await self._analyse_alone(page)
        self._deaths_in_a_row = 0
        return analysis

    async def _submit(self, executor: ProcessPoolExecutor, page: Page, processes: int) -> PageAnalysis:
        from twisted.internet import reactor

        # A page waits its turn behind those already submitted: each earns it a timeout.
        allowance = self.timeout * (1 + self._in_flight // processes)
        self._in_flight += 1
        deferred = deferred_from_future(executor.submit(_analyse_in_worker, page))
        deferred.addTimeout(allowance, reactor)
        try:
            result: PageAnalysis = await maybe_deferred_to_future(deferred)
        except defer.TimeoutError:
            _stop_workers(executor)  # the hung worker, and so the pool: its other pages go alone
            raise
        finally:
            self._in_flight -= 1
        return result

    def _replace(self, broken: ProcessPoolExecutor, why: Exception) -> None:
        if self._executor is not broken:
            return  # another page's failure replaced it already
        self._count_death()
        what = "hung" if isinstance(why, defer.TimeoutError) else "died"
        logger.error("A page-analysis process %s; starting new ones", what)
        self._count("pagepool/restarts")
        # Not cancel_futures: the pages it held must fail as broken, to be read alone.
        broken.shutdown(wait=False)
        self._executor = self._new_executor(self.processes)

    async def _analyse_alone(self, page: Page) -> PageAnalysis:
        await maybe_deferred_to_future(self._quarantine_lock.acquire())
        try:
            if self._quarantine is None:
                self._quarantine = self._new_executor(1)
                # Started before the page's time runs: the page alone is on trial.
                await _started(self._quarantine, [deferred_from_future(self._quarantine.submit(_ready))])
            try:
                analysis = await self._submit(self._quarantine, page, 1)
            except POOL_FAILURES as exc:
                _stop_workers(self._quarantine)
                self._quarantine.shutdown(wait=False)
                self._quarantine = None
                what = f"hangs over {self.timeout:g} s" if isinstance(exc, defer.TimeoutError) else "dies"
            else:
                self._deaths_in_a_row = 0
                return analysis
        finally:
            self._quarantine_lock.release()
        self._count("pagepool/lost")
        self._count_death()
        raise PageLost(f"a page-analysis process {what} reading {page.url}")

    def _count_death(self) -> None:
        self._deaths_in_a_row += 1
        if self._deaths_in_a_row > MAX_DEATHS_IN_A_ROW:
            raise PagePoolFailed(f"page-analysis processes died or hung {self._deaths_in_a_row} times in a row"
                                 " without reading a page; see the log above")

    def close(self) -> None:
        for executor in (self._executor, self._quarantine):
            if executor is not None:
                # Not wait=True: that would block the reactor until every worker has exited.
                executor.shutdown(wait=False, cancel_futures=True)
                _stop_workers(executor)  # one stuck in its start-up would hold the exit
        self._executor = self._quarantine = None

    def _count(self, key: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key)


async def _started(executor: ProcessPoolExecutor, starting: list[Deferred[Any]]) -> bool:
    """Whether the workers behind ``starting`` (``_ready`` calls) came up in time."""
    from twisted.internet import reactor

    for deferred in starting:
        deferred.addTimeout(WORKER_START_TIMEOUT, reactor)
        try:
            await maybe_deferred_to_future(deferred)
        except POOL_FAILURES:
            return False
    return True


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    # No public way to stop a running task; ProcessPoolExecutor keeps its processes here.
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()

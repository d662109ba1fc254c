"""Page analysis off the reactor thread, in worker processes.

``PAGE_PROCESSES`` (default 2) worker processes run :func:`topicspider.analysis.analyse_page`
for the ``topic`` spider: parsing, extraction, segmentation and scoring take a few
milliseconds of CPU per page, which would otherwise hold the reactor, the one thread
that downloads, schedules and stores. Processes, not threads: lxml and the segmenters
hold the GIL. ``PAGE_PROCESSES = 0`` analyses pages on the reactor thread.

The workers are started with ``spawn`` (a fork of a process running a reactor and
threads could inherit a held lock; what runs in them is :mod:`topicspider.pageworker`)
and each loads the crawl's :class:`PageRules`, segmenter dictionary included, once: the
spider starts them as it is created, so that they load while Scrapy builds the crawl's
components and opens it. A worker ends when the crawler's process ends, even one killed
outright. A worker that dies (killed, out of memory, a crash in a C library), or one
that takes over ``PAGE_TIMEOUT`` seconds on a page (one more such allowance for each
page queued before it) and is stopped, breaks the pool, and every page it held fails
with it: a new pool is started (``pagepool/restarts``), and those pages are analysed
again one at a time in a pool of one process of their own, so that a page that kills or
hangs a worker there is the culprit: it is given up and counted (``pagepool/lost``), the
others are read.

A site whose pages keep killing or hanging the workers costs its own pages, not the
crawl's: once ``PAGE_SITE_MAX_LOST`` (3) of its pages are lost, the site is
quarantined (``pagepool/sites_quarantined``, logged once), and its other pages are no
longer read (:class:`SiteQuarantined`, ``pagepool/quarantined``), as Nutch's
``fetcher.max.exceptions.per.queue`` gives up a host's queue. Only workers that cannot
start end the crawl: after :data:`MAX_DEATHS_IN_A_ROW` restarts with no page read and
no worker started in between (memory exhausted, a broken install), :class:`PagePoolFailed`.

The rules can change once the workers run (:meth:`PagePool.update`): a topic learnt
from pages the workers read for it. Each set of rules has a version; a page goes with
the version it must be read under, and a worker that holds another one sends the page
back once, to be sent again with those rules: it keeps newer ones, and reads a page
sent before them under its own.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from collections import Counter
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet.defer import Deferred, DeferredLock

from topicspider.analysis import Page, PageAnalysis, PageRules, analyse_page, load_dictionaries
from topicspider.config import get_float, get_int
from topicspider.pageworker import Analyse, analyse_in_worker, init_worker, worker_ready
from topicspider.reactor_tools import deferred_from_future, to_thread

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Seconds a worker may take to start (imports, dictionary), apart from PAGE_TIMEOUT.
WORKER_START_TIMEOUT = 120.0
# A page's future fails so when its pool breaks, is shut down, or the page runs too long.
POOL_FAILURES = (BrokenProcessPool, CancelledError, defer.TimeoutError)
# Pool restarts with no page read and no worker started in between before the crawl
# gives up: the workers cannot start.
MAX_DEATHS_IN_A_ROW = 5

# Why a quarantined site's page or request ends as an error (signals.RESUME_LATER_META).
QUARANTINED = "site quarantined"


class PageLost(Exception):
    """A page killed or hung a page-analysis process even when read alone."""


class SiteQuarantined(PageLost):
    """The page's site is quarantined: its pages have killed or hung workers too often."""


class PagePoolFailed(PageLost):
    """Page-analysis processes cannot start: the crawl cannot go on."""


class PagePool:
    def __init__(self, crawler: Crawler, processes: int, timeout: float = 60.0, analyse: Analyse = analyse_page,
                 max_lost_per_site: int = 3) -> None:
        self.crawler = crawler
        self.processes = processes
        self.timeout = timeout
        self.max_lost_per_site = max_lost_per_site  # 0: no quarantine
        self.lost_by_site: Counter[str] = Counter()
        self.quarantined: set[str] = set()
        self.analyse_function = analyse
        self._deaths_in_a_row = 0
        self._in_flight = 0
        self._starting: list[Future[bool]] = []  # the workers' worker_ready calls
        self.rules: PageRules | None = None
        self.version = 0  # of the rules
        self._pickled_rules: bytes | None = None  # the rules, for a worker that holds older ones
        self.segmenter = ""  # a dictionary the workers load at start
        self.started = False  # a worker has loaded (or failed to)
        self._executor: ProcessPoolExecutor | None = None
        # Pages whose pool broke, retried one at a time.
        self._alone: ProcessPoolExecutor | None = None
        self._alone_lock = DeferredLock()
        # Without workers: the rules' version whose dictionaries this process has loaded.
        self._loaded_version = -1
        self._load_lock = DeferredLock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PagePool:
        settings = crawler.settings
        return cls(crawler, get_int(settings, "PAGE_PROCESSES"), get_float(settings, "PAGE_TIMEOUT"),
                   max_lost_per_site=get_int(settings, "PAGE_SITE_MAX_LOST"))

    def start(self, rules: PageRules, segmenter: str = "") -> None:
        """Start the workers; :meth:`ready` waits until they have loaded. ``segmenter``:
        the name of a segmenter whose dictionary they load, for a topic that is to come.
        Needs no reactor: the crawler's own set-up runs while the workers load."""
        self.rules, self.segmenter = rules, segmenter
        if self.processes:
            self._pickled_rules = pickle.dumps(rules, pickle.HIGHEST_PROTOCOL)
            self._executor = self._new_executor(self.processes)
            self._starting = [self._executor.submit(worker_ready) for _ in range(self.processes)]
            self._starting[0].add_done_callback(self._first_started)

    def _first_started(self, _: Future[bool]) -> None:
        self.started = True  # from the executor's thread; read on the reactor's

    async def ready(self) -> None:
        """Return once every worker has loaded (its imports and dictionary take about a
        second of CPU, better spent before the first requests than among them); raise
        :class:`PagePoolFailed` if they cannot start."""
        starting, self._starting = self._starting, []
        if self._executor is None:
            await self._inline_ready()
            return
        failure = await _start_failure([deferred_from_future(future) for future in starting])
        if failure is None:
            return
        _stop_workers(self._executor)
        if isinstance(failure, defer.TimeoutError):
            raise PagePoolFailed(f"the page-analysis processes did not start in {WORKER_START_TIMEOUT:g} s")
        raise PagePoolFailed("page-analysis processes died as they started; see the log above")

    async def update(self, rules: PageRules) -> None:
        """Read the pages analysed from now on under ``rules``."""
        pickled = await to_thread(pickle.dumps, rules, pickle.HIGHEST_PROTOCOL) if self.processes else None
        self.rules, self._pickled_rules = rules, pickled
        self.version += 1
        if not self.processes:  # a topic's dictionary, loaded off the reactor thread that will read the pages
            await self._inline_ready()

    async def _inline_ready(self) -> None:
        """Without workers, pages are read on the reactor thread: the current rules'
        dictionaries are loaded first, on a thread (over half a second, GIL held, that
        would stall every request on its way), and no page is cut meanwhile (rjieba's
        words cannot be added during a cut)."""
        if self.rules is None or self._loaded_version == self.version:
            return
        # As a future: an asyncio task cannot await a Deferred that has not fired yet.
        await maybe_deferred_to_future(self._load_lock.acquire())
        try:
            version = self.version
            if self._loaded_version != version:
                await to_thread(load_dictionaries, self.rules)
                self._loaded_version = version
        finally:
            self._load_lock.release()

    def _new_executor(self, processes: int) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn")
        # worker_ready waits here: one start call answered by each worker.
        all_started = context.Barrier(processes, timeout=WORKER_START_TIMEOUT)
        return ProcessPoolExecutor(
            processes,
            mp_context=context,
            initializer=init_worker,
            initargs=(self.rules, self.version, self.analyse_function, self.segmenter, all_started),
        )

    async def analyse(self, page: Page) -> PageAnalysis:
        assert self.rules is not None, "PagePool.start() first"
        self._refuse_quarantined(page)
        if self._executor is None:
            await self._inline_ready()
            return self.analyse_function(page, self.rules)
        executor = self._executor
        try:
            analysis = await self._submit(executor, page, self.processes)
        except POOL_FAILURES as exc:
            self._replace(executor, exc)
            return await self._analyse_alone(page)
        self._deaths_in_a_row = 0
        return analysis

    async def analyse_without_waiting(self, page: Page) -> PageAnalysis:
        """:meth:`analyse`, but on a thread of this process until a worker has started
        (or with none): for pages read while the workers start, before the crawl."""
        if self.started:
            return await self.analyse(page)
        assert self.rules is not None, "PagePool.start() first"
        if self._executor is None:
            await self._inline_ready()
        return await to_thread(self.analyse_function, page, self.rules)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker, whose dictionaries are loaded (learning a
        topic: cutting its pages' text in this process would load a dictionary of its own,
        the GIL held, and keep it); on a thread of this process without workers, or when
        they die. A worker may be started still: the call waits for it."""
        executor = self._executor
        if executor is not None:
            try:
                result: T = await maybe_deferred_to_future(deferred_from_future(executor.submit(function, *args)))
                return result
            except POOL_FAILURES as exc:
                self._replace(executor, exc)
        return await to_thread(function, *args)

    async def _submit(self, executor: ProcessPoolExecutor, page: Page, processes: int) -> PageAnalysis:
        # A page waits its turn behind those already submitted: each earns it a timeout.
        allowance = self.timeout * (1 + self._in_flight // processes)
        self._in_flight += 1
        # The rules when the page came, whatever update comes while it waits.
        version, pickled = self.version, self._pickled_rules
        try:
            result: PageAnalysis | str = await self._submit_once(executor, page, version, None, allowance)
            if isinstance(result, str):  # the worker holds other rules: the page goes again, with these
                result = await self._submit_once(executor, page, version, pickled, allowance)
            assert not isinstance(result, str), "a worker given the rules took them"
            return result
        except defer.TimeoutError:
            _stop_workers(executor)  # the hung worker, and so the pool: its other pages go alone
            raise
        finally:
            self._in_flight -= 1

    @staticmethod
    async def _submit_once(executor: ProcessPoolExecutor, page: Page, version: int, rules: bytes | None,
                           timeout: float) -> PageAnalysis | str:
        from twisted.internet import reactor

        deferred = deferred_from_future(executor.submit(analyse_in_worker, page, version, rules))
        deferred.addTimeout(timeout, reactor)
        result: PageAnalysis | str = await maybe_deferred_to_future(deferred)
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
        await maybe_deferred_to_future(self._alone_lock.acquire())
        try:
            # Its site may have been quarantined while it waited for its turn.
            self._refuse_quarantined(page)
            alone = await self._start_alone()
            try:
                analysis = await self._submit(alone, page, 1)
            except POOL_FAILURES as exc:
                _stop_workers(alone)
                alone.shutdown(wait=False)
                self._alone = None
                what = f"hangs over {self.timeout:g} s" if isinstance(exc, defer.TimeoutError) else "dies"
            else:
                self._deaths_in_a_row = 0
                return analysis
        finally:
            self._alone_lock.release()
        self._count("pagepool/lost")
        self._note_lost(page.site)
        raise PageLost(f"a page-analysis process {what} reading {page.url}")

    async def _start_alone(self) -> ProcessPoolExecutor:
        """The pool of one process that reads pages alone, started before the page's
        time runs: the page alone is on trial. A worker that starts shows that whatever
        kills the next one is the page."""
        while self._alone is None:
            executor = self._new_executor(1)
            if await _start_failure([deferred_from_future(executor.submit(worker_ready))]) is None:
                self._alone = executor
                self._deaths_in_a_row = 0
            else:
                _stop_workers(executor)
                executor.shutdown(wait=False)
                self._count_death()
        return self._alone

    def _note_lost(self, site: str) -> None:
        self.lost_by_site[site] += 1
        if self.max_lost_per_site and self.lost_by_site[site] >= self.max_lost_per_site and site not in self.quarantined:
            self.quarantined.add(site)
            self._count("pagepool/sites_quarantined")
            logger.error("Quarantined site %s: %d of its pages killed or hung the page-analysis processes;"
                         " its other pages are not read (PAGE_SITE_MAX_LOST)", site, self.lost_by_site[site])

    def _refuse_quarantined(self, page: Page) -> None:
        if page.site in self.quarantined:
            self._count("pagepool/quarantined")
            raise SiteQuarantined(f"site {page.site} quarantined: {page.url} not read")

    def _count_death(self) -> None:
        self._deaths_in_a_row += 1
        if self._deaths_in_a_row > MAX_DEATHS_IN_A_ROW:
            raise PagePoolFailed(f"page-analysis processes died {self._deaths_in_a_row} times in a row"
                                 " without starting to read a page; see the log above")

    def close(self) -> None:
        for executor in (self._executor, self._alone):
            if executor is not None:
                # Not wait=True: that would block the reactor until every worker has exited.
                executor.shutdown(wait=False, cancel_futures=True)
                _stop_workers(executor)  # one stuck in its start-up would hold the exit
        self._executor = self._alone = None

    def _count(self, key: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key)


async def _start_failure(starting: list[Deferred[Any]]) -> BaseException | None:
    """Why the workers behind ``starting`` (:func:`worker_ready` calls) did not come up in time
    (a timeout, or the pool broken by a worker that died), or None if they did."""
    from twisted.internet import reactor

    for deferred in starting:
        deferred.addTimeout(WORKER_START_TIMEOUT, reactor)
        try:
            await maybe_deferred_to_future(deferred)
        except POOL_FAILURES as exc:
            return exc
    return None


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    # No public way to stop a running task; ProcessPoolExecutor keeps its processes here.
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()

"""The seeds' MD5 + LRU de-duplication, without their flaw: what the LRU evicts is
still known, because every fingerprint is also written to an exact store.

Enabled by ``DUPEFILTER_CLASS = "topicspider.dupefilter.LRUDupeFilter"``, with
``REQUEST_FINGERPRINTER_CLASS`` set to :mod:`topicspider.fingerprint` (16-byte MD5 of the
canonical URL) and topicspider's ``FrontierScheduler``, which asks the store
asynchronously. Settings: ``DUPEFILTER_LRU_CAPACITY``, ``DUPEFILTER_FLUSH_SIZE``,
``DUPEFILTER_DEBUG``, ``JOBDIR``; with ``REDIS_URL``, the exact store is the distributed
crawl's Redis set instead (see :mod:`topicspider.cluster.scheduler`). Stats: ``dupefilter/filtered``,
``dupefilter/lru_hits``, ``dupefilter/lru_evictions``, ``dupefilter/store_lookups``,
``dupefilter/store_hits``, ``dupefilter/store_writes``, ``dupefilter/store_batches``, ``dupefilter/store_write_errors``,
``dupefilter/store_write_dropped``.

The LRU is the fast path and the store is the truth. A fingerprint missing from the
LRU is new for sure while nothing has been evicted and the store started empty;
after that, the store is asked, off the reactor thread, in batches. New fingerprints
reach the store in batches too (``DUPEFILTER_FLUSH_SIZE`` of them, or every second);
until then they are kept in memory.

With a ``JOBDIR`` the store is the durable frontier as well (:attr:`LRUDupeFilter.durable`):
the scheduler hands each new fingerprint its request, and says when a URL is queued
again or finished; those travel in the same batches, in order.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import Request
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.job import job_dir
from twisted.internet.defer import Deferred, DeferredLock
from twisted.internet.task import LoopingCall

from topicspider.cluster import redis_url
from topicspider.config import get_bool, get_int
from topicspider.lru import LRU
from topicspider.reactor_tools import in_thread, thread_pool
from topicspider.storage.seen import (
    SeenStore,
    SeenURL,
    is_legacy_jobdir,
    job_name,
    open_seen_store,
)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)
T = TypeVar("T")
FLUSH_INTERVAL = 1.0  # seconds


class Verdict(enum.Enum):
    NEW = "new"
    SEEN = "seen"
    UNKNOWN = "unknown"  # only the store can tell


class LRUDupeFilter(BaseDupeFilter):
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.fingerprinter = crawler.request_fingerprinter
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.capacity = get_int(settings, "DUPEFILTER_LRU_CAPACITY")
        self.flush_size = get_int(settings, "DUPEFILTER_FLUSH_SIZE")
        self.debug = get_bool(settings, "DUPEFILTER_DEBUG")
        self.jobdir = job_dir(settings)
        self.database_url: str = settings.get("DATABASE_URL") or ""
        # In distributed mode the crawl's Redis set is the exact store, and the cluster
        # scheduler claims fingerprints there itself.
        self.exact_store_in_redis = bool(redis_url(settings))
        # The store outlives the crawl, so it keeps the frontier for a resume.
        self.durable = bool(self.jobdir) and not self.exact_store_in_redis
        self.legacy_jobdir = self.durable and is_legacy_jobdir(self.jobdir)
        self.job = job_name(crawler)
        self.lru: LRU[bytes, None] = LRU(self.capacity)
        self.unflushed: dict[bytes, SeenURL] = {}
        self.in_flight: list[dict[bytes, SeenURL]] = []  # the batch on its way to the store
        self.writing = DeferredLock()
        self.flush_pending = False
        self.write_failing = False
        # Every second as well as every DUPEFILTER_FLUSH_SIZE: a hard kill loses little.
        self.flusher = LoopingCall(self._start_flush)
        self.store: SeenStore | None = None
        self.store_may_know = False  # the store may hold a fingerprint the LRU does not
        self.pool = thread_pool("topicspider-dupefilter")
        self.logged_one = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LRUDupeFilter:
        return cls(crawler)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await in_thread(self.pool, function, *args)

    def open(self) -> Deferred[None]:
        return deferred_from_coro(self._open())

    async def _open(self) -> None:
        self.pool.start()
        if self.exact_store_in_redis:
            self.store_may_know = True  # other workers add to it
            return
        self.store = await self._in_thread(open_seen_store, self.jobdir, self.database_url, self.job)
        known = await self._in_thread(self.store.count)
        self.flusher.start(FLUSH_INTERVAL, now=False)
        self.store_may_know = known > 0
        if known:
            logger.info("Resuming job %s: %d URLs already seen", self.job, known)

    def fingerprint(self, request: Request) -> bytes:
        return self.fingerprinter.fingerprint(request)

    def verdict(self, fingerprint: bytes) -> Verdict:
        """What memory alone says of ``fingerprint``."""
        if self.lru.touch(fingerprint):
            self.stats.inc_value("dupefilter/lru_hits")
            return Verdict.SEEN
        if self._unwritten(fingerprint):
            return Verdict.SEEN
        return Verdict.UNKNOWN if self.store_may_know else Verdict.NEW

    def known_in_memory(self, fingerprint: bytes) -> bool:
        """Whether memory holds ``fingerprint`` as seen, without making it more recent
        in the LRU (a look that is not a visit)."""
        return fingerprint in self.lru or self._unwritten(fingerprint)

    def _unwritten(self, fingerprint: bytes) -> bool:
        """Whether ``fingerprint`` waits to be written, or is being written, to the store."""
        return fingerprint in self.unflushed or any(fingerprint in batch for batch in self.in_flight)

    def remember(self, fingerprint: bytes, url: str = "", depth: int = 0, request: bytes | None = None) -> None:
        """Record a new fingerprint (and, when :attr:`durable`, its request as data);
        the store gets it with the next flush."""
        self.remember_in_lru(fingerprint)
        self.record(SeenURL(fingerprint, url, depth, request))

    def record(self, entry: SeenURL) -> None:
        """Tell the store, with the next flush, that a URL waits (again) or is finished;
        what it is told last of a URL is what it keeps."""
        self.unflushed.pop(entry.fingerprint, None)  # keeps the batch in the order told
        self.unflushed[entry.fingerprint] = entry
        if len(self.unflushed) >= self.flush_size:
            self.flush_soon()

    def flush_soon(self) -> None:
        # One flush waits behind the one writing, at most; while the store refuses
        # writes, only the timer tries again, once a second.
        if self.unflushed and not self.flush_pending and not self.write_failing:
            self._start_flush()

    async def waiting(self, after: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        """The store's waiting URLs, ``limit`` at a time (see :meth:`SeenStore.waiting`)."""
        assert self.store is not None
        return await self._in_thread(self.store.waiting, after, limit)

    def remember_in_lru(self, fingerprint: bytes) -> None:
        """Record a fingerprint in the LRU alone: its exact store is elsewhere (the
        distributed crawl's Redis set), or it is on its way there."""
        if evicted := self.lru.put(fingerprint, None):
            self.store_may_know = True
            self.stats.inc_value("dupefilter/lru_evictions", evicted)

    def _start_flush(self) -> None:
        self.flush_pending = True
        deferred_from_coro(self.flush()).addErrback(
            lambda failure: logger.error("Fingerprint flush failed: %s", failure.getTraceback())
        )

    async def flush(self) -> None:
        """Send the fingerprints not yet in the store. One batch at a time: a batch the
        store refuses goes back, under what was told since, to be sent again before
        anything newer, so that an older word on a URL never overwrites a newer one."""
        await maybe_deferred_to_future(self.writing.acquire())
        self.flush_pending = False
        try:
            if not self.unflushed or self.store is None:
                return
            batch, self.unflushed = self.unflushed, {}
            self.in_flight.append(batch)
            try:
                await self._in_thread(self.store.add_many, list(batch.values()))
                self.stats.inc_value("dupefilter/store_writes", len(batch))
                self.stats.inc_value("dupefilter/store_batches")
                self.write_failing = False
            except Exception as exc:  # noqa: BLE001 - keep the batch; the next flush retries it
                self.unflushed = batch | self.unflushed
                self.write_failing = True
                self.stats.inc_value("dupefilter/store_write_errors")
                logger.warning("Could not write %d fingerprints to the URL store (%s); will retry", len(batch), exc)
            finally:
                self.in_flight.remove(batch)
        finally:
            self.writing.release()

    async def check(self, fingerprints: Sequence[bytes], *, counted: bool = True) -> set[bytes]:
        """Those of ``fingerprints`` the store holds; ``counted`` in the dupefilter's
        stats unless the look-up is not the crawl's own (the ledger's, at close)."""
        assert self.store is not None
        found = await self._in_thread(self.store.contains_many, fingerprints)
        if counted:
            self.stats.inc_value("dupefilter/store_lookups", len(fingerprints))
            self.stats.inc_value("dupefilter/store_hits", len(found))
        return found

    def redirect_within_identity(self, request: Request) -> bool:
        """A redirect back to the URL just asked for, under its canonical form (a server
        answering /a with /a/): not a duplicate, or the page would be lost."""
        previous = request.meta.get("redirect_urls")
        if not previous:
            return False
        origin = Request(previous[-1], method=request.method, body=request.body)
        return self.fingerprint(origin) == self.fingerprint(request)

    def request_seen(self, request: Request) -> bool:
        """Scrapy's synchronous interface, for schedulers other than topicspider's:
        a store look-up here blocks the reactor, which ``FrontierScheduler`` never does."""
        if self.redirect_within_identity(request):
            return False
        fingerprint = self.fingerprint(request)
        verdict = self.verdict(fingerprint)
        if verdict is Verdict.UNKNOWN and self.store is not None:
            verdict = Verdict.SEEN if self.store.contains_many([fingerprint]) else Verdict.NEW
        if verdict is Verdict.SEEN:
            return True
        self.remember(fingerprint, request.url, request.meta.get("depth", 0))
        return False

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close())

    async def _close(self) -> None:
        if self.flusher.running:
            self.flusher.stop()
        try:
            await self.flush()
            await self._in_thread(lambda: None)  # the one store thread has written all before it
            if self.unflushed:
                # A resumed job would fetch these again.
                self.stats.inc_value("dupefilter/store_write_dropped", len(self.unflushed))
                logger.error("%d fingerprints could not be written to the URL store at close", len(self.unflushed))
        finally:
            if self.store is not None:
                await self._in_thread(self.store.close)
                self.store = None
            self.pool.stop()

    def log(self, request: Request | str, spider: Spider | None = None) -> None:
        """Count a duplicate: a request, or a page's link for which none was made."""
        self.stats.inc_value("dupefilter/filtered")
        if self.debug:
            logger.debug("Filtered duplicate request: %s", request)
        elif not self.logged_one:
            logger.debug("Filtered duplicate request: %s - no more duplicates will be shown"
                         " (see DUPEFILTER_DEBUG to show all duplicates)", request)
            self.logged_one = True

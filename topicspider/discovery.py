"""The ledger's URLs discovered and never queued: the links a page's analysis left
(:data:`topicspider.analysis.DROPPED_LINK_REASONS`: ``offsite``, ``too_deep``,
``nofollow``, ``not_a_page``, ``trap``, ``filter``), each URL counted once, for the reason it
was first left.

Kept by :class:`topicspider.scheduler.FrontierScheduler` whenever it keeps the ledger
(in distributed mode, Redis counts the links, :mod:`topicspider.cluster.frontier`), from
the spider's ``links_dropped`` signal. Links memory
knows as queued, or has just recorded, go no further; the rest go, a batch a second,
to an SQLite store (:mod:`topicspider.storage.discovered`) that keeps each URL once. A
URL left by one page may be queued from another (an off-site link to a site that is
also a seed's): at close, this run's URLs that the dupefilter's store holds as queued
are left out, and the rest are counted, by reason, as ``ledger/not_queued`` and
``ledger/dropped/<reason>``. A resumed job counts only the URLs its own run found first.
Stats: ``discovery/unrecorded`` (links the store refused; they are missing from the ledger).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from topicspider.lru import LRU
from topicspider.reactor_tools import in_thread, thread_pool
from topicspider.storage.discovered import DiscoveredStore, open_discovered_store

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from topicspider.dupefilter import LRUDupeFilter

logger = logging.getLogger(__name__)
T = TypeVar("T")
FLUSH_INTERVAL = 1.0  # seconds
FLUSH_SIZE = 5000  # links
# The links met on most pages of a site (its menus, its footer's off-site links) stop here.
RECENT_CAPACITY = 50_000
CLOSE_CHUNK = 1000  # URLs checked against the dupefilter's store at a time


class DiscoveryLedger:
    def __init__(self, dupefilter: LRUDupeFilter, stats: StatsCollector) -> None:
        self.df, self.stats = dupefilter, stats
        self.recent: LRU[bytes, None] = LRU(RECENT_CAPACITY)
        self.pending: dict[bytes, str] = {}
        self.pool = thread_pool("topicspider-discovery")
        self.store: DiscoveredStore | None = None
        self.flusher = LoopingCall(self._flush_later)
        self.flushing = False
        self.logged_refusal = False

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await in_thread(self.pool, function, *args)

    async def open(self, jobdir: str | None) -> None:
        self.pool.start()
        try:
            self.store = await self._in_thread(open_discovered_store, jobdir)
        except Exception as exc:  # noqa: BLE001 - the ledger is a report: the crawl goes on without this part
            logger.error("Could not open the store of discovered links (%s): the ledger will not count the"
                         " links the crawl does not queue (discovery/unrecorded)", exc)
            return
        self.flusher.start(FLUSH_INTERVAL, now=False)

    def note(self, links: list[tuple[bytes, str]]) -> None:
        """Links a page will not request, as (fingerprint, reason)."""
        if self.store is None:
            self.stats.inc_value("discovery/unrecorded", len(links))
            return
        for fingerprint, reason in links:
            if self.recent.touch(fingerprint) or self.df.known_in_memory(fingerprint):
                continue
            self.recent.put(fingerprint, None)
            self.pending.setdefault(fingerprint, reason)
        if len(self.pending) >= FLUSH_SIZE:
            self._flush_later()

    def _flush_later(self) -> None:
        if self.pending and not self.flushing and self.store is not None:
            deferred_from_coro(self.flush()).addErrback(
                lambda failure: logger.error("Discovered links flush failed: %s", failure.getTraceback()))

    async def flush(self) -> None:
        if not self.pending or self.store is None:
            return
        batch, self.pending = list(self.pending.items()), {}
        self.flushing = True
        try:
            await self._in_thread(self.store.add_many, batch)
        except Exception as exc:  # noqa: BLE001 - counted, and the crawl goes on
            self.stats.inc_value("discovery/unrecorded", len(batch))
            if not self.logged_refusal:
                logger.warning("Could not record %d discovered links (%s); the ledger will not count them,"
                               " nor further ones refused (discovery/unrecorded)", len(batch), exc)
                self.logged_refusal = True
        finally:
            self.flushing = False

    async def close(self) -> Counter[str]:
        """This run's URLs discovered and never queued, by reason; the store is closed after."""
        if self.flusher.running:
            self.flusher.stop()
        try:
            if self.store is None:
                return Counter()
            while self.flushing:
                await self._in_thread(lambda: None)
            await self.flush()
            counts = await self._count_not_queued()
            await self._close_store()
            return counts
        finally:
            if self.store is not None:  # the count failed: the store is closed all the same
                await self._close_store()
            self.pool.stop()

    async def _close_store(self) -> None:
        assert self.store is not None
        store, self.store = self.store, None
        try:
            await self._in_thread(store.close)
        except Exception as exc:  # noqa: BLE001 - what it holds was written; only the counts matter now
            logger.warning("Could not close the store of discovered links: %s", exc)

    async def _count_not_queued(self) -> Counter[str]:
        assert self.store is not None
        counts: Counter[str] = Counter()
        after = b""
        while rows := await self._in_thread(self.store.this_run, after, CLOSE_CHUNK):
            after = rows[-1][0]
            left = [(fingerprint, reason) for fingerprint, reason in rows if not self.df.known_in_memory(fingerprint)]
            queued = await self.df.check([fingerprint for fingerprint, _ in left], counted=False) if self.df.store_may_know else set()
            counts.update(reason for fingerprint, reason in left if fingerprint not in queued)
        return counts

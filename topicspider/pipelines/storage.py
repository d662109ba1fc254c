"""Writes pages to ``DATABASE_URL`` in batches, on a thread of its own.

Enabled by ``topicspider.pipelines.storage.StoragePipeline`` in ``ITEM_PIPELINES``.
Settings: ``DATABASE_URL``, ``STORAGE_BATCH_SIZE``, ``STORAGE_FLUSH_INTERVAL``.
Stats: ``storage/pages_written``, ``storage/emails_written``, ``storage/batches``,
``storage/errors`` and ``storage/pages_failed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.python.threadpool import ThreadPool

from topicspider.config import get_float, get_int
from topicspider.items import PageItem
from topicspider.reactor_tools import in_thread
from topicspider.storage import StorageError, Store, backend_for
from topicspider.urls import mask_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)
T = TypeVar("T")


class StoragePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.database_url: str = settings.get("DATABASE_URL")
        self.backend = backend_for(self.database_url)
        self.batch_size = get_int(settings, "STORAGE_BATCH_SIZE")
        self.flush_interval = get_float(settings, "STORAGE_FLUSH_INTERVAL")
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.buffer: list[PageItem] = []
        # One thread: a backend connection is used by one thread only, and batches
        # are written in the order they were filled.
        self.pool = ThreadPool(minthreads=1, maxthreads=1, name="topicspider-storage")
        self.store: Store | None = None
        self.flusher = LoopingCall(self._timed_flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        return cls(crawler)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await in_thread(self.pool, function, *args)

    async def open_spider(self) -> None:
        self.pool.start()
        self.store = await self._in_thread(self.backend, self.database_url)
        logger.info("Storing pages in %s", mask_url(self.database_url))
        self.flusher.start(self.flush_interval, now=False)

    async def process_item(self, item: Any) -> Any:
        if isinstance(item, PageItem):
            self.buffer.append(item)
            if len(self.buffer) >= self.batch_size:
                # Awaiting a full batch holds back the scraper when the database is
                # slower than the crawl, instead of growing the buffer without bound.
                await self.flush()
        return item

    def _timed_flush(self) -> Deferred[None]:
        return deferred_from_coro(self.flush())

    async def flush(self) -> None:
        batch, self.buffer = self.buffer, []
        if not batch:
            return
        try:
            if self.store is None:
                raise StorageError("the database is not open")
            emails = await self._in_thread(self.store.write_pages, batch)
        except StorageError as exc:
            self.stats.inc_value("storage/errors")
            self.stats.inc_value("storage/pages_failed", len(batch))
            logger.error("Could not store %d pages in %s: %s", len(batch), mask_url(self.database_url), exc)
            return
        self.stats.inc_value("storage/batches")
        self.stats.inc_value("storage/pages_written", len(batch))
        self.stats.inc_value("storage/emails_written", emails)

    async def close_spider(self) -> None:
        if self.flusher.running:
            self.flusher.stop()
        try:
            await self.flush()
            if self.store is not None:
                await self._in_thread(self.store.close)
        finally:
            self.store = None
            self.pool.stop()
        logger.info(
            "Stored %d pages and %d e-mails in %s (%d pages failed)",
            self.stats.get_value("storage/pages_written", 0),
            self.stats.get_value("storage/emails_written", 0),
            mask_url(self.database_url),
            self.stats.get_value("storage/pages_failed", 0),
        )

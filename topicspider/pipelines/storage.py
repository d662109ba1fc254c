"""Writes pages to ``DATABASE_URL`` in batches, on a thread of its own.

Enabled by ``topicspider.pipelines.storage.StoragePipeline`` in ``ITEM_PIPELINES``.
Settings: ``DATABASE_URL``, ``STORAGE_BATCH_SIZE``, ``STORAGE_FLUSH_INTERVAL``,
``STORAGE_RETRY_TIMES``, ``STORAGE_RETRY_DELAY``, ``STORAGE_RETRY_MAX_DELAY``,
``STORAGE_SPILL_FILE``, ``SEARCH_INDEX`` (index the pages for search as they are
written, :mod:`topicspider.search`). Stats: ``storage/pages_written``, ``storage/emails_written``,
``storage/batches``, ``storage/errors``, ``storage/retries``, ``storage/pages_refused``,
``storage/pages_spilled`` and ``storage/pages_lost``.

A batch whose write fails for a reason that may pass (connection lost, server
restarting, a lock) is written again after a growing pause; the crawl waits for it,
since the pipeline holds the scraper while a full batch is pending. One that still
fails after ``STORAGE_RETRY_TIMES`` tries is appended to ``STORAGE_SPILL_FILE`` for
``scrapy replay-spill``; until a write succeeds again, later batches get one try each
before they are spilled, so that a database gone for good costs one retry sequence,
not one per batch. A batch the database refuses (a value it will not take) is written
again in halves, down to single pages, so that only the pages it refuses are spilled
(``storage/pages_refused``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred, DeferredLock
from twisted.internet.task import LoopingCall

from topicspider.config import get_bool, get_float, get_int
from topicspider.items import PageItem
from topicspider.reactor_tools import in_thread, sleep, thread_pool
from topicspider.signals import pages_durable, pages_lost
from topicspider.storage import (
    BatchOutcome,
    StorageError,
    Store,
    backend_for,
    write_isolating,
)
from topicspider.storage.spill import spill_pages
from topicspider.urls import mask_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)
T = TypeVar("T")


class StoragePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.database_url: str = settings.get("DATABASE_URL")
        self.backend = backend_for(self.database_url)
        self.batch_size = get_int(settings, "STORAGE_BATCH_SIZE")
        self.flush_interval = get_float(settings, "STORAGE_FLUSH_INTERVAL")
        self.retry_times = get_int(settings, "STORAGE_RETRY_TIMES")
        self.retry_delay = get_float(settings, "STORAGE_RETRY_DELAY")
        self.retry_max_delay = get_float(settings, "STORAGE_RETRY_MAX_DELAY")
        self.spill_path = Path(settings.get("STORAGE_SPILL_FILE"))
        self.index = get_bool(settings, "SEARCH_INDEX")
        self.failing = False  # the last batch was spilled: no retries until a write succeeds
        # Batches are written one at a time, in order, retries included.
        self.writing = DeferredLock()
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.buffer: list[PageItem] = []
        # One thread: a backend connection is used by one thread only, and batches
        # are written in the order they were filled.
        self.pool = thread_pool("topicspider-storage")
        self.store: Store | None = None
        self.flusher = LoopingCall(self._timed_flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        return cls(crawler)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await in_thread(self.pool, function, *args)

    async def open_spider(self) -> None:
        self.pool.start()
        self.store = await self._in_thread(partial(self.backend, self.database_url, index=self.index))
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
        started = monotonic()
        batch, self.buffer = self.buffer, []
        # Even with nothing new, wait for the batches before: they are not yet durable.
        await maybe_deferred_to_future(self.writing.acquire())
        try:
            if batch:
                await self._store(batch)
        finally:
            self.writing.release()
        self.crawler.signals.send_catch_log(pages_durable, before=started)

    async def _store(self, batch: list[PageItem]) -> None:
        delay = self.retry_delay
        tries = 1 if self.failing else self.retry_times + 1
        for attempt in range(1, tries + 1):
            try:
                outcome = await self._in_thread(self._write, batch)
            except StorageError as exc:  # retryable: the whole batch failed
                self.stats.inc_value("storage/errors")
                if attempt == tries:
                    logger.error("Could not store %d pages in %s: %s", len(batch), mask_url(self.database_url), exc)
                    self.failing = True
                    await self._spill(batch)
                    return
                logger.warning("Could not store %d pages (%s); trying again in %.1f s", len(batch), exc, delay)
                self.stats.inc_value("storage/retries")
                await sleep(delay)
                delay = min(delay * 2, self.retry_max_delay)
            except Exception:  # not the database's doing: keep the pages all the same
                self.stats.inc_value("storage/errors")
                logger.exception("Could not store %d pages", len(batch))
                await self._spill(batch)
                return
            else:
                self.failing = False
                self._count(outcome)
                if outcome.refused:
                    await self._spill([page for page, _ in outcome.refused])
                return

    def _write(self, batch: list[PageItem]) -> BatchOutcome:
        if self.store is None:
            raise RuntimeError("the database is not open")
        return write_isolating(self.store, batch)

    def _count(self, outcome: BatchOutcome) -> None:
        self.stats.inc_value("storage/batches")
        self.stats.inc_value("storage/pages_written", outcome.written)
        if outcome.aliases:
            self.stats.inc_value("storage/aliases_written", outcome.aliases)
        self.stats.inc_value("storage/emails_written", outcome.emails)
        if outcome.refused:
            self.stats.inc_value("storage/errors")
            self.stats.inc_value("storage/pages_refused", len(outcome.refused))
            page, reason = outcome.refused[0]
            logger.error("The database refused %d pages, e.g. %s: %s", len(outcome.refused), page.url, reason)

    async def _spill(self, pages: list[PageItem]) -> None:
        try:
            await self._in_thread(spill_pages, self.spill_path, pages)
        except (OSError, ValueError) as exc:  # ValueError: text that cannot be encoded
            self.stats.inc_value("storage/pages_lost", len(pages))
            logger.error("Could not spill %d pages to %s either, they are lost: %s", len(pages), self.spill_path, exc)
            self.crawler.signals.send_catch_log(pages_lost, urls=[page.url for page in pages])
            return
        self.stats.inc_value("storage/pages_spilled", len(pages))
        logger.error("Spilled %d pages to %s; store them later with: scrapy replay-spill %s",
                     len(pages), self.spill_path, self.spill_path)

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
            "Stored %d pages and %d e-mails in %s (%d pages spilled to %s, %d lost)",
            self.stats.get_value("storage/pages_written", 0),
            self.stats.get_value("storage/emails_written", 0),
            mask_url(self.database_url),
            self.stats.get_value("storage/pages_spilled", 0),
            self.spill_path,
            self.stats.get_value("storage/pages_lost", 0),
        )

"""The common part of the extensions that visit the database every few seconds during a
crawl (:mod:`~topicspider.extensions.livestatus`, :mod:`~topicspider.extensions.control`):
an interval setting (0 turns the extension off), a connection on a thread of its own
(:class:`~topicspider.storage.thread.StoreThread`), the crawl's name, and a loop that a
failure never stops (it is counted, and logged once until a visit succeeds)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from topicspider.config import get_float, off_by_design
from topicspider.storage.seen import job_name
from topicspider.storage.thread import StoreThread

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

    from topicspider.storage.dialect import Dialect

logger = logging.getLogger(__name__)
T = TypeVar("T")


class DatabaseLoop:
    interval_setting = ""  # e.g. "STATUS_INTERVAL"
    thread_name = ""
    error_stat = ""  # e.g. "status/errors"

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.interval = get_float(crawler.settings, self.interval_setting)
        database_url = crawler.settings.get("DATABASE_URL") or ""
        if self.interval <= 0 or not database_url:
            raise off_by_design(__name__, f"{self.interval_setting} is 0 or DATABASE_URL is empty")
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.database = StoreThread(database_url, self.thread_name)
        self.crawl = ""
        self.failed = False  # the last visit failed: the next failure is not logged again
        self.loop = LoopingCall(self._tick)

    async def start(self) -> None:
        self.crawl = job_name(self.crawler)
        await self.database.open()
        self.loop.start(self.interval, now=True)

    def stop(self) -> None:
        if self.loop.running:
            self.loop.stop()

    def _tick(self) -> Deferred[None]:
        return deferred_from_coro(self.visit())

    async def visit(self) -> None:
        """One look at the database, every interval."""
        raise NotImplementedError

    async def transaction(self, work: Callable[[Any, Dialect], T], what: str, *, write: bool = False) -> T | None:
        """``work``'s result; None if it failed, which is counted and logged once."""
        try:
            result = await self.database.transaction(work, write=write)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the crawl and the loop go on
            self.stats.inc_value(self.error_stat)
            if not self.failed:
                logger.warning("Could not %s (the crawl goes on): %s: %s", what, type(exc).__name__, exc)
            self.failed = True
            return None
        self.failed = False
        return result

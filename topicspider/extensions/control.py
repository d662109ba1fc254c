"""The crawl's control inbox: instructions for a running crawl, given from the console
or by anyone who can write to the database (``scrapy control``).

Enabled by ``topicspider.extensions.control.CrawlControl`` in ``EXTENSIONS``; every
``CONTROL_INTERVAL`` seconds (0 turns it off) it reads the rows of ``crawl_control``
for this crawl (``CRAWL_ID``, see :func:`topicspider.storage.seen.job_name`) that it
has not seen yet, on a thread of its own, and acts on them in order:

* ``add URL``: crawl URL as a new seed (depth 0, its own site); the dupefilter drops
  one already seen;
* ``block PATTERN``: drop every request matching PATTERN for the rest of the crawl
  (:mod:`topicspider.middlewares.block`).

A resumed crawl reads every instruction again, so its blocks still hold. A bad
instruction is logged and counted, never fatal. Stats: ``control/added``,
``control/blocked``, ``control/bad``, ``control/errors``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from topicspider.config import get_float
from topicspider.signals import url_pattern_blocked
from topicspider.storage.crawls import Control, controls_after
from topicspider.storage.seen import job_name
from topicspider.storage.thread import StoreThread
from topicspider.urls import request_url, url_pattern

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)


class CrawlControl:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.interval = get_float(crawler.settings, "CONTROL_INTERVAL")
        database_url = crawler.settings.get("DATABASE_URL") or ""
        if self.interval <= 0 or not database_url:
            raise NotConfigured("CONTROL_INTERVAL is 0 or DATABASE_URL is empty")
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.database = StoreThread(database_url, "topicspider-control")
        self.crawl = ""
        self.last_seen = 0
        self.failed = False
        self.loop = LoopingCall(self._tick)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlControl:
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    async def spider_opened(self) -> None:
        self.crawl = job_name(self.crawler)
        await self.database.open()
        self.loop.start(self.interval, now=True)

    async def spider_closed(self) -> None:
        if self.loop.running:
            self.loop.stop()
        await self.database.close()

    def _tick(self) -> Deferred[None]:
        return deferred_from_coro(self.check())

    async def check(self) -> None:
        """Act on the instructions that arrived since the last look."""
        after = self.last_seen
        try:
            controls = await self.database.transaction(
                lambda cursor, dialect: controls_after(cursor, dialect, self.crawl, after))
        except Exception as exc:  # noqa: BLE001 - whatever it is, the loop goes on
            self.stats.inc_value("control/errors")
            if not self.failed:
                logger.warning("Could not read the control inbox (trying again): %s: %s", type(exc).__name__, exc)
            self.failed = True
            return
        self.failed = False
        for control in controls:
            self.last_seen = max(self.last_seen, control.id)
            self._apply(control)

    def _apply(self, control: Control) -> None:
        try:
            if control.action == "add":
                self._add(request_url(control.argument))
            elif control.action == "block":
                url_pattern(control.argument)  # a bad pattern is refused here, not in the middleware
                self.crawler.signals.send_catch_log(url_pattern_blocked, pattern=control.argument.strip())
                self.stats.inc_value("control/blocked")
            else:
                raise ValueError(f"unknown action {control.action!r}")
        except Exception as exc:  # noqa: BLE001 - a bad instruction (or a closing engine) never stops the crawl
            self.stats.inc_value("control/bad")
            logger.error("Ignored control instruction %d (%s %r): %s", control.id, control.action,
                         control.argument[:200], exc)

    def _add(self, url: str) -> None:
        spider, engine = self.crawler.spider, self.crawler.engine
        seed_request = getattr(spider, "seed_request", None)
        if seed_request is None or engine is None:
            raise ValueError(f"spider {getattr(spider, 'name', '?')!r} cannot take new seeds")
        engine.crawl(seed_request(url))
        self.stats.inc_value("control/added")
        logger.info("Added %s to the crawl", url)

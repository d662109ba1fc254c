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

from topicspider.extensions.periodic import DatabaseLoop
from topicspider.signals import url_pattern_blocked
from topicspider.storage.crawls import Control, controls_after
from topicspider.urls import request_url, url_pattern

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class CrawlControl(DatabaseLoop):
    interval_setting = "CONTROL_INTERVAL"
    thread_name = "topicspider-control"
    error_stat = "control/errors"

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.last_seen = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlControl:
        extension = cls(crawler)
        crawler.signals.connect(extension.start, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    async def spider_closed(self) -> None:
        self.stop()
        await self.database.close()

    async def visit(self) -> None:
        """Act on the instructions that arrived since the last look."""
        after = self.last_seen
        controls = await self.transaction(lambda cursor, dialect: controls_after(cursor, dialect, self.crawl, after),
                                          "read the control inbox")
        for control in controls or []:
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

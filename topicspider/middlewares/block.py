"""Drops requests whose URL matches a pattern blocked for the rest of the crawl, from
the console or the control inbox (:mod:`topicspider.extensions.control`).

Enabled by ``topicspider.middlewares.block.BlockMiddleware`` in
``DOWNLOADER_MIDDLEWARES``, first, so that a blocked URL costs nothing further (no
robots.txt fetch, no delay). Requests already queued are dropped as they come out.
A pattern is a glob over the whole URL (``*`` matches anything) or a URL prefix, see
:func:`topicspider.urls.url_pattern`. Stats: ``block/patterns``, ``block/dropped``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from topicspider.signals import url_pattern_blocked
from topicspider.urls import URLPattern, url_pattern

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class BlockMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.patterns: dict[str, URLPattern] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockMiddleware:
        assert crawler.stats is not None
        middleware = cls(crawler.stats)
        crawler.signals.connect(middleware.block, signal=url_pattern_blocked)
        return middleware

    def block(self, pattern: str) -> None:
        if pattern in self.patterns:
            return
        self.patterns[pattern] = url_pattern(pattern)
        self.stats.set_value("block/patterns", len(self.patterns))
        logger.info("Blocked URLs matching %r for the rest of the crawl", pattern)

    def process_request(self, request: Request) -> None:
        for text, pattern in self.patterns.items():
            if pattern.matches(request.url):
                self.stats.inc_value("block/dropped")
                raise IgnoreRequest(f"blocked by pattern {text!r}")

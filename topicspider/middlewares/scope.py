"""Keeps redirects on their site: a redirect from a crawled page to another site is not
followed, just as an off-site link is not.

Enabled by ``topicspider.middlewares.scope.SiteScopeMiddleware`` in
``DOWNLOADER_MIDDLEWARES``. A seed may redirect anywhere: its landing page defines its
site. Stats: ``links/offsite_redirect``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request

from topicspider.urls import site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class SiteScopeMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SiteScopeMiddleware:
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if "redirect_urls" not in meta or "site" not in meta or meta.get("depth", 0) == 0:
            return
        if site_of(request.url) != meta["site"]:
            self.stats.inc_value("links/offsite_redirect")
            raise IgnoreRequest(f"redirect to another site: {request.url}")

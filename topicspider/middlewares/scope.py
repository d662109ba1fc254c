"""Keeps redirects on their site and out of traps: a redirect from a crawled page to
another site, to a URL the trap filters refuse or to one the user's rules refuse is not
followed, just as such a link is not.

Enabled by ``topicspider.middlewares.scope.SiteScopeMiddleware`` in
``DOWNLOADER_MIDDLEWARES``. A seed may redirect anywhere: its landing page defines its
site. The trap filters and the user's rules are those of the links (``URL_*``
settings, ``URLLENGTH_LIMIT``, ``URL_FILTER_FILE``; :class:`topicspider.urls.URLRules`);
a redirect target keeps its session ids, since a server that adds one by redirecting
would be asked again and again without it. Stats: ``links/offsite_redirect``,
``links/dropped/<reason>`` (as for links).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request

from topicspider.config import url_rules_from
from topicspider.urls import URL_FILTER, URLRules, refusal, site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class SiteScopeMiddleware:
    def __init__(self, stats: StatsCollector, rules: URLRules) -> None:
        self.stats = stats
        self.rules = rules

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SiteScopeMiddleware:
        assert crawler.stats is not None
        return cls(crawler.stats, url_rules_from(crawler.settings))

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if "redirect_urls" not in meta or "site" not in meta or meta.get("depth", 0) == 0:
            return
        if site_of(request.url) != meta["site"]:
            self.stats.inc_value("links/offsite_redirect")
            raise IgnoreRequest(f"redirect to another site: {request.url}")
        if refused := refusal(request.url, self.rules):
            self.stats.inc_value(f"links/dropped/{refused}")
            if refused == URL_FILTER:
                raise IgnoreRequest(f"redirect refused by URL_FILTER_FILE: {request.url}")
            raise IgnoreRequest(f"redirect to a trap ({refused}): {request.url}")

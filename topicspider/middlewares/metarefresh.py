"""Scrapy's ``MetaRefreshMiddleware``, made safe against refresh loops.

Enabled in place of Scrapy's (``DOWNLOADER_MIDDLEWARES``). A refresh that goes round
(:func:`topicspider.middlewares.redirect.goes_round`: a page refreshing to itself, after
the one time it is followed) is not followed: the page is kept as it is, counted in
``redirect/refresh_loops``. A malformed ``<base href>`` (``http://[oops``) or refresh
URL no longer loses the page: w3lib 2.6 (``requirements.txt``) ignores such a base, as
browsers do, and reads such a refresh as none.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import Request, Response

from topicspider.middlewares.redirect import RedirectLoop, RedirectLoopCheck

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class SafeMetaRefreshMiddleware(RedirectLoopCheck, MetaRefreshMiddleware):
    stats: StatsCollector

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SafeMetaRefreshMiddleware:
        middleware = super().from_crawler(crawler)
        middleware.stats = crawler.stats
        return middleware

    def process_response(self, request: Request, response: Response) -> Request | Response:
        try:
            return super().process_response(request, response)
        except RedirectLoop as exc:
            self.stats.inc_value("redirect/refresh_loops")
            logger.debug("Meta refresh of %s not followed: %s", response.url, exc)
            return response

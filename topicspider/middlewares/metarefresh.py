"""Scrapy's ``MetaRefreshMiddleware``, made safe against pages it cannot read.

Enabled in place of Scrapy's (``DOWNLOADER_MIDDLEWARES``). Scrapy's resolves the
refresh URL against the page's ``<base href>`` and lets a malformed one (``http://[oops``)
raise, which loses a page that downloaded fine. Here such a page is kept as it is and
counted in ``links/dropped/malformed``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import Request, Response

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class SafeMetaRefreshMiddleware(MetaRefreshMiddleware):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SafeMetaRefreshMiddleware:
        middleware = super().from_crawler(crawler)
        middleware.stats = crawler.stats
        return middleware

    def process_response(self, request: Request, response: Response) -> Request | Response:
        try:
            return super().process_response(request, response)
        except ValueError as exc:
            self.stats.inc_value("links/dropped/malformed")
            logger.debug("Meta refresh of %s not followed: %s", response.url, exc)
            return response

"""Fixes the character set of HTML responses whose declared charset is missing or wrong.

Enabled by ``topicspider.middlewares.encoding.EncodingMiddleware`` in
``DOWNLOADER_MIDDLEWARES`` (on by default in the project settings). Counts each
override in ``encoding/overridden/<encoding>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.http import HtmlResponse, Request, Response

from topicspider.encoding import better_encoding

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class EncodingMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> EncodingMiddleware:
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_response(self, request: Request, response: Response) -> Response:
        if not isinstance(response, HtmlResponse):
            return response
        content_type = response.headers.get(b"Content-Type", b"").decode("latin-1")
        encoding = better_encoding(response.body, content_type)
        if encoding is None:
            return response
        self.stats.inc_value(f"encoding/overridden/{encoding}")
        return response.replace(encoding=encoding)

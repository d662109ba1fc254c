"""Serves the crawl the pages already downloaded to sample the background.

Enabled by ``topicspider.middlewares.background.BackgroundCacheMiddleware`` in
``DOWNLOADER_MIDDLEWARES``, after the topic gate. Before the first seed, the spider
samples up to ``TOPIC_BACKGROUND_PAGES`` pages of the seeds' sites
(:mod:`topicspider.focus`), through robots.txt and the per-host delay; when the crawl
asks for one of them, the kept response is answered at once instead of a second
download. The fetch log and the URL states see it as the page's download. Stats:
``topic/background_reused``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from topicspider.signals import CACHED, FETCHED_AT_META

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class BackgroundCacheMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BackgroundCacheMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> Response | None:
        builder = getattr(self.crawler.spider, "topic_builder", None)
        if builder is None or "depth" not in request.meta:
            return None  # not a crawl page: a sample, a robots.txt
        cached = builder.cache.take(request.url)
        if cached is None:
            return None
        # "cached", as Scrapy's HTTP cache flags its responses: not downloaded again (the
        # WARC archive, for one, has it already).
        response = cached.replace(request=request, flags=[*cached.flags, CACHED])
        if cached.request is not None and FETCHED_AT_META in cached.request.meta:  # a sample read from an archive
            request.meta[FETCHED_AT_META] = cached.request.meta[FETCHED_AT_META]
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("topic/background_reused")
        self.crawler.signals.send_catch_log(signals.response_downloaded, response=response, request=request,
                                            spider=self.crawler.spider)
        return response

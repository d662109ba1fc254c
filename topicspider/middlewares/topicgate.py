"""Holds page requests until the crawl's topic is ready.

Enabled by ``topicspider.middlewares.topicgate.TopicGateMiddleware`` in
``DOWNLOADER_MIDDLEWARES``. The spider builds its topic in ``start()`` (loading the
segmenter, fetching training samples), but a crawl resumed from a ``JOBDIR`` has
requests queued on disk that the engine gives out at once: fetched then, their pages
would be parsed with no topic, stored unscored and followed. So every page request (one
with a ``depth``: not a training sample, not a robots.txt) waits here for the spider's
``wait_for_topic()``; if the topic cannot be built, the waiting requests are refused
(``fetch/ignored``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class TopicGateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TopicGateMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        wait_for_topic = getattr(self.crawler.spider, "wait_for_topic", None)
        if wait_for_topic is not None and "depth" in request.meta:
            await wait_for_topic()

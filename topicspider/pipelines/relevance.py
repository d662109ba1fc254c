"""Keeps the pages relevant to the topic and drops the rest before storage.

Enabled by ``topicspider.pipelines.relevance.RelevancePipeline`` in ``ITEM_PIPELINES``
(before the storage pipeline). The spider scores each page; this stage decides what
is stored. ``TOPIC_STORE_ALL`` stores every page with its score, for analysis. Stats:
``topic/dropped_irrelevant``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import DropItem

from topicspider.config import get_bool
from topicspider.items import PageItem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class RelevancePipeline:
    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.store_all = get_bool(crawler.settings, "TOPIC_STORE_ALL")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RelevancePipeline:
        return cls(crawler)

    def process_item(self, item: PageItem) -> PageItem:
        if item.relevant is False and not self.store_all:
            self.stats.inc_value("topic/dropped_irrelevant")
            # Each such page is in the crawl log with its score; one log line per page
            # at the default level would drown the rest.
            raise DropItem(f"irrelevant to the topic (score {item.relevance}): {item.url}", log_level="DEBUG")
        return item

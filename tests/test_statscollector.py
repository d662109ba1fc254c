"""The crawl's stats collector (STATS_CLASS): Scrapy's MemoryStatsCollector's stats,
kept the same way, without its per-attribute deprecation wrapper; in process."""

from __future__ import annotations

from typing import Any

from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from topicspider.statscollector import StatsCollector


def _exercise(stats: Any) -> list[Any]:
    seen = []
    stats.open_spider()
    stats.inc_value("pages/fetched")
    stats.inc_value("pages/fetched", 4)
    stats.inc_value("links/insite", 2, start=10)
    stats.set_value("finish_reason", "finished")
    stats.max_value("depth/max", 3)
    stats.max_value("depth/max", 2)
    stats.min_value("score/min", 0.5)
    stats.min_value("score/min", 0.25)
    seen.append(stats.get_value("pages/fetched"))
    seen.append(stats.get_value("missing", "default"))
    seen.append(dict(stats.get_stats()))
    stats.set_stats({"only": 1})
    seen.append(dict(stats.get_stats()))
    stats.clear_stats()
    seen.append(dict(stats.get_stats()))
    return seen


def test_it_keeps_what_scrapys_collector_keeps() -> None:
    crawler = get_crawler()
    ours, scrapys = _exercise(StatsCollector(crawler)), _exercise(MemoryStatsCollector(crawler))
    assert ours == scrapys
    assert ours[2] == {"pages/fetched": 5, "links/insite": 12, "finish_reason": "finished", "depth/max": 3,
                       "score/min": 0.25}


def test_the_project_crawls_with_it() -> None:
    settings = Settings()
    settings.setmodule("topicspider.settings")
    crawler = get_crawler(settings_dict={"STATS_CLASS": settings["STATS_CLASS"]})
    assert isinstance(crawler.stats, StatsCollector)
    assert isinstance(crawler.stats, MemoryStatsCollector)  # what Scrapy's own code expects

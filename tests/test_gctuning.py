"""The crawler's garbage collector (GC_THRESHOLDS): the thresholds a crawl runs under,
Python's own given back when it ends, its collections counted, a bad value refused
before the crawl starts; in process, with Scrapy's own test crawler."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from topicspider.config import ConfigError, check_typed_settings, gc_thresholds_from
from topicspider.extensions.gctuning import GarbageCollection
from topicspider.localsite import generate_site


@pytest.fixture
def python_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_the_setting_takes_three_whole_numbers_or_none() -> None:
    assert gc_thresholds_from(Settings({"GC_THRESHOLDS": "50000, 20, 10"})) == (50_000, 20, 10)
    assert gc_thresholds_from(Settings({"GC_THRESHOLDS": [1000, 5, 5]})) == (1000, 5, 5)
    assert gc_thresholds_from(Settings({"GC_THRESHOLDS": ""})) is None
    for bad in ("50000,20", "50000,x,10", "0,10,10", "700,10,10,10", "1.5,10,10"):
        settings = Settings()
        settings.setmodule("topicspider.settings")
        settings.set("GC_THRESHOLDS", bad)
        with pytest.raises(ConfigError) as refused:
            check_typed_settings(settings)
        assert str(refused.value) == f"GC_THRESHOLDS must be three whole numbers, each at least 1, got {bad!r}"


def test_a_crawl_runs_under_the_thresholds_and_counts_its_collections(python_thresholds) -> None:
    crawler = get_crawler(settings_dict={"GC_THRESHOLDS": "1234,7,9"})
    crawler.stats.open_spider()
    extension = GarbageCollection.from_crawler(crawler)  # a real crawl's signals: the last test
    extension.engine_started()
    assert gc.get_threshold() == (1234, 7, 9)
    gc.collect(0)
    gc.collect(0)
    gc.collect(1)
    extension.engine_stopped()
    assert gc.get_threshold() == python_thresholds
    stats = crawler.stats.get_stats()
    # Collections Python starts itself may come on top of these three.
    assert stats["gc/collections/0"] >= 2 and stats["gc/collections/1"] >= 1
    assert stats["gc/seconds"] > 0
    gc.collect(0)  # after the crawl: no longer counted
    assert crawler.stats.get_value("gc/collections/0") == stats["gc/collections/0"]


def test_empty_thresholds_leave_pythons_own_and_still_count(python_thresholds) -> None:
    crawler = get_crawler(settings_dict={"GC_THRESHOLDS": ""})
    crawler.stats.open_spider()
    extension = GarbageCollection.from_crawler(crawler)
    extension.engine_started()
    assert gc.get_threshold() == python_thresholds
    gc.collect(0)
    extension.engine_stopped()
    assert crawler.stats.get_value("gc/collections/0") >= 1
    assert gc.get_threshold() == python_thresholds


def test_a_real_crawl_reports_its_collections(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 30, 3)
    site = serve(tmp_path / "site")
    # Thresholds this low make collections that a crawl of 30 pages is sure to run.
    result = crawl(site.url + "/", depth=10, settings={"DOWNLOAD_DELAY": 0, "GC_THRESHOLDS": "100,2,2"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stats["gc/collections/0"] > 0 and result.stats["gc/collections/1"] > 0
    assert result.stats["gc/seconds"] > 0


"""The benchmark's baseline: the breadth-first link follower a user would write instead
of topicspider, with Scrapy's stock components only.

Run outside the project (no ``scrapy.cfg`` above the working directory, no
``SCRAPY_SETTINGS_MODULE``)::

    python -m scrapy runspider bench/baseline_spider.py -a url=http://127.0.0.1:8000/ \\
        -a result=result.json

It follows every same-host ``a[href]`` link, yields ``{url, title}`` per page, and at
close writes ``result.json``: pages received, items, crawl seconds (spider opened to
spider closed, on the monotonic clock, as topicspider's report measures it), the
reactor thread's CPU seconds and the garbage collector's seconds over the same span,
and the bot name, which tells whether a project's settings leaked in. ``-a
gc_thresholds=A,B,C`` sets the garbage collector's thresholds first, as topicspider's
``GC_THRESHOLDS`` does (the benchmark's ``baseline-gc``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from time import monotonic, perf_counter, thread_time
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Request, Response


class BaselineSpider(scrapy.Spider):
    name = "baseline"
    custom_settings: dict[str, Any] = {
        # Breadth-first, as the Scrapy FAQ recommends.
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "DOWNLOAD_DELAY": 0,
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "INFO",
        # topicspider turns both off too; they would only open local ports.
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
    }

    def __init__(self, url: str = "", result: str = "", gc_thresholds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if gc_thresholds:  # what topicspider's GC_THRESHOLDS does, for the benchmark's baseline-gc
            gc.set_threshold(*(int(part) for part in gc_thresholds.split(",")))
        if not url:
            raise ValueError("give the start page: -a url=http://HOST:PORT/")
        self.start_urls = [url]
        self.host = urlsplit(url).netloc
        self.result_path = result
        self.opened_at = 0.0
        self.reactor_cpu_at = 0.0
        self.gc_seconds = self.collection_started = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> BaselineSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.spider_opened, signal=signals.spider_opened)
        return spider

    def spider_opened(self) -> None:
        self.opened_at = monotonic()
        self.reactor_cpu_at = thread_time()  # signals run on the reactor thread
        gc.callbacks.append(self._collected)

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.collection_started = perf_counter()
        else:
            self.gc_seconds += perf_counter() - self.collection_started

    def parse(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        yield {"url": response.url, "title": response.css("title::text").get()}
        for href in response.css("a::attr(href)").getall():
            request = response.follow(href, callback=self.parse)
            if urlsplit(request.url).netloc == self.host:
                yield request

    def closed(self, reason: str) -> None:
        elapsed = monotonic() - self.opened_at
        reactor_cpu = thread_time() - self.reactor_cpu_at
        if not self.result_path:
            return
        assert self.crawler.stats is not None
        stats = self.crawler.stats
        result = {
            "pages": stats.get_value("response_received_count", 0),
            "items": stats.get_value("item_scraped_count", 0),
            "elapsed_seconds": elapsed,
            "reactor_cpu_seconds": reactor_cpu,
            "gc_seconds": self.gc_seconds,  # the garbage collector's, from spider opened
            "finish_reason": reason,
            "bot_name": self.settings.get("BOT_NAME"),
        }
        Path(self.result_path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

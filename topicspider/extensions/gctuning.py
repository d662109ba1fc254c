"""The crawler process's garbage collector: fewer, larger collections while it crawls.

Enabled by ``topicspider.extensions.gctuning.GarbageCollection`` in ``EXTENSIONS``;
``GC_THRESHOLDS`` holds the three thresholds of Python's ``gc.set_threshold``, set when
the engine starts and Python's own given back when it stops (empty: Python's own, 700,
10, 10, all along; the collections are counted either way).

Why: a crawl allocates Scrapy's requests, responses, Deferreds and asyncio tasks by the
hundred a page, and nearly all of them die by reference counting. At Python's threshold
of 700 new objects, the young generation is collected every few pages, each time
walking every object still in flight, and the oldest generation, holding the crawl's
queues and maps, is walked whole again and again: measured on 8,000 pages, stock
Scrapy's breadth-first spider spent 23% of its time in the collector, topicspider with
a trained topic 13% (docs/benchmarks.md, *The garbage collector*). Cycles still die, in fewer
collections. Only the crawler's process is tuned; the page-analysis processes allocate
little that lives.

Stats: ``gc/collections/0``, ``/1``, ``/2`` (collections of each
generation while the engine ran, those Python started and any other) and
``gc/seconds`` (the time they took).
"""

from __future__ import annotations

import gc
import logging
from time import perf_counter
from typing import TYPE_CHECKING, Any

from scrapy import signals

from topicspider.config import gc_thresholds_from

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

GENERATIONS = 3


class GarbageCollection:
    def __init__(self, crawler: Crawler, thresholds: tuple[int, int, int] | None) -> None:
        self.crawler = crawler
        self.thresholds = thresholds
        self.before = gc.get_threshold()
        self.collections = [0] * GENERATIONS
        self.seconds = 0.0
        self._started = 0.0
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GarbageCollection:
        return cls(crawler, gc_thresholds_from(crawler.settings))

    def engine_started(self) -> None:
        self.before = gc.get_threshold()
        stats = self.crawler.stats
        assert stats is not None
        for generation in range(GENERATIONS):
            stats.set_value(f"gc/collections/{generation}", 0)
        stats.set_value("gc/seconds", 0.0)
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            logger.debug("Garbage collector thresholds %s (Python's were %s)", self.thresholds, self.before)
        gc.callbacks.append(self._collected)

    def engine_stopped(self) -> None:
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)
        gc.set_threshold(*self.before)

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        # Called by the collector, which never runs two collections at once; the stats
        # are kept current, as the report is written before the engine stops.
        if phase == "start":
            self._started = perf_counter()
            return
        self.seconds += perf_counter() - self._started
        generation = info["generation"]
        self.collections[generation] += 1
        stats = self.crawler.stats
        assert stats is not None
        stats.set_value(f"gc/collections/{generation}", self.collections[generation])
        stats.set_value("gc/seconds", round(self.seconds, 6))

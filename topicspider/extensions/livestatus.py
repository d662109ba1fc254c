"""The crawl's live status, written to the database every few seconds for the console
(``scrapy console``) or anyone reading the ``crawl_status`` table.

Enabled by ``topicspider.extensions.livestatus.LiveStatus`` in ``EXTENSIONS``; a
snapshot every ``STATUS_INTERVAL`` seconds (0 turns it off) into ``DATABASE_URL``'s
``crawl_status`` table, one row per worker (``host:pid``) of the crawl named by
``CRAWL_ID`` (see :func:`topicspider.storage.seen.job_name`). A snapshot holds the
crawl report's figures so far (pages fetched and stored, relevant and irrelevant,
errors, robots denials, the relevance histogram), the recent rate, a history of
counts for the rate chart, the queue per site, requests downloading per host and the
latest failures. The last one, written at close, says ``finished`` and why. Writes
happen on a thread of their own; a failed one is logged (once until one succeeds) and
counted (``status/errors``), and the crawl goes on. Stats: ``status/writes``, ``status/errors``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter, deque
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals

from topicspider.extensions.periodic import DatabaseLoop
from topicspider.extensions.report import summarize
from topicspider.signals import fetch_failed
from topicspider.storage.crawls import WorkerStatus, put_status

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

HISTORY = 300  # samples kept for the rate chart: 10 minutes at the default interval
RATE_WINDOW = 10.0  # seconds the current rate is measured over
RECENT_ERRORS = 20
QUEUE_ROWS = 30
URL_CHARS = 300  # a URL or reason is cut to this in the snapshot


class LiveStatus(DatabaseLoop):
    interval_setting = "STATUS_INTERVAL"
    thread_name = "topicspider-status"
    error_stat = "status/errors"

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.started = monotonic()  # spider opened: set again then
        self.started_at = time.time()
        self.history: deque[tuple[float, int, int]] = deque(maxlen=HISTORY)
        self.recent_errors: deque[tuple[str, str]] = deque(maxlen=RECENT_ERRORS)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LiveStatus:
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(extension.fetch_failed, signal=fetch_failed)
        return extension

    async def spider_opened(self) -> None:
        self.started, self.started_at = monotonic(), time.time()
        await self.start()
        logger.info("Live status of crawl %s every %.1f s (worker %s)", self.crawl, self.interval, self.worker)

    def fetch_failed(self, request: Request, reason: str) -> None:
        self.recent_errors.append((request.url[:URL_CHARS], str(reason)[:URL_CHARS]))

    async def visit(self) -> None:
        await self._write("running")

    async def spider_closed(self, reason: str) -> None:
        self.stop()
        try:
            await self._write("finished", reason)
        finally:
            await self.database.close()

    async def _write(self, state: str, reason: str = "") -> None:
        status = WorkerStatus(self.crawl, self.worker, state, time.time(), self.snapshot(reason))
        written = await self.transaction(lambda cursor, dialect: put_status(cursor, dialect, status) or True,
                                         "write the live status", write=True)
        if written:
            self.stats.inc_value("status/writes")

    def snapshot(self, reason: str = "") -> dict[str, Any]:
        """The status as the console shows it; made on the reactor thread, so cheap."""
        elapsed = monotonic() - self.started
        stats = dict(self.stats.get_stats())
        if reason:
            stats.setdefault("finish_reason", reason)
        report = summarize(stats, elapsed)
        self.history.append((round(elapsed, 1), report["pages_fetched"], report["pages_stored"]))
        spider = self.crawler.spider
        return {
            "interval": self.interval,
            "started_at": self.started_at,
            "elapsed": round(elapsed, 1),
            "report": report,
            "rate": self._recent_rate(),
            "history": list(self.history),
            "queue": self._queue(),
            "downloading": self._downloading(),
            "recent_errors": list(self.recent_errors),
            "seeds": [url[:URL_CHARS] for url in getattr(spider, "seed_urls", [])[:QUEUE_ROWS]],
            "depth": getattr(spider, "max_depth", None),
        }

    def _recent_rate(self) -> float:
        """Pages fetched per second over the last :data:`RATE_WINDOW` seconds."""
        if len(self.history) < 2:
            return 0.0
        now, fetched, _ = self.history[-1]
        for then, before, _ in reversed(self.history):
            if now - then >= RATE_WINDOW:
                break
        return round((fetched - before) / (now - then), 2) if now > then else 0.0

    def _queue(self) -> list[tuple[str, int]]:
        engine = self.crawler.engine
        by_site = getattr(getattr(engine, "scheduler", None), "queued_by_site", None)
        if by_site is None:
            return []
        return [(str(site), count) for site, count in by_site().most_common(QUEUE_ROWS)]

    def _downloading(self) -> list[tuple[str, int]]:
        engine = self.crawler.engine
        if engine is None:
            return []
        active: Counter[str] = Counter({str(key): len(slot.active)
                                        for key, slot in engine.downloader.slots.items() if slot.active})
        return active.most_common(QUEUE_ROWS)

"""The crawl's progress in one line: live on a terminal, logged every so often elsewhere.

Enabled by ``topicspider.extensions.progress.Progress`` in ``EXTENSIONS``;
``PROGRESS_INTERVAL`` (60 s; 0 turns it off) is how often the line is logged (INFO)
when the log does not go to a terminal (``LOG_FILE``, a pipe, scrapyd). When it does
(and ``TERM`` is not ``dumb``), the line is redrawn in place every :data:`LIVE_REFRESH`
seconds instead, cut to the terminal's width, and a log record clears it before it is
written, so the two never mix. It says pages fetched and stored, the rate over the last
:data:`RATE_WINDOW` seconds, requests queued, the depth each site's level has reached
(the shallowest still in progress), relevant and irrelevant pages with a topic, and
errors. It replaces Scrapy's ``LogStats`` line (``LOGSTATS_INTERVAL`` is 0 unless set),
which said less, once a minute.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from collections.abc import Mapping
from time import monotonic
from typing import IO, TYPE_CHECKING, Any

from scrapy import signals
from twisted.internet.task import LoopingCall

from topicspider.config import get_float, off_by_design
from topicspider.extensions.report import summarize

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

LIVE_REFRESH = 1.0  # seconds between redraws of the live line
RATE_WINDOW = 10.0  # seconds the current rate is measured over
SITES_SHOWN = 3  # sites whose depth the line names; the rest are counted
CLEAR_LINE = "\r\x1b[2K"


def progress_line(report: Mapping[str, Any], rate: float, queued: int, depths: Mapping[str, int]) -> str:
    """The line, from the crawl report's figures so far (:func:`summarize`), the recent
    rate (pages/s), the requests queued and each site's current depth."""
    parts = [f"fetched {report['pages_fetched']:,}", f"stored {report['pages_stored']:,}", f"{rate:.1f} pages/s",
             f"queued {queued:,}"]
    if depths:
        shown = sorted(depths.items(), key=lambda pair: (pair[1], pair[0]))[:SITES_SHOWN]
        more = f" (+{len(depths) - len(shown)} sites)" if len(depths) > len(shown) else ""
        parts.append("depth " + ", ".join(f"{site} {depth}" for site, depth in shown) + more)
    if "pages_relevant" in report:
        parts.append(f"relevant {report['pages_relevant']:,}, irrelevant {report['pages_irrelevant']:,}")
    parts.append(f"errors {report['errors']:,}")
    return " · ".join(parts)


def terminal_of_the_log() -> IO[str] | None:
    """The terminal the log records are written to, if they are (not with ``LOG_FILE``,
    a pipe, or ``TERM=dumb``)."""
    if os.environ.get("TERM", "") == "dumb":
        return None
    for handler in logging.getLogger().handlers:
        stream = getattr(handler, "stream", None)
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler) \
                and stream is not None and stream.isatty():
            return stream  # type: ignore[no-any-return]
    return None


def _width(stream: IO[str]) -> int:
    """The terminal's width, or 80 when it does not say (a pseudo-terminal of size 0)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


class _ClearLiveLine(logging.Filter):
    """On the handlers writing to the terminal: a record clears the live line first."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self.stream = stream
        self.drawn = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.drawn:
            self.stream.write(CLEAR_LINE)
            self.drawn = False
        return True


class Progress:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.interval = get_float(crawler.settings, "PROGRESS_INTERVAL")
        if self.interval == 0:
            raise off_by_design(__name__, "PROGRESS_INTERVAL is 0")
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.live = False  # told at spider_opened: Scrapy may set its log handler up after extensions
        self.stream: IO[str] = sys.stderr
        self.started = monotonic()
        self.samples: deque[tuple[float, int]] = deque()
        self.loop = LoopingCall(self.tick)
        self.clearer = _ClearLiveLine(self.stream)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Progress:
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        self.started = monotonic()
        terminal = terminal_of_the_log()
        self.live = terminal is not None
        self.stream = terminal or sys.stderr
        self.clearer.stream = self.stream
        if self.live:
            for handler in logging.getLogger().handlers:
                handler.addFilter(self.clearer)
        self.loop.start(LIVE_REFRESH if self.live else self.interval, now=False)

    def spider_closed(self) -> None:
        if self.loop.running:
            self.loop.stop()
        if self.live:
            for handler in logging.getLogger().handlers:
                handler.removeFilter(self.clearer)
            if self.clearer.drawn:
                self.stream.write(CLEAR_LINE)
                self.stream.flush()

    def tick(self) -> None:
        try:
            line = self.line()
        except Exception:  # noqa: BLE001 - a progress line is never worth a crawl; the loop goes on
            logger.debug("No progress line this time", exc_info=True)
            return
        if not self.live:
            logger.info("Progress: %s", line)
            return
        width = _width(self.stream)
        self.stream.write(CLEAR_LINE + (line if len(line) < width else line[:max(width - 2, 1)] + "…"))
        self.stream.flush()
        self.clearer.drawn = True

    def line(self) -> str:
        now = monotonic()
        report = summarize(dict(self.stats.get_stats()), now - self.started)
        return progress_line(report, self._rate(now, report["pages_fetched"]), self._queued(), self._depths())

    def _rate(self, now: float, fetched: int) -> float:
        """Pages fetched per second over about the last :data:`RATE_WINDOW` seconds (the
        last interval, if longer)."""
        self.samples.append((now, fetched))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW:
            self.samples.popleft()
        then, before = self.samples[0] if len(self.samples) > 1 else (self.started, 0)
        return (fetched - before) / (now - then) if now > then else 0.0

    def _scheduler(self) -> Any:
        return getattr(self.crawler.engine, "scheduler", None) if self.crawler.engine is not None else None

    def _queued(self) -> int:
        scheduler = self._scheduler()
        return len(scheduler) if scheduler is not None else 0

    def _depths(self) -> dict[str, int]:
        depth_by_site = getattr(self._scheduler(), "depth_by_site", None)
        return {str(site): depth for site, depth in depth_by_site().items()} if depth_by_site is not None else {}

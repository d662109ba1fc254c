"""The crawl report: printed at close and written as JSON to ``STATS_FILE``.

The crawl's time runs from spider opened to spider closed; the report is made when
the engine has stopped, so that it holds what components wrote while closing.

Enabled by ``topicspider.extensions.report.CrawlReport`` in ``EXTENSIONS``. An empty
``STATS_FILE`` prints the report without writing it. The JSON holds the summary
under ``report`` and every Scrapy stat under ``stats``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from time import monotonic, process_time, thread_time
from typing import TYPE_CHECKING, Any

from scrapy import signals

from topicspider.ledger import ledger_line, ledger_of
from topicspider.urls import mask_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

ERROR_PREFIXES = ("fetch/errors/",)
HISTOGRAM_PREFIX = "topic/histogram/"
HISTOGRAM_BAR = 40
ERROR_KEYS = ("spider_exceptions/count", "storage/pages_spilled", "storage/pages_lost", "pagepool/lost",
              "pagepool/quarantined", "quarantine/dropped")


def summarize(stats: dict[str, Any], elapsed: float) -> dict[str, Any]:
    """The report's figures from a crawl's stats."""
    fetched = stats.get("pages/fetched", 0)
    errors = sum(v for k, v in stats.items() if k.startswith(ERROR_PREFIXES))
    errors += sum(stats.get(key, 0) for key in ERROR_KEYS)
    return {
        "pages_fetched": fetched,
        "pages_stored": stats.get("storage/pages_written", 0),
        "duplicates_stored": stats.get("storage/aliases_written", 0),
        "near_duplicates": stats.get("duplicates/near", 0),
        "emails_stored": stats.get("storage/emails_written", 0),
        "pages_spilled": stats.get("storage/pages_spilled", 0),
        "pages_lost": stats.get("storage/pages_lost", 0),
        "errors": errors,
        "links_insite": stats.get("links/insite", 0),
        "links_offsite": stats.get("links/offsite", 0),
        "robots_denied": stats.get("robots/denied", 0) + stats.get("robots/denied_unreachable", 0),
        "meta_noindex": stats.get("robots/meta_noindex", 0),
        "meta_nofollow": stats.get("robots/meta_nofollow", 0),
        "hosts_slowed_by_robots": stats.get("pacing/robots_delayed_hosts", 0),
        "max_host_delay": stats.get("pacing/max_delay", 0.0),
        "backoffs": stats.get("backoff/count", 0),
        "backoff_seconds": round(stats.get("backoff/seconds", 0.0), 1),
        **topic_summary(stats),
        **({"urls": ledger_line(ledger)} if (ledger := ledger_of(stats)) else {}),
        "elapsed_seconds": round(elapsed, 3),
        "pages_per_second": round(fetched / elapsed, 2) if elapsed > 0 else 0.0,
        "finish_reason": stats.get("finish_reason", ""),
    }


def topic_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """Relevant and irrelevant pages, the threshold between them, the harvest rate
    (relevant / scored) and the histogram of scores by lower bound; empty without a topic."""
    scored = stats.get("topic/scored", 0)
    if not scored:
        return {}
    relevant = stats.get("topic/relevant", 0)
    histogram = {key.rsplit("/", 1)[1]: count for key, count in stats.items() if key.startswith(HISTOGRAM_PREFIX)}
    return {
        "pages_relevant": relevant,
        "pages_irrelevant": stats.get("topic/irrelevant", 0),
        "relevance_threshold": stats.get("topic/threshold"),
        "harvest_rate": round(relevant / scored, 4),
        "relevance_histogram": dict(sorted(histogram.items(), key=lambda pair: float(pair[0]))),
    }


class CrawlReport:
    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.path = crawler.settings.get("STATS_FILE") or ""
        stores = any("StoragePipeline" in str(name) for name in crawler.settings.getwithbase("ITEM_PIPELINES"))
        self.database_url = (crawler.settings.get("DATABASE_URL") or "") if stores else ""
        self.spill_file: str = crawler.settings.get("STORAGE_SPILL_FILE") or ""
        self.crawl_log = crawler.settings.get("CRAWL_LOG") or ""
        self.started = monotonic()
        self.cpu_started = (0.0, 0.0)
        self.elapsed: float | None = None
        self.reason = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlReport:
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(extension.engine_stopped, signal=signals.engine_stopped)
        return extension

    def spider_opened(self) -> None:
        self.started = monotonic()
        self.cpu_started = (thread_time(), process_time())

    def spider_closed(self, reason: str) -> None:
        self.elapsed, self.reason = monotonic() - self.started, reason
        # CPU the crawl cost the reactor thread alone (signals run on it), and the whole
        # process; what a page costs the reactor is what bounds a crawl's rate.
        reactor, process = (now - then for now, then in zip((thread_time(), process_time()), self.cpu_started))
        self.stats.set_value("crawl/reactor_cpu_seconds", round(reactor, 3))
        self.stats.set_value("crawl/process_cpu_seconds", round(process, 3))

    def engine_stopped(self) -> None:
        if self.elapsed is None:
            return  # the spider never opened
        stats = dict(self.stats.get_stats())
        stats.setdefault("finish_reason", self.reason)
        report = summarize(stats, self.elapsed)
        sys.stdout.write(self._render(report))
        sys.stdout.flush()
        if self.path:
            document = {"report": report, "stats": stats}
            try:
                Path(self.path).write_text(json.dumps(document, indent=2, default=str, sort_keys=True) + "\n", encoding="utf-8")
            except OSError as exc:
                logger.error("Could not write STATS_FILE %s: %s", self.path, exc)

    def _render(self, report: dict[str, Any]) -> str:
        lines = ["", "topicspider crawl report"]
        for key, value in report.items():
            if key == "relevance_histogram":
                lines += self._histogram(value)
            else:
                lines.append(f"  {key.replace('_', ' '):<24} {value}")
        if self.database_url:
            lines.append(f"  {'database':<24} {mask_url(self.database_url)}")
        if report.get("pages_spilled"):
            lines.append(f"  {'spill file':<24} {self.spill_file} (store with: scrapy replay-spill {self.spill_file})")
        if self.crawl_log:
            lines.append(f"  {'crawl log':<24} {self.crawl_log}")
        if self.path:
            lines.append(f"  {'stats file':<24} {self.path}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _histogram(histogram: dict[str, int]) -> list[str]:
        lines = [f"  {'relevance histogram':<24} (score from, pages)"]
        most = max(histogram.values(), default=1)
        for bucket, count in histogram.items():
            bar = "#" * max(1, round(HISTOGRAM_BAR * count / most))
            lines.append(f"    {bucket:>6} {count:>8}  {bar}")
        return lines

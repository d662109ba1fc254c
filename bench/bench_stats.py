"""What a stat costs: topicspider's stats collector against Scrapy's MemoryStatsCollector.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_stats.py [--calls 200000] [--rounds 5]

A crawl counts about 70 stats a page on the reactor thread (``inc_value`` mostly). This
times ``inc_value`` and ``get_value`` on both collectors, in the same process, the two
taking turns within each round, and prints each round's ratio and their median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from common import REPO, header_lines

sys.path.insert(0, str(REPO))

from scrapy.statscollectors import MemoryStatsCollector  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from topicspider.statscollector import StatsCollector  # noqa: E402

KEYS = ("pages/fetched", "links/insite", "links/offsite", "scheduler/enqueued", "downloader/request_count")


def time_calls(stats: Any, calls: int) -> float:
    """Seconds for ``calls`` stat operations: an ``inc_value`` then a ``get_value``, in turn."""
    started = time.perf_counter()
    for number in range(calls // 2):
        key = KEYS[number % len(KEYS)]
        stats.inc_value(key)
        stats.get_value(key)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    print("\n".join(header_lines("stats collector: topicspider's against Scrapy's", ["scrapy"])))
    crawler = get_crawler()
    ours, scrapys = StatsCollector(crawler), MemoryStatsCollector(crawler)
    ratios = []
    for round_number in range(1, arguments.rounds + 1):
        # Turns flip each round, so that drift favours neither.
        if round_number % 2:
            ours_seconds, scrapys_seconds = time_calls(ours, arguments.calls), time_calls(scrapys, arguments.calls)
        else:
            scrapys_seconds, ours_seconds = time_calls(scrapys, arguments.calls), time_calls(ours, arguments.calls)
        ratios.append(ours_seconds / scrapys_seconds)
        print(f"round {round_number}: topicspider {ours_seconds / arguments.calls * 1e9:.0f} ns, Scrapy "
              f"{scrapys_seconds / arguments.calls * 1e9:.0f} ns a call; ratio {ratios[-1]:.3f}")
    print(f"topicspider against Scrapy, time per call: median {statistics.median(ratios):.3f}"
          f" ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Pages per second written into MySQL: batched against row-by-row.

Usage (from the repository root, with the project's virtualenv and a MySQL/MariaDB
server)::

    .venv/bin/python bench/bench_storage.py [--pages 2000] [--batch 100] [--rounds 3]
        [--text-chars 3000] [--mysql-url mysql://root@127.0.0.1:3306/topicspider_bench]

Writes ``--pages`` generated pages (each with ``--text-chars`` characters of Chinese
text, a title and two e-mail addresses) with topicspider's own
:class:`~topicspider.storage.mysql.MySQLStore`, into a database dropped and created
afresh before every run, four ways:

* **batched**: ``write_pages`` of ``--batch`` pages at a time, as the storage pipeline
  does: one transaction per batch, pymysql's ``executemany`` sending multi-row
  ``INSERT ... ON DUPLICATE KEY UPDATE`` statements;
* **unindexed**: batched with ``SEARCH_INDEX`` off, to show what the search index
  costs (the text repeats one sentence, so a page has few distinct terms: the crawl
  benchmark's ``noindex`` variant, on real prose, is the fuller measure);
* **statements**: the same transactions, but one ``INSERT`` per row (what
  ``executemany`` would do without pymysql's multi-row rewrite), to tell the
  statements' share from the transactions';
* **row-by-row**: ``write_pages`` of one page at a time, a transaction and a commit per
  page, as a pipeline without batching (the seeds' way) does.

The three take turns in every round, their order reversed every other round; each
run's rate is pages / seconds of writing (connection and schema set-up excluded). The
ratios to row-by-row are taken within a round.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pymysql  # noqa: E402
from pymysql.cursors import Cursor  # noqa: E402

from bench_crawl import fresh_mysql_database  # noqa: E402
from topicspider.items import PageItem  # noqa: E402
from topicspider.storage.mysql import MySQLStore  # noqa: E402

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/topicspider_bench"
PROSE = "数据库按批写入比逐行写入快得多，因为每次提交都要把日志刷到磁盘上。"
WAYS = ("batched", "unindexed", "statements", "row-by-row")


class OneStatementPerRow(Cursor):
    """``executemany`` as a loop of ``execute``: no multi-row INSERT."""

    def executemany(self, query: str, args: Any) -> int:
        return sum(self.execute(query, row) or 0 for row in args)


def make_pages(count: int, text_chars: int) -> list[PageItem]:
    text = (PROSE * (text_chars // len(PROSE) + 1))[:text_chars]
    fetched_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return [
        PageItem(url=f"http://bench.example.cn/p{index}.html", title=f"第 {index} 页", depth=index % 6,
                 http_status=200, fetched_at=fetched_at, text=text, relevance=None,
                 emails=[f"a{index}@example.cn", f"b{index}@example.org"], content_type="text/html; charset=utf-8",
                 encoding="utf-8", content_length=len(text.encode()))
        for index in range(count)
    ]


def write(store: MySQLStore, pages: Sequence[PageItem], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(pages), batch):
        store.write_pages(pages[start:start + batch])
    return time.perf_counter() - started


def run_way(way: str, url: str, pages: Sequence[PageItem], batch: int) -> float:
    """Pages per second written ``way`` into a fresh database."""
    fresh_mysql_database(url)
    store = MySQLStore(url, index=way != "unindexed")
    try:
        if way == "statements":
            store._connection.cursorclass = OneStatementPerRow  # type: ignore[union-attr]
        seconds = write(store, pages, 1 if way == "row-by-row" else batch)
    finally:
        store.close()
    return len(pages) / seconds


def server_version(url: str) -> str:
    store = MySQLStore(url)
    try:
        connection = store._connection
        assert connection is not None
        return str(connection.get_server_info())
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100, help="pages per batch (STORAGE_BATCH_SIZE's default)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text-chars", type=int, default=3000)
    parser.add_argument("--mysql-url", default=DEFAULT_MYSQL_URL, help="dropped and created for every run")
    options = parser.parse_args()
    if min(options.pages, options.batch, options.rounds, options.text_chars) < 1:
        parser.error("every number must be at least 1")
    try:
        fresh_mysql_database(options.mysql_url)
    except pymysql.MySQLError as exc:
        print(f"bench_storage: cannot use {options.mysql_url}: {exc}", file=sys.stderr)
        return 1
    pages = make_pages(options.pages, options.text_chars)
    print(f"{platform.node()}: {platform.python_implementation()} {platform.python_version()}, "
          f"pymysql {pymysql.VERSION_STRING}, server {server_version(options.mysql_url)}")
    print(f"{options.pages} pages of {options.text_chars} characters and 2 e-mails; batches of {options.batch}; "
          f"started {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    rates: dict[str, list[float]] = {way: [] for way in WAYS}
    ratios: dict[str, list[float]] = {way: [] for way in WAYS}
    for index in range(1, options.rounds + 1):
        order: Sequence[str] = WAYS if index % 2 else tuple(reversed(WAYS))
        done = {way: run_way(way, options.mysql_url, pages, options.batch) for way in order}
        for way in WAYS:
            rates[way].append(done[way])
            ratios[way].append(done[way] / done["row-by-row"])
        print(f"round {index} ({','.join(order)}): " + ", ".join(f"{way} {done[way]:.0f}/s" for way in WAYS))
    fresh_mysql_database(options.mysql_url)
    print(f"\n{'way':<12} {'median pages/s':>15} {'x row-by-row':>14}  range")
    summary: Callable[[list[float]], str] = lambda values: f"{min(values):.2f}-{max(values):.2f}"  # noqa: E731
    for way in WAYS:
        print(f"{way:<12} {statistics.median(rates[way]):>15.0f} {statistics.median(ratios[way]):>14.2f}  "
              f"{summary(ratios[way])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The search index's cost on each backend: writing pages into it, its size, queries.

Usage (from the repository root, with the project's virtualenv; MySQL/MariaDB for the
``mysql-*`` ways)::

    .venv/bin/python bench/bench_index.py [--pages 3000] [--batch 100] [--rounds 3]
        [--body-chars 3000] [--ways sqlite-postings,sqlite-fts5,mysql-postings,...]
        [--mysql-url mysql://root@127.0.0.1:3306/topicspider_bench]

Pages hold ``--body-chars`` characters of real Chinese prose (the crawl benchmark's,
:func:`bench_crawl.body_source`) under a title; their index terms are cut once,
beforehand (a crawl cuts them in the page-analysis process), so what is timed is the
index's own writes: ``--batch`` pages a transaction, as the storage pipeline writes them,
into a database made afresh for every run. The ways:

* **sqlite-postings**: SQLite with the plain tables of postings (a row per term per page)
  it kept until schema 5 (:class:`postings_index.PostingsIndex`, kept here to compare);
* **sqlite-fts5**: SQLite's index now (:class:`~topicspider.search.fts5.Fts5Index`);
* **mysql-postings**: MySQL's index until schema 7, the same plain tables;
* **mysql-fulltext**: a candidate for MySQL: InnoDB ``FULLTEXT`` over the pre-segmented
  terms, each prefixed so that it has the three characters ``innodb_ft_min_token_size``
  asks by default (its ranking is InnoDB's, not BM25: only its writes are measured);
* **mysql-segments**: MySQL's index now (:class:`~topicspider.search.segments.SegmentIndex`):
  postings grouped per term and batch (a row per distinct term of a batch, its pages and
  counts packed in a blob), as Lucene's segments are, merged by the server after a
  batch as the store merges them (the merges are timed too).

The ways take turns in every round, their order reversed every other round. Then
each way that can (all but ``mysql-fulltext``) answers the
same queries through :func:`topicspider.search.index.search`: words picked across the
range of document frequencies, alone and in pairs; the top ten of each must be the
same pages with the same scores everywhere, and the mean time per query is given.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_crawl import body_source, chinese_prose, fresh_mysql_database  # noqa: E402
from common import BenchFailure, header_lines  # noqa: E402
from postings_index import PostingsIndex  # noqa: E402

from topicspider.search.fts5 import SCHEMA as FTS5_SCHEMA  # noqa: E402
from topicspider.search.fts5 import Fts5Index  # noqa: E402
from topicspider.search.index import IndexTables, search  # noqa: E402
from topicspider.search.segments import SegmentIndex  # noqa: E402
from topicspider.search.terms import document_terms  # noqa: E402
from topicspider.storage.dialect import MYSQL, SQLITE, Dialect  # noqa: E402
from topicspider.storage.sqlite import MIGRATIONS  # noqa: E402

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/topicspider_bench"
WAYS = ("sqlite-postings", "sqlite-fts5", "mysql-postings", "mysql-fulltext", "mysql-segments")
QUERY_WORDS = 12  # single-word queries, spread over the document frequencies
TOP = 10

Terms = Mapping[str, int]


@dataclass
class Database:
    connection: Any
    dialect: Dialect
    tables: IndexTables | None  # None: a candidate that cannot answer queries here
    size: Callable[[], int]  # bytes the index takes


def _sqlite(path: Path, fts5: bool) -> Database:
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    # Schema 4: pages, and the plain tables of postings as they were until schema 5.
    connection.executescript("".join(str(MIGRATIONS[version]) for version in range(1, 5)))
    if fts5:
        connection.executescript(FTS5_SCHEMA)

    def size() -> int:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return path.stat().st_size

    return Database(connection, SQLITE, Fts5Index() if fts5 else PostingsIndex(SQLITE), size)


FULLTEXT_TABLE = """CREATE TABLE search_fulltext (
    page_id BIGINT PRIMARY KEY, length INT NOT NULL, terms MEDIUMTEXT NOT NULL,
    FULLTEXT KEY search_fulltext_terms (terms)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def _mysql(url: str, way: str) -> Database:
    from topicspider.storage.mysql import MySQLStore

    fresh_mysql_database(url)
    store = MySQLStore(url)  # its schema, the segments' tables included
    store.close()
    from topicspider.storage.mysql import MIGRATIONS, open_connection

    _, connection = open_connection(url)
    with connection.cursor() as cursor:
        # Schema 3's plain tables of postings, which schema 7 dropped.
        for statement in {"mysql-fulltext": [FULLTEXT_TABLE], "mysql-postings": MIGRATIONS[3][:2]}.get(way, []):
            cursor.execute(statement)
    connection.commit()

    def size() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT table_name FROM information_schema.tables "
                           "WHERE table_schema = DATABASE() AND table_name LIKE 'search%%'")
            tables = [name for (name,) in cursor.fetchall()]
            cursor.execute(f"ANALYZE TABLE {', '.join(tables)}")  # the sizes below are its estimates
            cursor.fetchall()
            cursor.execute("SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
                           "WHERE table_schema = DATABASE() AND table_name LIKE 'search%%'")
            return int(cursor.fetchone()[0])

    tables = {"mysql-postings": PostingsIndex(), "mysql-segments": SegmentIndex()}.get(way)
    return Database(connection, MYSQL, tables, size)


def _fulltext_write(cursor: Any, batch: Mapping[int, Terms]) -> None:
    # "zz" + term: two-character words reach innodb_ft_min_token_size (3).
    cursor.executemany("REPLACE INTO search_fulltext (page_id, length, terms) VALUES (%s, %s, %s)", [
        (page_id, sum(terms.values()), " ".join(" ".join(["zz" + term] * count) for term, count in terms.items()))
        for page_id, terms in batch.items()])


def open_way(way: str, scratch: Path, mysql_url: str) -> Database:
    if way.startswith("sqlite"):
        return _sqlite(scratch / f"{way}.db", way == "sqlite-fts5")
    return _mysql(mysql_url, way)


def write_all(way: str, database: Database, pages: Sequence[Terms], batch: int) -> tuple[float, float]:
    """Seconds to write every page's index, ``batch`` pages a transaction, and this
    process's CPU seconds meanwhile (in a crawl, the storage thread's: what it takes from
    the reactor's share of the GIL)."""
    connection, started, cpu = database.connection, time.perf_counter(), time.process_time()
    for number, start in enumerate(range(0, len(pages), batch)):
        chunk = {page_id: pages[page_id - 1] for page_id in range(start + 1, min(start + batch, len(pages)) + 1)}
        cursor = connection.cursor()
        if database.dialect is SQLITE:
            cursor.execute("BEGIN IMMEDIATE")
            cursor.executemany("INSERT INTO pages (id, url, title, depth, http_status, fetched_at, text, "
                               "content_type, encoding, content_length) VALUES (?, ?, '', 0, 200, '', '', '', '', 0)",
                               [(page_id, f"http://x/{page_id}") for page_id in chunk])
        else:
            cursor.executemany("INSERT INTO pages (id, url, url_hash, title, depth, http_status, fetched_at, text, "
                               "content_type, encoding, content_length) VALUES (%s, %s, UNHEX(MD5(%s)), '', 0, 200, "
                               "NOW(), '', '', '', 0)",
                               [(page_id, f"http://x/{page_id}", f"http://x/{page_id}") for page_id in chunk])
        if way == "mysql-fulltext":
            _fulltext_write(cursor, chunk)
        else:
            assert database.tables is not None
            database.tables.write(cursor, chunk)
        if database.dialect is SQLITE:
            cursor.execute("COMMIT")
        else:
            connection.commit()
        if isinstance(database.tables, SegmentIndex):  # as MySQLStore.merge_index does after a batch
            database.tables.merge(cursor)
            connection.commit()
    return time.perf_counter() - started, time.process_time() - cpu


def pick_queries(pages: Sequence[Terms]) -> list[str]:
    frequencies: dict[str, int] = {}
    for terms in pages:
        for term in terms:
            frequencies[term] = frequencies.get(term, 0) + 1
    ranked = sorted(frequencies, key=lambda term: (frequencies[term], term))
    words = [ranked[(index * (len(ranked) - 1)) // (QUERY_WORDS - 1)] for index in range(QUERY_WORDS)]
    return words + [f"{first} {second}" for first, second in zip(words, reversed(words))][:QUERY_WORDS // 2]


def run_queries(database: Database, queries: Sequence[str], repeat: int = 3) -> tuple[float, list[list[tuple[int, float]]]]:
    """Mean seconds per query (best of ``repeat`` passes) and each query's top ten."""
    assert database.tables is not None
    best, tops = float("inf"), []
    for _ in range(repeat):
        cursor = database.connection.cursor()
        started = time.perf_counter()
        tops = [[(hit.page_id, round(hit.score, 9)) for hit in
                 search(cursor, database.dialect, query, TOP, tables=one_search(database.tables)).hits]
                for query in queries]
        best = min(best, (time.perf_counter() - started) / len(queries))
        if database.dialect is MYSQL:
            database.connection.commit()
    return best, tops


def one_search(tables: IndexTables) -> IndexTables:
    # A SegmentIndex keeps the postings it read for the rest of one search only.
    return SegmentIndex() if isinstance(tables, SegmentIndex) else tables


def make_pages(count: int, body_chars: int) -> list[Terms]:
    body = body_source(chinese_prose(), body_chars)
    return [document_terms(f"第{index}页 {body(index)[:12]}", body(index)) for index in range(count)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=100, help="pages per transaction (STORAGE_BATCH_SIZE's default)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--body-chars", type=int, default=3000)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--mysql-url", default=DEFAULT_MYSQL_URL, help="dropped and created for every run")
    parser.add_argument("--scratch", type=Path, default=REPO / "bench" / ".cache" / "bench-index")
    options = parser.parse_args(argv)
    ways = [way for way in options.ways.split(",") if way]
    if unknown := [way for way in ways if way not in WAYS]:
        parser.error(f"unknown ways {unknown}; known: {', '.join(WAYS)}")
    options.scratch.mkdir(parents=True, exist_ok=True)
    for line in header_lines("bench_index", ["pymysql"]):
        print(line)
    started = time.perf_counter()
    pages = make_pages(options.pages, options.body_chars)
    postings = sum(len(terms) for terms in pages)
    print(f"{len(pages)} pages of {options.body_chars} characters; {postings / len(pages):.0f} distinct terms a "
          f"page, cut in {time.perf_counter() - started:.1f} s (not timed below); {options.batch} pages a transaction")
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    cpu: dict[str, list[float]] = {way: [] for way in ways}
    sizes: dict[str, int] = {}
    for round_number in range(options.rounds):
        order = ways if round_number % 2 == 0 else list(reversed(ways))
        for way in order:
            database = open_way(way, options.scratch, options.mysql_url)
            try:
                wall, client = write_all(way, database, pages, options.batch)
                seconds[way].append(wall)
                cpu[way].append(client)
                sizes[way] = database.size()
            finally:
                database.connection.close()
        print(f"round {round_number + 1}: " + ", ".join(
            f"{way} {1000 * seconds[way][-1] / len(pages):.3f} ms/page" for way in ways))
    print()
    reference = ways[0]
    print(f"{'way':<16} {'ms/page (median)':>17} {'ratio to ' + reference:>24} {'index MB':>9} "
          f"{'client CPU ms/page':>19}")
    for way in ways:
        ratios = [mine / theirs for mine, theirs in zip(seconds[way], seconds[reference])]
        print(f"{way:<16} {1000 * statistics.median(seconds[way]) / len(pages):>17.3f} "
              f"{statistics.median(ratios):>10.3f} ({min(ratios):.3f}-{max(ratios):.3f}) "
              f"{sizes[way] / 1e6:>9.1f} {1000 * statistics.median(cpu[way]) / len(pages):>19.3f}")
    print()
    queries = pick_queries(pages)
    answers: dict[str, list[list[tuple[int, float]]]] = {}
    for way in [way for way in ways if way != "mysql-fulltext"]:
        database = open_way(way, options.scratch, options.mysql_url)
        try:
            write_all(way, database, pages, options.batch)
            per_query, answers[way] = run_queries(database, queries)
        finally:
            database.connection.close()
        print(f"{way:<16} {1000 * per_query:.2f} ms a query ({len(queries)} queries, best of 3 passes)")
    first = next(iter(answers.values()), None)
    differing = [way for way, tops in answers.items() if tops != first]
    if differing:
        raise BenchFailure(f"the top {TOP} differ between {next(iter(answers))} and {differing}")
    if answers:
        print(f"the top {TOP} of every query are the same pages with the same scores on {', '.join(answers)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchFailure as failure:
        print(f"bench_index: {failure}", file=sys.stderr)
        sys.exit(1)

"""MySQL/MariaDB's search index: postings kept in segments, as Lucene keeps them.

Each batch of pages the storage pipeline writes becomes one new segment: a row per
distinct term of the batch, its pages packed in a blob, where a table of plain postings
wrote a row per term per page (``bench/bench_index.py``: half the client's CPU a
page, and queries much faster on a large index). Tables
(MySQL schema 8, :mod:`topicspider.storage.mysql`):

* ``search_segments (segment, term, postings)``: :data:`POSTING` records, one per page
  of the segment holding the term: the page id, the batch that wrote it, the term's
  weighted count and the page's number of index terms (BM25's length). Kept in the
  order of segment, then term, so that a segment's rows lie together, as a Lucene
  segment is a file of its own: a batch is appended, a merge reads only its segments;
* ``search_segment_info (id, tier, pages, live)``: each segment's size, and how many of
  its pages are still indexed there; a batch's id is its segment's when written;
* ``search_index_pages (page_id, length, batch, segment)``: every indexed page, where
  its postings are;
* ``search_dead (batch, page_id, segment)``: postings left behind by a page indexed
  again or taken out of the index. A query skips them; a segment none of whose pages
  is live is deleted whole.

Segments are merged by the server, never read by Python: once :data:`MERGE_FACTOR`
segments share a tier (the order of magnitude of their page count), their blobs are
concatenated per term (``GROUP_CONCAT``) into one segment, up to
:data:`MAX_MERGED_TIER` (lower if the server's ``max_allowed_packet`` is small), so
that each blob stays within a packet. With batches of 100 pages, a word has about a
hundred rows in a crawl of a million pages. Merges run after a batch is stored, each
in a transaction of its own, under a named lock (one per database) that one worker of
a cluster holds at a time.

A query reads its terms' rows, drops the dead postings, and ranks by the same Okapi
BM25 with Lucene's always-positive IDF that :mod:`topicspider.search.fts5` gives on
SQLite.
"""

from __future__ import annotations

import math
import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from topicspider.search.terms import IndexTerms
from topicspider.storage import chunks
from topicspider.storage.dialect import MYSQL

# Okapi BM25's usual constants: term frequency saturation and length normalisation
# (FTS5's bm25() has the same).
BM25_K1 = 1.2
BM25_B = 0.75
# Big-endian, so that schema 7's migration can build the same records in SQL (HEX).
POSTING = struct.Struct(">QIII")  # page id, batch, weighted count, page length: 20 bytes
POSTING_HEAD, POSTING_TAIL = struct.Struct(">QI"), struct.Struct(">I")  # its page id and batch; its page length
# Segments of one tier merged at once, and the highest tier merged: a merge of ten
# tier-3 segments (1,000 to 9,999 pages) holds under 100,000 pages, so a term's blob
# stays under 2 MB, well within max_allowed_packet's 16 MB default.
MERGE_FACTOR = 10
MAX_MERGED_TIER = 3
# GROUP_CONCAT cuts its result at this many bytes, with a warning only: far above any
# merged blob, and checked after every merge.
GROUP_CONCAT_MAX_LEN = 2**32 - 1
# A named lock is the server's, not the database's: each database merges under its own
# (a lock's name is at most 64 characters, a database's too).
MERGE_LOCK = "CONCAT('topicspider_search_merge_', MD5(DATABASE()))"
GROUP_CONCAT_CUT = 1260  # ER_CUT_VALUE_GROUP_CONCAT
# Page ids per segment converted from schema 3's postings: a conversion statement
# reads at most this many pages' postings.
CONVERTED_IDS = 10_000
# What a deleted segment leaves: each table and the column naming the segment.
SEGMENT_COLUMNS = (("search_segments", "segment"), ("search_dead", "segment"), ("search_segment_info", "id"))


def tier_of(pages: int) -> int:
    """A segment's tier: the order of magnitude of its page count."""
    return int(math.log10(pages)) if pages > 0 else 0


def _counts(terms: IndexTerms) -> Mapping[str, int]:
    if isinstance(terms, str):  # a page's terms are counted for this index (pages_terms)
        raise TypeError("the segments' index takes a page's term counts, not its FTS5 text")
    return terms


def segment_postings(pages: Mapping[int, Mapping[str, int]], segment: int) -> dict[str, bytes]:
    """Each term's :data:`POSTING` records in ``segment``, one per page of ``pages``
    (page id -> term -> count) that holds it."""
    grouped: defaultdict[str, list[bytes]] = defaultdict(list)
    for page_id, counts in pages.items():
        head, tail = POSTING_HEAD.pack(page_id, segment), POSTING_TAIL.pack(sum(counts.values()))
        # A page's records differ only in their count, and most counts are small: each
        # record is made once per page and count (this runs for every term of every page).
        made: dict[int, bytes] = {}
        for term, count in counts.items():
            posting = made.get(count)
            if posting is None:
                posting = made[count] = head + count.to_bytes(4, "big") + tail
            grouped[term].append(posting)
    return {term: b"".join(postings) for term, postings in grouped.items()}


def _insert_rows(cursor: Any, insert: str, rows: Iterable[str]) -> None:
    """``insert`` (``INSERT ... VALUES ``) followed by ``rows`` (SQL literals made by the
    connection's own escaping), in statements of at most the cursor's
    ``max_stmt_length`` bytes (a longer row alone), as pymysql's ``executemany`` sends
    them. Formatted here rather than by ``executemany``: its generic formatting of each
    parameter took more of the storage thread than the server's work
    (``bench/bench_index.py``)."""
    encoding, limit = cursor.connection.encoding, int(cursor.max_stmt_length)
    start = insert.encode(encoding)
    statement = bytearray(start)
    for row in rows:
        value = row.encode(encoding)
        if len(statement) > len(start):
            if len(statement) + len(value) + 1 > limit:
                cursor.execute(statement)
                statement = bytearray(start)
            else:
                statement += b","
        statement += value
    if len(statement) > len(start):
        cursor.execute(statement)


def bm25_part(count: int, length: int, average_length: float) -> float:
    """BM25's term-frequency part for a term counted ``count`` times on a page of ``length`` terms."""
    return count * (BM25_K1 + 1.0) / (count + BM25_K1 * (1.0 - BM25_B + BM25_B * length / average_length))


class SegmentIndex:
    """The search index's operations for :mod:`topicspider.search.index`, on
    MySQL/MariaDB. An instance serves one search: the postings it has read are kept
    for the operations that follow in the same transaction."""

    takes_text = False  # a page's terms as counts

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, tuple[int, int]]] = {}  # term -> page -> (count, length)

    # Writing

    def write(self, cursor: Any, pages: Mapping[int, IndexTerms]) -> None:
        counted = {page_id: _counts(terms) for page_id, terms in pages.items()}
        ids = list(counted)
        self.remove(cursor, ids)
        cursor.execute("INSERT INTO search_segment_info (tier, pages, live) VALUES (%s, %s, %s)",
                       (tier_of(len(ids)), len(ids), len(ids)))
        segment = int(cursor.lastrowid)
        escape = cursor.connection.escape
        _insert_rows(cursor, "INSERT INTO search_segments (term, segment, postings) VALUES ",
                     (f"({escape(term)},{segment},X'{postings.hex()}')"
                      for term, postings in segment_postings(counted, segment).items()))
        cursor.executemany("INSERT INTO search_index_pages (page_id, length, batch, segment) VALUES (%s, %s, %s, %s)",
                           [(page_id, sum(counts.values()), segment, segment) for page_id, counts in counted.items()])

    def remove(self, cursor: Any, ids: list[int]) -> None:
        """Take ``ids`` out of the index: their postings become dead, and a segment
        left with no live page is deleted."""
        emptied: set[int] = set()
        for chunk in chunks(ids):
            marks = MYSQL.marks(len(chunk))
            cursor.execute(f"SELECT page_id, batch, segment FROM search_index_pages WHERE page_id IN ({marks}) "
                           "FOR UPDATE", chunk)
            retired = [(int(batch), int(page_id), int(segment)) for page_id, batch, segment in cursor.fetchall()]
            if not retired:
                continue
            cursor.executemany("INSERT IGNORE INTO search_dead (batch, page_id, segment) VALUES (%s, %s, %s)", retired)
            per_segment: dict[int, int] = {}
            for _, _, segment in retired:
                per_segment[segment] = per_segment.get(segment, 0) + 1
            # In the order of the segments, as any other writer locks them.
            cursor.executemany("UPDATE search_segment_info SET live = live - %s WHERE id = %s",
                               [(count, segment) for segment, count in sorted(per_segment.items())])
            cursor.execute(f"DELETE FROM search_index_pages WHERE page_id IN ({marks})", chunk)
            emptied.update(per_segment)
        if emptied:
            marks = MYSQL.marks(len(emptied))
            cursor.execute(f"SELECT id FROM search_segment_info WHERE id IN ({marks}) AND live = 0", list(emptied))
            _delete_segments(cursor, [int(row[0]) for row in cursor.fetchall()])

    @staticmethod
    def merge(cursor: Any) -> int:
        """Merge segments while a tier up to :func:`highest_merged_tier` holds
        :data:`MERGE_FACTOR` of them; the number of merges. Each merge is a transaction
        of its own on the cursor's connection, committed before the next one and before
        the merge lock is released (the transaction open on entry is committed first).
        Skipped while another connection merges."""
        connection = cursor.connection
        connection.commit()
        highest = highest_merged_tier(cursor)
        if _full_tier(cursor, highest) is None:  # most batches: one look, no lock
            return 0
        cursor.execute(f"SELECT GET_LOCK({MERGE_LOCK}, 0)")
        if (cursor.fetchone() or (0,))[0] != 1:
            return 0
        merges = 0
        try:
            cursor.execute("SET SESSION group_concat_max_len = %s", (GROUP_CONCAT_MAX_LEN,))
            isolation = _merge_isolation(cursor)
            connection.commit()
            while True:
                # Without gap locks, the batches other workers store meanwhile do not
                # wait for a merge (for the next transaction only).
                cursor.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                tier = _full_tier(cursor, highest)
                if tier is None or not _merge_tier(cursor, tier):
                    break
                connection.commit()
                merges += 1
        finally:
            connection.rollback()  # what a merge began and did not finish
            cursor.execute(f"SELECT RELEASE_LOCK({MERGE_LOCK})")
            cursor.fetchall()
        return merges

    # Reading

    @staticmethod
    def unindexed(cursor: Any, limit: int) -> list[tuple[int, str, str]]:
        cursor.execute("SELECT id, title, text FROM pages WHERE id NOT IN (SELECT page_id FROM search_index_pages) "
                       "ORDER BY id LIMIT %s", (limit,))
        return [(int(page_id), title, text) for page_id, title, text in cursor.fetchall()]

    @staticmethod
    def indexed(cursor: Any, ids: list[int]) -> set[int]:
        found: set[int] = set()
        for chunk in chunks(ids):
            # Locked, so that a crawl indexing one of them now waits for this transaction.
            cursor.execute(f"SELECT page_id FROM search_index_pages WHERE page_id IN ({MYSQL.marks(len(chunk))})"
                           " FOR UPDATE", chunk)
            found.update(int(row[0]) for row in cursor.fetchall())
        return found

    @staticmethod
    def documents(cursor: Any) -> int:
        cursor.execute("SELECT COUNT(*) FROM search_index_pages")
        return int(cursor.fetchone()[0])

    def document_frequencies(self, cursor: Any, terms: list[str]) -> dict[str, int]:
        postings = self._read(cursor, terms)
        return {term: len(postings[term]) for term in terms if postings.get(term)}

    def matching(self, cursor: Any, terms: list[str]) -> int:
        postings = self._read(cursor, terms)
        return len(set().union(*(postings.get(term, {}) for term in terms)))

    def rank(self, cursor: Any, weights: Mapping[str, float], frequencies: Mapping[str, int], documents: int,
             limit: int, offset: int) -> list[tuple[int, float]]:
        """The pages holding any of the terms, best first: Σ ``weights[term]`` × BM25's
        term-frequency part."""
        postings = self._read(cursor, list(weights))
        cursor.execute("SELECT SUM(length) FROM search_index_pages")
        # The mean length as FTS5 takes it (terms / pages), unless 0: then no page has a posting.
        average_length = float(cursor.fetchone()[0] or 0) / max(documents, 1) or 1.0
        scores: dict[int, float] = {}
        for term, weight in weights.items():
            for page_id, (count, length) in postings.get(term, {}).items():
                scores[page_id] = scores.get(page_id, 0.0) + weight * bm25_part(count, length, average_length)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return ranked[offset:offset + limit]

    def _read(self, cursor: Any, terms: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
        """The live postings of ``terms`` (those read before kept)."""
        wanted = [term for term in dict.fromkeys(terms) if term not in self._postings]
        if wanted:
            cursor.execute(f"SELECT term, segment, postings FROM search_segments WHERE term IN "
                           f"({MYSQL.marks(len(wanted))})", wanted)
            rows = cursor.fetchall()
            dead = _dead(cursor, sorted({int(segment) for _, segment, _ in rows}))
            for term in wanted:
                self._postings[term] = {}
            for term, _, blob in rows:
                live = self._postings[term]
                for page_id, batch, count, length in POSTING.iter_unpack(blob):
                    if (batch, page_id) not in dead:
                        live[page_id] = (count, length)
        return self._postings


def _dead(cursor: Any, segments: list[int]) -> set[tuple[int, int]]:
    dead: set[tuple[int, int]] = set()
    for chunk in chunks(segments):
        cursor.execute(f"SELECT batch, page_id FROM search_dead WHERE segment IN ({MYSQL.marks(len(chunk))})",
                       chunk)
        dead.update((int(batch), int(page_id)) for batch, page_id in cursor.fetchall())
    return dead


def highest_merged_tier(cursor: Any) -> int:
    """:func:`tier_within_packet` of the server's ``max_allowed_packet``."""
    cursor.execute("SELECT @@max_allowed_packet")
    return tier_within_packet(int(cursor.fetchone()[0]))


def tier_within_packet(packet: int) -> int:
    """:data:`MAX_MERGED_TIER`, or lower where a ``packet`` of so many bytes is too
    small for its blobs: ten segments of tier t hold under 10^(t + 2) pages, and a
    merged blob is to take at most half a packet (-1: none merged)."""
    tier = MAX_MERGED_TIER
    while tier >= 0 and POSTING.size * 10 ** (tier + 2) > packet // 2:
        tier -= 1
    return tier


def _merge_isolation(cursor: Any) -> str:
    """READ COMMITTED, unless the server logs statements (a binary log in STATEMENT
    format refuses InnoDB writes under it, error 1665)."""
    cursor.execute("SELECT @@log_bin, @@binlog_format")
    log_bin, binlog_format = cursor.fetchone()
    return "REPEATABLE READ" if int(log_bin) and str(binlog_format).upper() == "STATEMENT" else "READ COMMITTED"


def _full_tier(cursor: Any, highest: int) -> int | None:
    cursor.execute("SELECT tier FROM search_segment_info WHERE tier <= %s GROUP BY tier HAVING COUNT(*) >= %s "
                   "ORDER BY tier LIMIT 1", (highest, MERGE_FACTOR))
    row = cursor.fetchone()
    return None if row is None else int(row[0])


def _merge_tier(cursor: Any, tier: int) -> bool:
    """The oldest :data:`MERGE_FACTOR` segments of ``tier`` into one: their postings,
    dead ones included, concatenated term by term. False (nothing done) when a writer
    emptied one of them meanwhile."""
    cursor.execute("SELECT id FROM search_segment_info WHERE tier = %s ORDER BY id LIMIT %s", (tier, MERGE_FACTOR))
    merged = [int(segment) for (segment,) in cursor.fetchall()]
    if len(merged) < MERGE_FACTOR:
        return False
    marks = MYSQL.marks(len(merged))
    # The pages' index rows first, then the segments': the order in which a writer
    # storing a page again locks them.
    cursor.execute(f"SELECT COUNT(*) FROM search_index_pages WHERE segment IN ({marks}) FOR UPDATE", merged)
    cursor.fetchall()  # the rows are locked, not sent
    cursor.execute(f"SELECT pages, live FROM search_segment_info WHERE id IN ({marks}) AND tier = %s FOR UPDATE",
                   [*merged, tier])
    rows = cursor.fetchall()
    if len(rows) < MERGE_FACTOR:
        return False
    pages, live = sum(int(row[0]) for row in rows), sum(int(row[1]) for row in rows)
    cursor.execute("INSERT INTO search_segment_info (tier, pages, live) VALUES (%s, %s, %s)",
                   (max(tier_of(pages), tier + 1), pages, live))
    segment = int(cursor.lastrowid)
    # In any order: a posting names its page and batch.
    cursor.execute(f"INSERT INTO search_segments (term, segment, postings) SELECT term, %s, "
                   f"GROUP_CONCAT(postings SEPARATOR '') FROM search_segments "
                   f"WHERE segment IN ({marks}) GROUP BY term", [segment, *merged])
    check_not_cut(cursor, "a merge of search segments")
    cursor.execute(f"UPDATE search_index_pages SET segment = %s WHERE segment IN ({marks})", [segment, *merged])
    cursor.execute(f"UPDATE search_dead SET segment = %s WHERE segment IN ({marks})", [segment, *merged])
    _delete_segments(cursor, merged)
    return True


def check_not_cut(cursor: Any, what: str) -> None:
    """Raise :class:`ValueError` when the statement just run had a GROUP_CONCAT cut
    short (at ``group_concat_max_len`` or ``max_allowed_packet``): an error in strict
    mode, only a warning otherwise. The caller's transaction is then rolled back."""
    cursor.execute("SHOW WARNINGS")
    if cut := [message for _, code, message in cursor.fetchall() if int(code) == GROUP_CONCAT_CUT]:
        raise ValueError(f"{what} was cut short: {cut[0]}")


def _delete_segments(cursor: Any, segments: list[int]) -> None:
    """Delete ``segments`` whole: their postings (all dead, or merged elsewhere), dead marks and sizes."""
    for chunk in chunks(segments):
        marks = MYSQL.marks(len(chunk))
        for table, column in SEGMENT_COLUMNS:
            cursor.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)


def order_by_segment(connection: Any) -> None:
    """Schema 8's migration: ``search_segments`` ordered by segment, then term (schema 7
    ordered it by term). InnoDB keeps a table in its primary key's order: by term, a
    segment's rows lay all over the table, so that a batch wrote all over it and a merge
    read all of it, which cost more as the index outgrew the server's buffer pool. A
    query's terms are found by their own key. Done already: nothing to do."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() "
                       "AND table_name = 'search_segments' AND index_name = 'PRIMARY' ORDER BY seq_in_index")
        if [str(name).lower() for (name,) in cursor.fetchall()] == ["segment", "term"]:
            return
        cursor.execute("ALTER TABLE search_segments DROP PRIMARY KEY, ADD PRIMARY KEY (segment, term), "
                       "DROP KEY search_segments_by_segment, ADD KEY search_segments_by_term (term)")


def convert_postings(connection: Any) -> None:
    """Schema 7's migration: schema 3's plain tables of postings into segments, one
    per :data:`CONVERTED_IDS` page ids, each committed on its own, so that a migration
    cut short goes on where it stopped; no page is cut again. Nothing to do once they
    are dropped."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.tables "
                       "WHERE table_schema = DATABASE() AND table_name = 'search_docs'")
        if not int(cursor.fetchone()[0]):
            return
        cursor.execute("SET SESSION group_concat_max_len = %s", (GROUP_CONCAT_MAX_LEN,))
        cursor.execute("SELECT DISTINCT page_id DIV %s FROM search_docs", (CONVERTED_IDS,))
        ranges = sorted(int(part) for (part,) in cursor.fetchall())
        cursor.execute("SELECT id FROM search_segment_info")
        done = {int(segment) for (segment,) in cursor.fetchall()}
        connection.commit()
        for part in ranges:
            if part + 1 not in done:  # a segment's id is its range's number plus one
                _convert_range(cursor, part)
                connection.commit()


def _convert_range(cursor: Any, part: int) -> None:
    segment, low, high = part + 1, part * CONVERTED_IDS, (part + 1) * CONVERTED_IDS
    cursor.execute("INSERT INTO search_segment_info (id, tier, pages, live) "
                   "SELECT %s, FLOOR(LOG10(COUNT(*))), COUNT(*), COUNT(*) FROM search_docs "
                   "WHERE page_id >= %s AND page_id < %s", (segment, low, high))
    cursor.execute("INSERT INTO search_index_pages (page_id, length, batch, segment) "
                   "SELECT page_id, length, %s, %s FROM search_docs WHERE page_id >= %s AND page_id < %s",
                   (segment, segment, low, high))
    # Each posting as POSTING packs it (page id, batch, count, length, big-endian), in hex.
    cursor.execute("INSERT INTO search_segments (term, segment, postings) "
                   "SELECT p.term, %s, UNHEX(GROUP_CONCAT(CONCAT(LPAD(HEX(p.page_id), 16, '0'), LPAD(HEX(%s), 8, '0'), "
                   "LPAD(HEX(p.tf), 8, '0'), LPAD(HEX(d.length), 8, '0')) SEPARATOR '')) "
                   "FROM search_postings p JOIN search_docs d ON d.page_id = p.page_id "
                   "WHERE p.page_id >= %s AND p.page_id < %s GROUP BY p.term", (segment, segment, low, high))
    check_not_cut(cursor, f"converting the search index's pages {low} to {high - 1}")

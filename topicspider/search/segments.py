"""MySQL/MariaDB's search index: postings kept in segments, as Lucene keeps them.

Each batch of pages the storage pipeline writes becomes one new segment: a row per
distinct term of the batch, its pages packed in a blob, where a table of plain postings
wrote a row per term per page (``bench/bench_index.py``: 2.5 times as fast). Tables
(MySQL schema 7, :mod:`topicspider.storage.mysql`):

* ``search_segments (term, segment, postings)``: :data:`POSTING` records, one per page
  of the segment holding the term: the page id, the batch that wrote it, the term's
  weighted count and the page's number of index terms (BM25's length);
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
:data:`MAX_MERGED_TIER`, so a term has a few dozen rows at most in a crawl of a million
pages, each blob within the server's ``max_allowed_packet``. A merge runs in a
transaction of its own after a batch is stored, under a named lock (one per database)
that one worker of a cluster holds at a time.

A query reads its terms' rows, drops the dead postings, and ranks by the same Okapi
BM25 with Lucene's always-positive IDF that :mod:`topicspider.search.fts5` gives on
SQLite.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from topicspider.storage import chunks

# Okapi BM25's usual constants: term frequency saturation and length normalisation
# (FTS5's bm25() has the same).
BM25_K1 = 1.2
BM25_B = 0.75
# Big-endian, so that schema 7's migration can build the same records in SQL (HEX).
POSTING = struct.Struct(">QIII")  # page id, batch, weighted count, page length: 20 bytes
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
# What a deleted segment leaves: each table and the column naming the segment.
SEGMENT_COLUMNS = (("search_segments", "segment"), ("search_dead", "segment"), ("search_segment_info", "id"))


def tier_of(pages: int) -> int:
    """A segment's tier: the order of magnitude of its page count."""
    return int(math.log10(pages)) if pages > 0 else 0


def bm25_part(count: int, length: int, average_length: float) -> float:
    """BM25's term-frequency part for a term counted ``count`` times on a page of ``length`` terms."""
    return count * (BM25_K1 + 1.0) / (count + BM25_K1 * (1.0 - BM25_B + BM25_B * length / average_length))


class SegmentIndex:
    """The search index's operations for :mod:`topicspider.search.index`, on
    MySQL/MariaDB. An instance serves one search: the postings it has read are kept
    for the operations that follow in the same transaction."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, tuple[int, int]]] = {}  # term -> page -> (count, length)

    # Writing

    def write(self, cursor: Any, pages: Mapping[int, Mapping[str, int]]) -> None:
        ids = list(pages)
        self.remove(cursor, ids)
        cursor.execute("INSERT INTO search_segment_info (tier, pages, live) VALUES (%s, %s, %s)",
                       (tier_of(len(ids)), len(ids), len(ids)))
        segment = int(cursor.lastrowid)
        grouped: dict[str, list[bytes]] = {}
        pack = POSTING.pack
        for page_id, counts in pages.items():
            length = sum(counts.values())
            for term, count in counts.items():
                grouped.setdefault(term, []).append(pack(page_id, segment, count, length))
        cursor.executemany("INSERT INTO search_segments (term, segment, postings) VALUES (%s, %s, %s)",
                           [(term, segment, b"".join(postings)) for term, postings in grouped.items()])
        cursor.executemany("INSERT INTO search_index_pages (page_id, length, batch, segment) VALUES (%s, %s, %s, %s)",
                           [(page_id, sum(counts.values()), segment, segment) for page_id, counts in pages.items()])

    def remove(self, cursor: Any, ids: list[int]) -> None:
        """Take ``ids`` out of the index: their postings become dead, and a segment
        left with no live page is deleted."""
        emptied: set[int] = set()
        for chunk in chunks(ids):
            marks = ",".join(["%s"] * len(chunk))
            cursor.execute(f"SELECT page_id, batch, segment FROM search_index_pages WHERE page_id IN ({marks}) "
                           "FOR UPDATE", chunk)
            retired = [(int(batch), int(page_id), int(segment)) for page_id, batch, segment in cursor.fetchall()]
            if not retired:
                continue
            cursor.executemany("INSERT IGNORE INTO search_dead (batch, page_id, segment) VALUES (%s, %s, %s)", retired)
            per_segment: dict[int, int] = {}
            for _, _, segment in retired:
                per_segment[segment] = per_segment.get(segment, 0) + 1
            cursor.executemany("UPDATE search_segment_info SET live = live - %s WHERE id = %s",
                               [(count, segment) for segment, count in per_segment.items()])
            cursor.execute(f"DELETE FROM search_index_pages WHERE page_id IN ({marks})", chunk)
            emptied.update(per_segment)
        if emptied:
            marks = ",".join(["%s"] * len(emptied))
            cursor.execute(f"SELECT id FROM search_segment_info WHERE id IN ({marks}) AND live = 0", list(emptied))
            _delete_segments(cursor, [int(row[0]) for row in cursor.fetchall()])

    @staticmethod
    def merge(cursor: Any) -> int:
        """Merge segments while a tier up to :data:`MAX_MERGED_TIER` holds
        :data:`MERGE_FACTOR` of them; the number of merges. Skipped while another
        connection merges."""
        if _full_tier(cursor) is None:  # most batches: one look, no lock
            return 0
        cursor.execute(f"SELECT GET_LOCK({MERGE_LOCK}, 0)")
        if (cursor.fetchone() or (0,))[0] != 1:
            return 0
        merges = 0
        try:
            cursor.execute("SET SESSION group_concat_max_len = %s", (GROUP_CONCAT_MAX_LEN,))
            while (tier := _full_tier(cursor)) is not None:
                _merge_tier(cursor, tier)
                merges += 1
        finally:
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
            cursor.execute(f"SELECT page_id FROM search_index_pages WHERE page_id IN ({','.join(['%s'] * len(chunk))})"
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
                           f"({','.join(['%s'] * len(wanted))})", wanted)
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
        cursor.execute(f"SELECT batch, page_id FROM search_dead WHERE segment IN ({','.join(['%s'] * len(chunk))})",
                       chunk)
        dead.update((int(batch), int(page_id)) for batch, page_id in cursor.fetchall())
    return dead


def _full_tier(cursor: Any) -> int | None:
    cursor.execute("SELECT tier FROM search_segment_info WHERE tier <= %s GROUP BY tier HAVING COUNT(*) >= %s "
                   "ORDER BY tier LIMIT 1", (MAX_MERGED_TIER, MERGE_FACTOR))
    row = cursor.fetchone()
    return None if row is None else int(row[0])


def _merge_tier(cursor: Any, tier: int) -> None:
    """The oldest :data:`MERGE_FACTOR` segments of ``tier`` into one: their postings,
    dead ones included, concatenated term by term."""
    cursor.execute("SELECT id, pages, live FROM search_segment_info WHERE tier = %s ORDER BY id LIMIT %s FOR UPDATE",
                   (tier, MERGE_FACTOR))
    rows = cursor.fetchall()
    merged = [int(segment) for segment, _, _ in rows]
    pages, live = sum(int(row[1]) for row in rows), sum(int(row[2]) for row in rows)
    cursor.execute("INSERT INTO search_segment_info (tier, pages, live) VALUES (%s, %s, %s)",
                   (max(tier_of(pages), tier + 1), pages, live))
    segment = int(cursor.lastrowid)
    marks = ",".join(["%s"] * len(merged))
    # In any order: a posting names its page and batch.
    cursor.execute(f"INSERT INTO search_segments (term, segment, postings) SELECT term, %s, "
                   f"GROUP_CONCAT(postings SEPARATOR '') FROM search_segments "
                   f"WHERE segment IN ({marks}) GROUP BY term", [segment, *merged])
    # A blob GROUP_CONCAT cut is an error in strict mode, a warning otherwise: either
    # way the caller's transaction is rolled back.
    cursor.execute("SHOW WARNINGS")
    if cut := [message for _, code, message in cursor.fetchall() if int(code) == GROUP_CONCAT_CUT]:
        raise ValueError(f"a merge of search segments was cut short: {cut[0]}")
    cursor.execute(f"UPDATE search_index_pages SET segment = %s WHERE segment IN ({marks})", [segment, *merged])
    cursor.execute(f"UPDATE search_dead SET segment = %s WHERE segment IN ({marks})", [segment, *merged])
    _delete_segments(cursor, merged)


def _delete_segments(cursor: Any, segments: list[int]) -> None:
    """Delete ``segments`` whole: their postings (all dead, or merged elsewhere), dead marks and sizes."""
    for chunk in chunks(segments):
        marks = ",".join(["%s"] * len(chunk))
        for table, column in SEGMENT_COLUMNS:
            cursor.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)

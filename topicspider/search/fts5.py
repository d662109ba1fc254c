"""SQLite's search index: an FTS5 table over the pages' pre-segmented index terms.

FTS5 has no Chinese word segmenter, so it is given words, not text: each page's index
terms (:func:`topicspider.search.terms.document_terms`, jieba's search mode) as one
string, every term repeated its weighted count and separated by spaces
(:func:`topicspider.search.terms.document_text`, built in the page-analysis process
during a crawl). FTS5's ``ascii`` tokenizer then splits on spaces only, since every
ASCII character that is not a letter or digit is first moved into Unicode's private use
area (:func:`fts_token`): ``c++`` and ``utf-8`` stay whole terms, and a term can never
be an FTS5 query operator. The postings, their compression and BM25 are FTS5's, in C:
writing a page is one row, where the plain-table index wrote one row per distinct term.

Ranking keeps the index's BM25 with Lucene's always-positive IDF (FTS5's own ``bm25()``
weighs a term found on more than half the pages at 1e-6): each query term is ranked
alone by ``bm25()``, whose IDF is FTS5's, and weighted by the ratio of the two IDFs,
so the sum over the terms is the score :mod:`topicspider.search.segments` computes.

Tables (SQLite schema 5, :mod:`topicspider.storage.sqlite`): ``search_fts`` (rowid: the
page id) and ``search_vocab``, its ``fts5vocab`` row view (term -> pages holding it). A
trigger takes a deleted page out of the index, as the plain tables' foreign keys did.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import Any

from topicspider.search.terms import IndexTerms, document_text, fts_token
from topicspider.storage import chunks
from topicspider.storage.dialect import SQLITE

# detail=full (FTS5's default) although no phrase query needs the terms' positions:
# without them, bm25() tokenizes every matching page again to count its terms (a word
# on 3000 pages of 3000 characters: 52 ms a query, against 3 ms), for a tenth less space
# and no faster writes.
SCHEMA = """
CREATE VIRTUAL TABLE search_fts USING fts5(terms, tokenize = 'ascii');
CREATE VIRTUAL TABLE search_vocab USING fts5vocab(search_fts, row);
CREATE TRIGGER pages_leave_search_index AFTER DELETE ON pages BEGIN
    DELETE FROM search_fts WHERE rowid = old.id;
END;
"""

# Where FTS5's bm25() puts a term's IDF when the usual form is not positive.
FTS5_IDF_FLOOR = 1e-6
def fts5_idf(documents: int, frequency: int) -> float:
    """The IDF FTS5's ``bm25()`` gives a term on ``frequency`` of ``documents`` pages."""
    value = math.log((documents - frequency + 0.5) / (frequency + 0.5))
    return value if value > 0 else FTS5_IDF_FLOOR


def _query_string(term: str) -> str:
    return '"' + fts_token(term) + '"'  # a quoted string: one token, never an operator


class Fts5Index:
    """The search index's operations for :mod:`topicspider.search.index`, on SQLite."""

    takes_text = True  # a page's terms as document_text, which the page analysis builds

    @staticmethod
    def write(cursor: Any, pages: Mapping[int, IndexTerms]) -> None:
        Fts5Index.remove(cursor, list(pages))
        cursor.executemany("INSERT INTO search_fts (rowid, terms) VALUES (?, ?)",
                           [(page_id, terms if isinstance(terms, str) else document_text(terms))
                            for page_id, terms in pages.items()])

    @staticmethod
    def remove(cursor: Any, ids: list[int]) -> None:
        for chunk in chunks(ids):
            cursor.execute(f"DELETE FROM search_fts WHERE rowid IN ({SQLITE.marks(len(chunk))})", chunk)

    @staticmethod
    def merge(cursor: Any) -> int:
        return 0  # FTS5 merges its b-trees itself as it writes (its automerge)

    @staticmethod
    def unindexed(cursor: Any, limit: int) -> list[tuple[int, str, str]]:
        cursor.execute("SELECT id, title, text FROM pages WHERE NOT EXISTS "
                       "(SELECT 1 FROM search_fts_docsize d WHERE d.id = pages.id) ORDER BY id LIMIT ?", (limit,))
        return [(int(page_id), title, text) for page_id, title, text in cursor.fetchall()]

    @staticmethod
    def indexed(cursor: Any, ids: list[int]) -> set[int]:
        found: set[int] = set()
        for chunk in chunks(ids):
            cursor.execute(f"SELECT id FROM search_fts_docsize WHERE id IN ({SQLITE.marks(len(chunk))})", chunk)
            found.update(int(row[0]) for row in cursor.fetchall())
        return found

    @staticmethod
    def documents(cursor: Any) -> int:
        # The shadow table of the pages' lengths, a row a page: COUNT(*) of search_fts
        # itself reads every page's terms (52 ms at 30,000 pages, against 0.04 ms).
        cursor.execute("SELECT COUNT(*) FROM search_fts_docsize")
        return int(cursor.fetchone()[0])

    @staticmethod
    def document_frequencies(cursor: Any, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        tokens = {fts_token(term): term for term in terms}
        cursor.execute(f"SELECT term, doc FROM search_vocab WHERE term IN ({SQLITE.marks(len(tokens))})",
                       list(tokens))
        return {tokens[token]: int(count) for token, count in cursor.fetchall()}

    @staticmethod
    def matching(cursor: Any, terms: list[str]) -> int:
        cursor.execute("SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?",
                       (" OR ".join(map(_query_string, terms)),))
        return int(cursor.fetchone()[0])

    @staticmethod
    def rank(cursor: Any, weights: Mapping[str, float], frequencies: Mapping[str, int], documents: int,
             limit: int, offset: int) -> list[tuple[int, float]]:
        """The pages holding any of the terms, best first: Σ ``weights[term]`` × BM25's
        term-frequency part, which FTS5's ``bm25()`` gives times its own IDF."""
        parts, parameters = [], []
        for term, weight in weights.items():
            parts.append("SELECT rowid AS page_id, ? * bm25(search_fts) AS part FROM search_fts "
                         "WHERE search_fts MATCH ?")
            parameters += [-weight / fts5_idf(documents, frequencies[term]), _query_string(term)]
        # MATERIALIZED: flattened into the outer query, bm25() would lose its FTS5 context.
        cursor.execute(f"WITH parts AS MATERIALIZED ({' UNION ALL '.join(parts)}) "
                       "SELECT page_id, SUM(part) AS score FROM parts "
                       "GROUP BY page_id ORDER BY score DESC, page_id LIMIT ? OFFSET ?", [*parameters, limit, offset])
        return [(int(page_id), float(score)) for page_id, score in cursor.fetchall()]


def convert_postings(connection: sqlite3.Connection) -> None:
    """Schema 5's migration: the plain tables' postings into ``search_fts``, inside the
    caller's transaction; no page is segmented again."""
    # From search_docs: a page indexed with no terms (an empty page) is a row of the
    # index too, counted in the number of pages and the mean length that BM25 uses.
    rows: Iterable[tuple[int, str | None, int | None]] = connection.execute(
        "SELECT d.page_id, p.term, p.tf FROM search_docs d LEFT JOIN search_postings p ON p.page_id = d.page_id "
        "ORDER BY d.page_id")
    for page_id, postings in groupby(rows, key=lambda row: row[0]):
        counts = {term: tf for _, term, tf in postings if term is not None and tf is not None}
        connection.execute("INSERT INTO search_fts (rowid, terms) VALUES (?, ?)", (page_id, document_text(counts)))

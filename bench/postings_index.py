"""The search index as topicspider kept it in plain tables of postings, on SQLite until
schema 5 and on MySQL/MariaDB until schema 7; ``bench_index.py`` measures it against
FTS5 and the segments that replaced it (and the tests build old databases from the same
tables' schema):

* ``search_docs (page_id, length)``: every indexed page and its number of index terms;
* ``search_postings (term, page_id, tf)``: each term of each page with its weighted count,
  keyed by (term, page), so a look-up reads one index range per query term.

InnoDB's own ``FULLTEXT`` will not do: it drops words shorter than
``innodb_ft_min_token_size`` (3 by default), so a two-character Chinese word such as 新闻
would never be found, and its ngram parser splits text into character pairs instead of
words. BM25 is computed by the server over the query terms' postings only, with their
IDF as parameters (the same score :mod:`topicspider.search.fts5` gives on SQLite).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topicspider.search.segments import BM25_B, BM25_K1
from topicspider.storage import chunks
from topicspider.storage.dialect import MYSQL, Dialect

# Rows per INSERT batch of postings.
POSTINGS_CHUNK = 5000


class PostingsIndex:
    """The search index's operations for :mod:`topicspider.search.index`, in plain tables
    of postings (the SQL is plain enough for both backends)."""

    def __init__(self, dialect: Dialect = MYSQL) -> None:
        self.dialect = dialect

    def _sql(self, statement: str) -> str:
        return self.dialect.sql(statement)

    def write(self, cursor: Any, pages: Mapping[int, Mapping[str, int]]) -> None:
        self.remove(cursor, list(pages))
        docs = [(page_id, sum(counts.values())) for page_id, counts in pages.items()]
        postings = [(term, page_id, count) for page_id, counts in pages.items() for term, count in counts.items()]
        cursor.executemany(self._sql("REPLACE INTO search_docs (page_id, length) VALUES (?, ?)"), docs)
        for start in range(0, len(postings), POSTINGS_CHUNK):
            cursor.executemany(self._sql("INSERT INTO search_postings (term, page_id, tf) VALUES (?, ?, ?)"),
                               postings[start:start + POSTINGS_CHUNK])

    def remove(self, cursor: Any, ids: list[int]) -> None:
        for chunk in chunks(ids):
            for table in ("search_postings", "search_docs"):
                cursor.execute(self._sql(f"DELETE FROM {table} WHERE page_id IN ({self.dialect.marks(len(chunk))})"), chunk)

    def unindexed(self, cursor: Any, limit: int) -> list[tuple[int, str, str]]:
        cursor.execute(self._sql(
            "SELECT id, title, text FROM pages WHERE id NOT IN (SELECT page_id FROM search_docs) ORDER BY id LIMIT ?"),
            (limit,))
        return [(int(page_id), title, text) for page_id, title, text in cursor.fetchall()]

    def indexed(self, cursor: Any, ids: list[int]) -> set[int]:
        found: set[int] = set()
        for chunk in chunks(ids):
            # MySQL: locked, so that a crawl indexing one of them now waits for this transaction.
            lock = " FOR UPDATE" if self.dialect.name == "mysql" else ""
            cursor.execute(self._sql(f"SELECT page_id FROM search_docs WHERE page_id IN "
                                     f"({self.dialect.marks(len(chunk))}){lock}"), chunk)
            found.update(int(row[0]) for row in cursor.fetchall())
        return found

    def documents(self, cursor: Any) -> int:
        cursor.execute("SELECT COUNT(*) FROM search_docs")
        return int(cursor.fetchone()[0])

    def document_frequencies(self, cursor: Any, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        cursor.execute(self._sql(
            f"SELECT term, COUNT(*) FROM search_postings WHERE term IN ({self.dialect.marks(len(terms))}) GROUP BY term"),
            terms)
        return {term: int(count) for term, count in cursor.fetchall()}

    def matching(self, cursor: Any, terms: list[str]) -> int:
        cursor.execute(self._sql(
            f"SELECT COUNT(DISTINCT page_id) FROM search_postings WHERE term IN ({self.dialect.marks(len(terms))})"), terms)
        return int(cursor.fetchone()[0])

    def rank(self, cursor: Any, weights: Mapping[str, float], frequencies: Mapping[str, int], documents: int,
             limit: int, offset: int) -> list[tuple[int, float]]:
        """The pages holding any of the terms, best first: Σ ``weights[term]`` × BM25's
        term-frequency part."""
        cursor.execute("SELECT SUM(length) FROM search_docs")
        average_length = float(cursor.fetchone()[0] or 0) / max(documents, 1)
        cases: list[Any] = []
        for term, weight in weights.items():
            cases += [term, weight]
        # Every number a float parameter: SQLite divides integers as integers.
        statement = f"""
            SELECT p.page_id,
                   SUM((CASE p.term {" ".join(["WHEN ? THEN ?"] * len(weights))} ELSE 0.0 END) * p.tf * ?
                       / (p.tf + ? * (? + ? * d.length / ?))) AS score
            FROM search_postings p JOIN search_docs d ON d.page_id = p.page_id
            WHERE p.term IN ({self.dialect.marks(len(weights))})
            GROUP BY p.page_id
            ORDER BY score DESC, p.page_id
            LIMIT ? OFFSET ?"""
        # The mean length as FTS5 takes it (terms / pages), unless 0: then no page has a posting.
        parameters = [*cases, BM25_K1 + 1.0, BM25_K1, 1.0 - BM25_B, BM25_B, average_length or 1.0,
                      *weights, limit, offset]
        cursor.execute(self._sql(statement), parameters)
        return [(int(page_id), float(score)) for page_id, score in cursor.fetchall()]

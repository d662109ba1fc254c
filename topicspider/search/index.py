"""The search index's writes and queries, on either storage backend.

Each backend keeps the index its own way, behind the same operations: SQLite in an FTS5
table (:mod:`topicspider.search.fts5`), MySQL/MariaDB in segments of postings, a row
per term per batch of pages (:mod:`topicspider.search.segments`). Both rank by the
same Okapi BM25, with Lucene's always-positive IDF.

Pages are indexed in the transaction that stores them (:func:`update_index`), so the
index grows during a crawl and never disagrees with ``pages``. The functions take a
DB-API cursor and a :class:`Dialect`; every value is a parameter.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from topicspider.items import PageItem
from topicspider.search.fts5 import Fts5Index
from topicspider.search.segments import SegmentIndex
from topicspider.search.snippet import Piece, highlight, snippet
from topicspider.search.terms import IndexTerms, document_terms, query_terms
from topicspider.storage import StorageError, chunks, scheme_of
from topicspider.storage.dialect import SQLITE, Dialect
from topicspider.storage.labels import labels_of

logger = logging.getLogger(__name__)
# Logged where a merge fails: the index is whole without it, and the next batch merges.
MERGE_FAILED = "search index: merging segments failed (tried again after the next batch): %s"


class IndexTables(Protocol):
    """One backend's search index (its tables, written and read in the caller's transaction)."""

    takes_text: bool  # a page's terms as document_text, or as counts

    def write(self, cursor: Any, pages: Mapping[int, IndexTerms]) -> None: ...
    def remove(self, cursor: Any, ids: list[int]) -> None: ...
    def merge(self, cursor: Any) -> int: ...
    def unindexed(self, cursor: Any, limit: int) -> list[tuple[int, str, str]]: ...
    def indexed(self, cursor: Any, ids: list[int]) -> set[int]: ...
    def documents(self, cursor: Any) -> int: ...
    def document_frequencies(self, cursor: Any, terms: list[str]) -> dict[str, int]: ...
    def matching(self, cursor: Any, terms: list[str]) -> int: ...
    def rank(self, cursor: Any, weights: Mapping[str, float], frequencies: Mapping[str, int], documents: int,
             limit: int, offset: int) -> list[tuple[int, float]]: ...


def index_tables(dialect: Dialect) -> IndexTables:
    return Fts5Index() if dialect.name == SQLITE.name else SegmentIndex()


def indexes_text(database_url: str) -> bool:
    """Whether the search index of ``database_url``'s backend takes each page's terms
    as one text (:func:`~topicspider.search.terms.document_text`: SQLite's FTS5), which
    the page analysis then builds, rather than as counts."""
    return scheme_of(database_url) == SQLITE.name


@dataclass
class Hit:
    page_id: int
    url: str
    title: str
    score: float
    relevance: float | None
    fetched_at: str
    title_pieces: list[Piece]
    snippet: list[Piece]
    emails: list[str] = field(default_factory=list)
    relevance_terms: str | None = None  # the terms that weighed most in the topic score
    label: bool | None = None  # relevant or not, as a person labelled it


@dataclass
class Results:
    query: str
    terms: list[str]
    total: int  # pages holding at least one term
    hits: list[Hit]
    offset: int = 0


def pages_terms(pages: Sequence[PageItem], dialect: Dialect) -> list[IndexTerms]:
    """The index terms of each page: those the page analysis worked out, in a form
    ``dialect``'s index takes, else its own title's and text's. Called before the
    writing transaction, which then holds its locks for the writes alone."""
    takes_text = index_tables(dialect).takes_text
    return [page.search_terms
            if page.search_terms is not None and (takes_text or not isinstance(page.search_terms, str))
            else document_terms(page.title, page.text)
            for page in pages]


def index_pages(cursor: Any, dialect: Dialect, pages: Sequence[tuple[int, IndexTerms]]) -> None:
    """(Re)index ``pages``, given as (page id, its :func:`pages_terms`), inside the
    caller's transaction."""
    # A page stored twice in one batch: its last copy. Only counted, non-empty terms, so
    # that both backends index (and measure lengths) alike (document_text keeps them
    # only, too).
    latest = {page_id: terms if isinstance(terms, str) else {term: count for term, count in terms.items()
                                                             if term and count > 0}
              for page_id, terms in pages}
    if latest:
        index_tables(dialect).write(cursor, latest)


def update_index(cursor: Any, dialect: Dialect, ids: list[int], terms: list[IndexTerms] | None) -> None:
    """The index of pages just stored, inside their transaction: ``ids`` and ``terms``
    (their :func:`pages_terms`) in the pages' order; ``terms`` None (``SEARCH_INDEX``
    off) takes them out of it, since an older copy's index would no longer fit."""
    if terms is None:
        unindex_pages(cursor, dialect, ids)
    else:
        index_pages(cursor, dialect, list(zip(ids, terms)))


def unindex_pages(cursor: Any, dialect: Dialect, ids: list[int]) -> None:
    """Take ``ids`` out of the index, inside the caller's transaction: when they are
    stored with ``SEARCH_INDEX`` off (so that :func:`reindex_missing` finds them)."""
    index_tables(dialect).remove(cursor, ids)


def merge_index(cursor: Any, dialect: Dialect) -> int:
    """Merge the index's segments where enough have gathered (MySQL; FTS5 merges its
    own), each merge in a transaction of its own on the cursor's connection, after the
    one open is committed; the number of merges."""
    return index_tables(dialect).merge(cursor)


def unindexed_pages(cursor: Any, dialect: Dialect, limit: int) -> list[tuple[int, str, str]]:
    """Up to ``limit`` stored pages missing from the index (stored before it existed, or
    with ``SEARCH_INDEX`` off)."""
    return index_tables(dialect).unindexed(cursor, limit)


def still_unindexed(cursor: Any, dialect: Dialect, pages: list[tuple[int, Mapping[str, int]]]) -> list[tuple[int, Mapping[str, int]]]:
    """Those of ``pages`` the index still lacks: a crawl may have stored (and indexed)
    one since it was read."""
    indexed = index_tables(dialect).indexed(cursor, [page_id for page_id, _ in pages])
    return [(page_id, terms) for page_id, terms in pages if page_id not in indexed]


def search(cursor: Any, dialect: Dialect, query: str, limit: int = 10, offset: int = 0,
           tables: IndexTables | None = None) -> Results:
    """The pages best matching ``query`` by BM25, ``limit`` from ``offset`` (in the
    backend's own index tables, unless ``tables`` are given)."""
    terms = query_terms(query)
    results = Results(query, terms, 0, [], offset)
    if not terms:
        return results
    tables = tables if tables is not None else index_tables(dialect)
    frequencies = tables.document_frequencies(cursor, terms)
    missing = [term for term in terms if term not in frequencies]
    if missing:
        # A word no page holds as such may still be inside pages' words: 北京大学 is
        # indexed as 北京 and 大学 where a page says 北京大学生.
        terms = [term for term in terms if term in frequencies] + _parts(missing)
        results.terms = terms
        frequencies.update(tables.document_frequencies(cursor, [t for t in terms if t not in frequencies]))
    documents = tables.documents(cursor)
    if not documents or not frequencies:
        return results
    results.total = tables.matching(cursor, list(frequencies))
    weights = {term: idf(documents, frequency) for term, frequency in frequencies.items()}
    ranked = tables.rank(cursor, weights, frequencies, documents, limit, offset)
    results.hits = _hits(cursor, dialect, ranked, terms)
    return results


def _parts(words: list[str]) -> list[str]:
    """The dictionary words inside ``words``, as search mode cuts them."""
    parts: dict[str, None] = {}
    for word in words:
        parts.update((part, None) for part in document_terms("", word) if part != word)
    return list(parts)


def idf(documents: int, frequency: int) -> float:
    """BM25's inverse document frequency, kept positive for terms in most pages (Lucene's form)."""
    return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


def _hits(cursor: Any, dialect: Dialect, ranked: list[tuple[int, float]], terms: list[str]) -> list[Hit]:
    if not ranked:
        return []
    ids = [page_id for page_id, _ in ranked]
    cursor.execute(dialect.sql(
        "SELECT id, url, title, relevance, fetched_at, text, relevance_terms FROM pages "
        f"WHERE id IN ({dialect.marks(len(ids))})"), ids)
    pages = {int(row[0]): row for row in cursor.fetchall()}
    emails = page_emails(cursor, dialect, ids)
    labels = labels_of(cursor, dialect, ids)
    hits = []
    for page_id, score in ranked:
        if page_id not in pages:
            continue  # deleted since it was ranked
        _, url, title, relevance, fetched_at, text, relevance_terms = pages[page_id]
        hits.append(Hit(page_id, url, title, score, relevance, str(fetched_at), highlight(title, terms),
                        snippet(text, terms), emails.get(page_id, []), relevance_terms, labels.get(page_id)))
    return hits


def page_emails(cursor: Any, dialect: Dialect, ids: list[int]) -> dict[int, list[str]]:
    """The e-mail addresses of each of the pages ``ids``."""
    found: dict[int, list[str]] = {}
    for chunk in chunks(ids):
        cursor.execute(dialect.sql(
            f"SELECT page_id, email FROM emails WHERE page_id IN ({dialect.marks(len(chunk))}) ORDER BY email"), chunk)
        for page_id, email in cursor.fetchall():
            found.setdefault(int(page_id), []).append(email)
    return found


def reindex_missing(transaction: Callable[..., Any], batch: int) -> int:
    """Index up to ``batch`` stored pages missing from the index; the number read.
    ``transaction`` is a store's: the pages are read in one transaction, cut outside any,
    and indexed in a second that skips those a crawl has indexed meanwhile, so that a
    crawl writing at the same time waits for no segmentation."""
    pages = transaction(lambda cursor, dialect: unindexed_pages(cursor, dialect, batch))
    terms = [(page_id, document_terms(title, text)) for page_id, title, text in pages]
    transaction(lambda cursor, dialect: index_pages(cursor, dialect, still_unindexed(cursor, dialect, terms)),
                write=True)
    try:
        transaction(merge_index, write=True)
    except StorageError as exc:
        logger.warning(MERGE_FAILED, exc)
    return len(pages)


@dataclass(frozen=True)
class EmailFound:
    email: str
    url: str
    title: str


def emails_found(cursor: Any, dialect: Dialect, contains: str, limit: int, offset: int) -> tuple[int, list[EmailFound]]:
    """E-mail addresses with the pages they were found on, by address; only those
    holding ``contains`` if given. The number of (address, page) pairs, and one page of them."""
    where, parameters = "", []
    if contains:
        # "!" escapes: a backslash means different things in SQLite's and MySQL's literals.
        escaped = contains.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
        where, parameters = "WHERE e.email LIKE ? ESCAPE '!'", [f"%{escaped}%"]
    cursor.execute(dialect.sql(f"SELECT COUNT(*) FROM emails e {where}"), parameters)
    total = int(cursor.fetchone()[0])
    cursor.execute(dialect.sql(f"SELECT e.email, p.url, p.title FROM emails e JOIN pages p ON p.id = e.page_id {where} "
                               "ORDER BY e.email, p.url LIMIT ? OFFSET ?"), [*parameters, limit, offset])
    return total, [EmailFound(email, url, title) for email, url, title in cursor.fetchall()]

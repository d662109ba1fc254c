"""The embedded SQLite backend, the default (``DATABASE_URL=sqlite:///topicspider.db``).

``sqlite:///relative/path.db`` is relative to the working directory and
``sqlite:////absolute/path.db`` is absolute, as in SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union
from urllib.parse import unquote, urlsplit

from topicspider.config import ConfigError
from topicspider.items import PageItem
from topicspider.search.fts5 import SCHEMA as FTS5_SCHEMA
from topicspider.search.fts5 import convert_postings
from topicspider.search.index import pages_terms, update_index
from topicspider.storage import StorageError, chunks, split_aliases
from topicspider.storage.dialect import SQLITE, Dialect
from topicspider.urls import mask_url

T = TypeVar("T")

SCHEMA_VERSION = 5
# Each entry upgrades the schema from version N-1 to N; never edit a released one. A
# step is SQL, or SQL and then a function that moves data over, in the same transaction.
Migration = Union[str, tuple[str, Callable[[sqlite3.Connection], None], str]]
MIGRATIONS: dict[int, Migration] = {
    1: """
    CREATE TABLE pages (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        depth INTEGER NOT NULL,
        http_status INTEGER NOT NULL,
        fetched_at TEXT NOT NULL,
        relevance REAL,
        text TEXT NOT NULL,
        content_type TEXT NOT NULL,
        encoding TEXT NOT NULL,
        content_length INTEGER NOT NULL
    );
    CREATE TABLE emails (
        page_id INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
        email TEXT NOT NULL,
        UNIQUE (page_id, email)
    );
    CREATE INDEX emails_by_email ON emails (email);
    CREATE INDEX pages_by_fetched_at ON pages (fetched_at);
    """,
    # The search index (topicspider.search.index; pages stored before it are indexed
    # by `scrapy search --reindex`), and the crawls' live status and control inbox
    # (topicspider.storage.crawls).
    2: """
    CREATE TABLE search_docs (
        page_id INTEGER PRIMARY KEY REFERENCES pages(id) ON DELETE CASCADE,
        length INTEGER NOT NULL
    );
    CREATE TABLE search_postings (
        term TEXT NOT NULL,
        page_id INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, page_id)
    ) WITHOUT ROWID;
    CREATE INDEX search_postings_by_page ON search_postings (page_id);
    CREATE TABLE crawl_status (
        crawl TEXT NOT NULL,
        worker TEXT NOT NULL,
        state TEXT NOT NULL,
        updated REAL NOT NULL,
        status TEXT NOT NULL,
        PRIMARY KEY (crawl, worker)
    );
    CREATE TABLE crawl_control (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        crawl TEXT NOT NULL,
        action TEXT NOT NULL,
        argument TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX crawl_control_by_crawl ON crawl_control (crawl, id);
    """,
    # The terms that weighed most in a page's topic score, and the relevance labels a
    # person gave stored pages (topicspider.storage.labels).
    3: """
    ALTER TABLE pages ADD COLUMN relevance_terms TEXT;
    CREATE TABLE page_labels (
        page_id INTEGER PRIMARY KEY REFERENCES pages(id) ON DELETE CASCADE,
        relevant INTEGER NOT NULL,
        labelled_at REAL NOT NULL
    );
    """,
    # Duplicate content (topicspider.duplicates): a page whose text an earlier one has is
    # an alias of it, and a page nearly the same as an earlier one says which.
    4: """
    ALTER TABLE pages ADD COLUMN near_duplicate_of TEXT;
    CREATE TABLE page_aliases (
        url TEXT PRIMARY KEY,
        duplicate_of TEXT NOT NULL,
        depth INTEGER NOT NULL,
        http_status INTEGER NOT NULL,
        fetched_at TEXT NOT NULL
    );
    CREATE INDEX page_aliases_by_page ON page_aliases (duplicate_of);
    """,
    # The search index moves into FTS5 (topicspider.search.fts5): its postings are
    # converted as they are, then the plain tables go.
    5: (FTS5_SCHEMA, convert_postings, "DROP TABLE search_postings; DROP TABLE search_docs;"),
}

UPSERT_PAGE = """
INSERT INTO pages (url, title, depth, http_status, fetched_at, relevance, relevance_terms, text,
                   content_type, encoding, content_length, near_duplicate_of)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (url) DO UPDATE SET
    title = excluded.title, depth = MIN(pages.depth, excluded.depth),
    http_status = excluded.http_status, fetched_at = excluded.fetched_at,
    relevance = excluded.relevance, relevance_terms = excluded.relevance_terms, text = excluded.text,
    content_type = excluded.content_type, encoding = excluded.encoding,
    content_length = excluded.content_length, near_duplicate_of = excluded.near_duplicate_of
"""
UPSERT_ALIAS = """
INSERT INTO page_aliases (url, duplicate_of, depth, http_status, fetched_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (url) DO UPDATE SET
    duplicate_of = excluded.duplicate_of, depth = MIN(page_aliases.depth, excluded.depth),
    http_status = excluded.http_status, fetched_at = excluded.fetched_at
"""


def _statements(script: str) -> list[str]:
    """``script``'s statements, one by one (a trigger's body kept whole)."""
    statements, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip("; \n"):
        raise ValueError(f"an incomplete SQL statement: {pending.strip()[:80]!r}")
    return [statement for statement in statements if statement.strip("; \n")]


def sqlite_path(database_url: str) -> str:
    """The file path in ``sqlite:///path``; ``:memory:`` is refused (nothing would be kept)."""
    parts = urlsplit(database_url)
    if parts.netloc:
        raise ConfigError(f"DATABASE_URL {mask_url(database_url)!r}: use sqlite:///path (three slashes)")
    path = unquote(parts.path)[1:]
    if not path or path == ":memory:":
        raise ConfigError(f"DATABASE_URL {mask_url(database_url)!r}: needs a file path, e.g. sqlite:///topicspider.db")
    return path


class SQLiteStore:
    def __init__(self, database_url: str, *, index: bool = True) -> None:
        self.index = index
        path = sqlite_path(database_url)
        if not Path(path).parent.resolve().is_dir():
            raise ConfigError(f"DATABASE_URL {mask_url(database_url)!r}: directory {str(Path(path).parent)!r} does not exist")
        try:
            # The pipeline opens, writes and closes from one thread, but not the one
            # that imported this module. The timeout rides out another writer's lock.
            self.connection = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode = WAL")
            self.connection.execute("PRAGMA synchronous = NORMAL")
            self.connection.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise ConfigError(f"DATABASE_URL {mask_url(database_url)!r}: cannot open: {exc}") from None

    def _migrate(self) -> None:
        current = self._schema_version()
        if current > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {current} is newer than this topicspider ({SCHEMA_VERSION})"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            # The write lock first, then the version again: another process (a crawl, the
            # console, scrapy search) may have upgraded the file while this one waited.
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                if self._schema_version() < version:
                    self._upgrade_to(version)
            except BaseException:
                self._roll_back()
                raise
            self.connection.execute("COMMIT")

    def _roll_back(self) -> None:
        # SQLite may have rolled back already (a full disk, an I/O error): a second
        # ROLLBACK would raise over the error that matters.
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")

    def _schema_version(self) -> int:
        return int(self.connection.execute("PRAGMA user_version").fetchone()[0])

    def _upgrade_to(self, version: int) -> None:
        step = MIGRATIONS[version]
        before, move, after = (step, None, "") if isinstance(step, str) else step
        for statement in _statements(before):
            self.connection.execute(statement)
        if move is not None:
            move(self.connection)
        for statement in _statements(f"{after}; PRAGMA user_version = {version}"):
            self.connection.execute(statement)

    def write_pages(self, pages: Sequence[PageItem]) -> int:
        try:
            return self._write(pages)
        except sqlite3.Error as exc:
            # OperationalError: locked past the timeout, disk I/O; worth another try.
            raise StorageError(str(exc), retryable=isinstance(exc, sqlite3.OperationalError)) from exc
        except (ValueError, TypeError, UnicodeError) as exc:  # a value SQLite cannot take
            raise StorageError(f"{type(exc).__name__}: {exc}") from exc

    def _write(self, items: Sequence[PageItem]) -> int:
        pages, aliases = split_aliases(items)
        terms = pages_terms(pages, SQLITE) if self.index else None
        cursor = self.connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            # A URL is a page or an alias, never both: another crawl may meet copies in another order.
            cursor.executemany("DELETE FROM pages WHERE url = ?", [(a.url,) for a in aliases])
            cursor.executemany("DELETE FROM page_aliases WHERE url = ?", [(p.url,) for p in pages])
            cursor.executemany(UPSERT_ALIAS, [
                (a.url, a.duplicate_of, a.depth, a.http_status, a.fetched_at) for a in aliases])
            cursor.executemany(UPSERT_PAGE, [
                (p.url, p.title, p.depth, p.http_status, p.fetched_at, p.relevance, p.relevance_terms, p.text,
                 p.content_type, p.encoding, p.content_length, p.near_duplicate_of)
                for p in pages
            ])
            ids = self._page_ids(cursor, [p.url for p in pages])
            cursor.executemany("DELETE FROM emails WHERE page_id = ?", [(i,) for i in ids.values()])
            rows = [(ids[p.url], email) for p in pages for email in p.emails]
            cursor.executemany("INSERT OR IGNORE INTO emails (page_id, email) VALUES (?, ?)", rows)
            update_index(cursor, SQLITE, [ids[p.url] for p in pages], terms)
            cursor.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise
        return len(rows)

    @staticmethod
    def _page_ids(cursor: sqlite3.Cursor, urls: list[str]) -> dict[str, int]:
        ids: dict[str, int] = {}
        for chunk in chunks(urls):
            marks = SQLITE.marks(len(chunk))
            ids.update((url, page_id) for page_id, url in cursor.execute(
                f"SELECT id, url FROM pages WHERE url IN ({marks})", chunk))
        return ids

    def transaction(self, work: Callable[[Any, Dialect], T], *, write: bool = False) -> T:
        """``work(cursor, dialect)``'s result, in a transaction of its own (rolled back if
        ``work`` raises)."""
        cursor = self.connection.cursor()
        try:
            # IMMEDIATE takes the write lock first: a read lock upgraded later can fail at once.
            cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = work(cursor, SQLITE)
            except BaseException:
                self._roll_back()
                raise
            cursor.execute("COMMIT")
            return result
        except sqlite3.Error as exc:
            raise StorageError(str(exc), retryable=isinstance(exc, sqlite3.OperationalError)) from exc
        except (ValueError, TypeError, UnicodeError) as exc:  # a value SQLite cannot take
            raise StorageError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self.connection.close()

"""The MySQL/MariaDB backend, through pymysql: ``DATABASE_URL=mysql://user:password@host:port/database``.

The user and password may come from the environment instead (``MYSQL_USER``,
``MYSQL_PASSWORD``), so that they stay out of command lines and process lists; the
password is masked in every message. The schema (utf8mb4, InnoDB) is created when
absent and upgraded when older, under a server-side lock so that several crawlers
starting together migrate once; its version is kept in ``topicspider_schema``:

* ``pages``: the SQLite backend's columns, keyed by ``url_hash``, the 16-byte MD5 of
  the canonical URL (an index cannot hold every URL), the URL itself in ``url``;
* ``emails``: (page, address), indexed by address;
* ``urls``: every URL of a crawl job (``job``, ``fingerprint``) with its state
  (``waiting``, ``running``, ``done``, ``error``), depth, times, last HTTP status and
  error. It is the exact store behind the dupefilter's LRU in MySQL mode
  (:class:`MySQLURLTable`), and :mod:`topicspider.extensions.urlstate` keeps the states.
  ``frontier`` says whether the dupefilter has written the URL (``waiting`` or
  ``finished``; NULL for a row the URL-state log made first). With a ``JOBDIR`` it is
  the durable frontier too: ``request`` holds a waiting URL's request (JSON), and a
  resumed job queues the waiting rows again.

Every statement is parameterised. Each call comes from one thread (the storage
pipeline's, the dupefilter's, the URL-state log's), each with its own connection. A
lost connection raises a retryable :class:`StorageError` and is opened again at the
next call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import pymysql
from pymysql.connections import Connection
from pymysql.cursors import Cursor

from topicspider.config import ConfigError
from topicspider.fingerprint import identity_digest
from topicspider.items import PageItem
from topicspider.search.index import MERGE_FAILED, merge_index, pages_terms, unindex_pages, update_index
from topicspider.search.segments import convert_postings, order_by_segment
from topicspider.storage import StorageError, chunks, split_aliases
from topicspider.storage.dialect import MYSQL, Dialect
from topicspider.storage.seen import SeenURL, URLState
from topicspider.urls import mask_url

T = TypeVar("T")
DEFAULT_PORT = 3306
CONNECT_TIMEOUT = 10  # seconds
IO_TIMEOUT = 120  # seconds: a batch of large pages over a slow link
SCHEMA_LOCK_TIMEOUT = 60  # seconds
# Server and client error codes after which the same statement may succeed later.
RETRYABLE_CODES = frozenset({
    1040,  # too many connections
    2002,  # can't connect through the socket
    1053,  # server shutdown in progress
    1205,  # lock wait timeout
    1213,  # deadlock
    1927,  # connection killed (MariaDB)
    2003,  # can't connect
    2006,  # server has gone away
    2013,  # lost connection during query
    2014,  # commands out of sync (after a lost connection)
    2055,  # lost connection, system error
    4031,  # disconnected by the server for inactivity (MySQL 8)
})

logger = logging.getLogger(__name__)

TABLE_OPTIONS = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
SCHEMA_VERSION = 8
# Each entry upgrades the schema from version N-1 to N; never edit a released one.
MIGRATIONS: dict[int, tuple[str | Callable[[Connection[Cursor]], None], ...]] = {
    1: (
        f"""CREATE TABLE IF NOT EXISTS pages (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            url_hash BINARY(16) NOT NULL,
            url TEXT NOT NULL,
            title VARCHAR(1000) NOT NULL,
            depth INT NOT NULL,
            http_status SMALLINT UNSIGNED NOT NULL,
            fetched_at DATETIME NOT NULL,
            relevance DOUBLE NULL,
            text MEDIUMTEXT NOT NULL,
            content_type VARCHAR(255) NOT NULL,
            encoding VARCHAR(64) NOT NULL,
            content_length INT UNSIGNED NOT NULL,
            UNIQUE KEY pages_by_url_hash (url_hash),
            KEY pages_by_fetched_at (fetched_at)
        ) {TABLE_OPTIONS}""",
        # Binary collation: addresses are lower-cased already, and two that differ
        # must not collide as "equal" under a language collation.
        f"""CREATE TABLE IF NOT EXISTS emails (
            page_id BIGINT UNSIGNED NOT NULL,
            email VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            PRIMARY KEY (page_id, email),
            KEY emails_by_email (email),
            CONSTRAINT emails_page FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE
        ) {TABLE_OPTIONS}""",
    ),
    2: (
        f"""CREATE TABLE IF NOT EXISTS urls (
            job VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            fingerprint BINARY(16) NOT NULL,
            url TEXT NOT NULL,
            depth INT NOT NULL,
            state ENUM('waiting', 'running', 'error', 'done') NOT NULL,
            first_seen DATETIME(3) NOT NULL,
            updated DATETIME(3) NOT NULL,
            http_status SMALLINT UNSIGNED NULL,
            last_error VARCHAR(500) NULL,
            PRIMARY KEY (job, fingerprint),
            KEY urls_by_state (job, state, depth)
        ) {TABLE_OPTIONS}""",
    ),
    # The search index (topicspider.search.index; pages stored before it are indexed
    # by `scrapy search --reindex`), and the crawls' live status and control inbox
    # (topicspider.storage.crawls). Terms compare as bytes: the index lower-cases them,
    # and a language collation would make distinct words equal.
    3: (
        f"""CREATE TABLE IF NOT EXISTS search_docs (
            page_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
            length INT UNSIGNED NOT NULL,
            CONSTRAINT search_docs_page FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS search_postings (
            term VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            page_id BIGINT UNSIGNED NOT NULL,
            tf INT UNSIGNED NOT NULL,
            PRIMARY KEY (term, page_id),
            KEY search_postings_by_page (page_id),
            CONSTRAINT search_postings_page FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS crawl_status (
            crawl VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            worker VARCHAR(200) NOT NULL,
            state VARCHAR(20) NOT NULL,
            updated DOUBLE NOT NULL,
            status MEDIUMTEXT NOT NULL,
            PRIMARY KEY (crawl, worker)
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS crawl_control (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            crawl VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            action VARCHAR(20) NOT NULL,
            argument TEXT NOT NULL,
            created DOUBLE NOT NULL,
            KEY crawl_control_by_crawl (crawl, id)
        ) {TABLE_OPTIONS}""",
    ),
    # The terms that weighed most in a page's topic score, and the relevance labels a
    # person gave stored pages (topicspider.storage.labels).
    4: (
        "ALTER TABLE pages ADD COLUMN relevance_terms VARCHAR(500) NULL AFTER relevance",
        f"""CREATE TABLE IF NOT EXISTS page_labels (
            page_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
            relevant TINYINT NOT NULL,
            labelled_at DOUBLE NOT NULL,
            CONSTRAINT page_labels_page FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE
        ) {TABLE_OPTIONS}""",
    ),
    # The durable frontier: whether the dupefilter has written a URL (a row the URL-state
    # log made first is not yet a seen URL: a kill then would skip its link for good),
    # and a waiting URL's request (topicspider.requestcodec), NULL once it is finished.
    # Rows from before were written by the dupefilter, and their queue was elsewhere.
    5: ("ALTER TABLE urls ADD COLUMN frontier ENUM('waiting', 'finished') NULL,"
        " ADD COLUMN request MEDIUMBLOB NULL",
        "UPDATE urls SET frontier = 'finished'"),
    # Duplicate content (topicspider.duplicates): a page whose text an earlier one has is
    # an alias of it, and a page nearly the same as an earlier one says which.
    # The ALTER last: MySQL commits each statement, and only CREATE ... IF NOT EXISTS
    # can run again after a failure.
    6: (f"""CREATE TABLE IF NOT EXISTS page_aliases (
            url_hash BINARY(16) NOT NULL PRIMARY KEY,
            url TEXT NOT NULL,
            duplicate_of TEXT NOT NULL,
            duplicate_of_hash BINARY(16) NOT NULL,
            depth INT NOT NULL,
            http_status SMALLINT UNSIGNED NOT NULL,
            fetched_at DATETIME NOT NULL,
            KEY page_aliases_by_page (duplicate_of_hash)
        ) {TABLE_OPTIONS}""",
        "ALTER TABLE pages ADD COLUMN near_duplicate_of TEXT NULL"),
    # The search index in segments (topicspider.search.segments): schema 3's postings
    # are converted by the server, a segment per 10,000 page ids, each committed on its
    # own, without cutting a page again; then its two tables are dropped. Each step can
    # run again after a failure. A page is deleted only once out of the index (RESTRICT):
    # its postings would stay behind.
    7: (f"""CREATE TABLE IF NOT EXISTS search_segment_info (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            tier INT NOT NULL,
            pages INT UNSIGNED NOT NULL,
            live INT NOT NULL,
            KEY search_segment_info_by_tier (tier, id)
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS search_segments (
            term VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            segment BIGINT UNSIGNED NOT NULL,
            postings LONGBLOB NOT NULL,
            PRIMARY KEY (term, segment),
            KEY search_segments_by_segment (segment)
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS search_index_pages (
            page_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
            length INT UNSIGNED NOT NULL,
            batch BIGINT UNSIGNED NOT NULL,
            segment BIGINT UNSIGNED NOT NULL,
            KEY search_index_pages_by_segment (segment),
            CONSTRAINT search_index_pages_page FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE RESTRICT
        ) {TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS search_dead (
            batch BIGINT UNSIGNED NOT NULL,
            page_id BIGINT UNSIGNED NOT NULL,
            segment BIGINT UNSIGNED NOT NULL,
            PRIMARY KEY (batch, page_id),
            KEY search_dead_by_segment (segment)
        ) {TABLE_OPTIONS}""",
        convert_postings,
        "DROP TABLE IF EXISTS search_postings",
        "DROP TABLE IF EXISTS search_docs"),
    # The segments' rows in the order of their segment (topicspider.search.segments).
    8: (order_by_segment,),
}

UPSERT_PAGE = """
INSERT INTO pages (url_hash, url, title, depth, http_status, fetched_at, relevance, relevance_terms, text,
                   content_type, encoding, content_length, near_duplicate_of)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON DUPLICATE KEY UPDATE
    url = VALUES(url), title = VALUES(title), depth = LEAST(depth, VALUES(depth)),
    http_status = VALUES(http_status), fetched_at = VALUES(fetched_at),
    relevance = VALUES(relevance), relevance_terms = VALUES(relevance_terms), text = VALUES(text), content_type = VALUES(content_type),
    encoding = VALUES(encoding), content_length = VALUES(content_length),
    near_duplicate_of = VALUES(near_duplicate_of)
"""
UPSERT_ALIAS = """
INSERT INTO page_aliases (url_hash, url, duplicate_of, duplicate_of_hash, depth, http_status, fetched_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON DUPLICATE KEY UPDATE
    duplicate_of = VALUES(duplicate_of), duplicate_of_hash = VALUES(duplicate_of_hash),
    depth = LEAST(depth, VALUES(depth)), http_status = VALUES(http_status), fetched_at = VALUES(fetched_at)
"""
# Every value a parameter, so that pymysql's executemany sends multi-row INSERTs. A URL
# queued again (a retry) waits again; a finished one lets go of its request. Its state
# column is the URL-state log's.
UPSERT_URL = """
INSERT INTO urls (job, fingerprint, url, depth, state, first_seen, updated, frontier, request)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON DUPLICATE KEY UPDATE frontier = VALUES(frontier), request = VALUES(request)
"""
# A state only moves forward (an ENUM is its position in a number context): a late
# "running" does not undo "done", and a retry's success turns "error" into "done". The row is created if the dupefilter's has not
# arrived yet.
UPSERT_URL_STATE = """
INSERT INTO urls (job, fingerprint, url, depth, state, first_seen, updated, http_status, last_error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON DUPLICATE KEY UPDATE
    http_status = IF(VALUES(state) + 0 >= state + 0, COALESCE(VALUES(http_status), http_status), http_status),
    last_error = IF(VALUES(state) + 0 >= state + 0, VALUES(last_error), last_error),
    updated = IF(VALUES(state) + 0 >= state + 0, VALUES(updated), updated),
    state = IF(VALUES(state) + 0 >= state + 0, VALUES(state), state)
"""


@dataclass(frozen=True)
class MySQLTarget:
    host: str
    port: int
    user: str
    database: str
    password: str = field(default="", repr=False)

    @property
    def where(self) -> str:
        """Host, port and database, never the credentials."""
        return f"{self.host}:{self.port}/{self.database}"

    def connect(self) -> Connection[Cursor]:
        return pymysql.connect(
            host=self.host, port=self.port, user=self.user, password=self.password,
            database=self.database, charset="utf8mb4", autocommit=False,
            connect_timeout=CONNECT_TIMEOUT, read_timeout=IO_TIMEOUT, write_timeout=IO_TIMEOUT,
            init_command="SET time_zone = '+00:00'",
        )


def parse_mysql_url(database_url: str) -> MySQLTarget:
    """Where ``mysql://[user[:password]@]host[:port]/database`` points; the user and
    password may come from ``MYSQL_USER`` and ``MYSQL_PASSWORD`` instead."""
    shown = mask_url(database_url)
    try:
        parts = urlsplit(database_url)
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        # The parser's message only when it cannot quote a piece of the password.
        reason = str(exc) if "out of range" in str(exc) else (
            "cannot be read as a URL (percent-encode a / # ? @ or [ in the password)")
        raise ConfigError(f"DATABASE_URL {shown!r}: {reason}") from None
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not database or "/" in database:
        raise ConfigError(f"DATABASE_URL {shown!r}: use mysql://user:password@host:port/database")
    if parts.query or parts.fragment:
        raise ConfigError(f"DATABASE_URL {shown!r}: options after '?' are not supported")
    user = unquote(parts.username or "") or os.environ.get("MYSQL_USER", "")
    if not user:
        raise ConfigError(f"DATABASE_URL {shown!r}: no user (put it in the URL or in MYSQL_USER)")
    password = unquote(parts.password) if parts.password is not None else os.environ.get("MYSQL_PASSWORD", "")
    return MySQLTarget(parts.hostname, port, user, database, password)


def is_retryable(error: Exception) -> bool:
    if isinstance(error, pymysql.err.InterfaceError):
        return True  # the connection is closed
    if isinstance(error, pymysql.err.OperationalError) and error.args:
        return error.args[0] in RETRYABLE_CODES
    return False


def describe(error: Exception) -> str:
    """pymysql's message without its code tuple: ``(2003, "Can't connect...")``."""
    if len(error.args) >= 2:
        return f"{error.args[1]} ({error.args[0]})"
    return str(error) or type(error).__name__


def migrate(connection: Connection[Cursor]) -> None:
    """Bring the schema to :data:`SCHEMA_VERSION`; one crawler at a time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT GET_LOCK('topicspider_schema', %s)", (SCHEMA_LOCK_TIMEOUT,))
        (locked,) = cursor.fetchone() or (0,)
        if locked != 1:
            raise ConfigError("another crawler held the schema lock for a minute")
        try:
            cursor.execute(f"CREATE TABLE IF NOT EXISTS topicspider_schema (version INT NOT NULL) {TABLE_OPTIONS}")
            cursor.execute("SELECT MAX(version) FROM topicspider_schema")
            row = cursor.fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise ConfigError(f"schema version {current} is newer than this topicspider ({SCHEMA_VERSION})")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                apply_migration(connection, cursor, version)
                connection.commit()
        finally:
            connection.rollback()  # ends the reading transaction: no metadata lock is kept
            cursor.execute("SELECT RELEASE_LOCK('topicspider_schema')")


def apply_migration(connection: Connection[Cursor], cursor: Cursor, version: int) -> None:
    """Run the steps of :data:`MIGRATIONS` ``[version]`` and record the version, inside
    the caller's transaction."""
    for statement in MIGRATIONS[version]:
        if callable(statement):
            statement(connection)
        else:
            cursor.execute(statement)
    cursor.execute("INSERT INTO topicspider_schema (version) VALUES (%s)", (version,))


def open_connection(database_url: str) -> tuple[MySQLTarget, Connection[Cursor]]:
    """Connect and bring the schema up to date; :class:`ConfigError` naming the host
    and port (never the password) when that fails."""
    target = parse_mysql_url(database_url)
    try:
        connection = target.connect()
    except pymysql.MySQLError as exc:
        raise ConfigError(f"cannot connect to MySQL at {target.host}:{target.port}: {describe(exc)}") from None
    try:
        migrate(connection)
    except (pymysql.MySQLError, ValueError) as exc:  # ValueError: a conversion cut short
        connection.close()
        raise ConfigError(f"MySQL at {target.where}: cannot create or upgrade the schema: {describe(exc)}") from None
    except BaseException:
        connection.close()
        raise
    return target, connection


class _Connected:
    """A connection opened again at the next call after it was lost."""

    def __init__(self, database_url: str) -> None:
        self.target, self._connection = open_connection(database_url)

    def _run(self, work: Any, *args: Any) -> Any:
        try:
            if self._connection is None:
                self._connection = self.target.connect()
            result = work(self._connection, *args)
            self._connection.commit()
            return result
        except pymysql.MySQLError as exc:
            retryable = is_retryable(exc)
            self._discard(retryable)
            raise StorageError(f"MySQL at {self.target.where}: {describe(exc)}", retryable=retryable) from exc
        except (ValueError, TypeError, UnicodeError) as exc:  # a value that cannot be sent
            self._discard(False)
            raise StorageError(f"MySQL at {self.target.where}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            self._discard(False)  # a caller's own error: nothing of its transaction is kept
            raise

    def _discard(self, lost: bool) -> None:
        if self._connection is None:
            return
        try:
            if lost:
                self._connection.close()
            else:
                self._connection.rollback()
        except pymysql.MySQLError:
            lost = True
        if lost:
            self._connection = None

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except pymysql.MySQLError:
                pass  # it is gone either way
            self._connection = None


def _utc(iso_time: str) -> datetime:
    return datetime.fromisoformat(iso_time).astimezone(timezone.utc).replace(tzinfo=None)


def _page_row(page: PageItem) -> tuple[Any, ...]:
    return (
        identity_digest(page.url), page.url, page.title, page.depth, page.http_status, _utc(page.fetched_at),
        page.relevance, None if page.relevance_terms is None else page.relevance_terms[:500], page.text,
        page.content_type[:255], page.encoding[:64], page.content_length, page.near_duplicate_of,
    )


def _alias_row(alias: PageItem) -> tuple[Any, ...]:
    assert alias.duplicate_of is not None
    return (identity_digest(alias.url), alias.url, alias.duplicate_of, identity_digest(alias.duplicate_of),
            alias.depth, alias.http_status, _utc(alias.fetched_at))


class MySQLStore(_Connected):
    """The storage pipeline's backend; ``index``: index the pages it writes for search."""

    def __init__(self, database_url: str, *, index: bool = True) -> None:
        super().__init__(database_url)
        self.index = index
        self._merge_failed = False  # logged once

    def write_pages(self, items: Sequence[PageItem]) -> int:
        pages, aliases = split_aliases(items)
        terms = pages_terms(pages, MYSQL) if self.index else None
        result: int = self._run(self._write, pages, aliases, terms)
        if terms:
            self.merge_index()
        return result

    def merge_index(self) -> int:
        """Merge the search index's segments where enough have gathered, in a
        transaction of its own; the number of merges. A failed merge loses nothing (the
        segments stay as they were, and the next batch tries again): it is logged once."""
        try:
            merges: int = self._run(lambda connection: merge_index(connection.cursor(), MYSQL))
        except StorageError as exc:
            log = logger.debug if self._merge_failed else logger.warning
            self._merge_failed = True
            log(MERGE_FAILED, exc)
            return 0
        return merges

    def transaction(self, work: Callable[[Any, Dialect], T], *, write: bool = False) -> T:
        """``work(cursor, dialect)``'s result, in a transaction of its own (rolled back if
        ``work`` raises). ``write`` is SQLite's concern: InnoDB locks rows as it goes."""
        def run(connection: Connection[Cursor]) -> T:
            with connection.cursor() as cursor:
                return work(cursor, MYSQL)

        result: T = self._run(run)
        return result

    @staticmethod
    def _write(connection: Connection[Cursor], pages: Sequence[PageItem], aliases: Sequence[PageItem],
               terms: list[Mapping[str, int]] | None) -> int:
        with connection.cursor() as cursor:
            # A URL is a page or an alias, never both: another crawl may meet copies in another order.
            # A page leaves the search index first: its postings do not go with its row.
            alias_hashes = [identity_digest(a.url) for a in aliases]
            unindex_pages(cursor, MYSQL, list(_page_ids(cursor, alias_hashes, lock=True).values()))
            _delete_where_hash_in(cursor, "pages", alias_hashes)
            _delete_where_hash_in(cursor, "page_aliases", [identity_digest(p.url) for p in pages])
            cursor.executemany(UPSERT_ALIAS, [_alias_row(alias) for alias in aliases])
            # pymysql sends this as multi-row INSERTs, not one statement per page.
            cursor.executemany(UPSERT_PAGE, [_page_row(page) for page in pages])
            ids = _page_ids(cursor, [identity_digest(page.url) for page in pages])
            for chunk in chunks(list(ids.values())):
                cursor.execute(f"DELETE FROM emails WHERE page_id IN ({MYSQL.marks(len(chunk))})", chunk)
            rows = [(ids[identity_digest(page.url)], email) for page in pages for email in page.emails]
            cursor.executemany("INSERT IGNORE INTO emails (page_id, email) VALUES (%s, %s)", rows)
            update_index(cursor, MYSQL, [ids[identity_digest(page.url)] for page in pages], terms)
        return len(rows)


def _delete_where_hash_in(cursor: Cursor, table: str, hashes: list[bytes]) -> None:
    # A statement per chunk: pymysql's executemany sends a DELETE per row.
    for chunk in chunks(hashes):
        cursor.execute(f"DELETE FROM {table} WHERE url_hash IN ({MYSQL.marks(len(chunk))})", chunk)


def _page_ids(cursor: Cursor, hashes: list[bytes], *, lock: bool = False) -> dict[bytes, int]:
    """The ids of the pages with these URL hashes; ``lock``: the rows (and the gaps
    where none is) locked, so that a page another crawl stores now is found, not
    deleted unseen afterwards."""
    ids: dict[bytes, int] = {}
    suffix = " FOR UPDATE" if lock else ""
    for chunk in chunks(hashes):
        cursor.execute(f"SELECT url_hash, id FROM pages WHERE url_hash IN ({MYSQL.marks(len(chunk))}){suffix}", chunk)
        ids.update((bytes(url_hash), page_id) for url_hash, page_id in cursor.fetchall())
    return ids


class MySQLURLTable(_Connected):
    """One crawl job's rows of ``urls``: the dupefilter's exact store, and URL states."""

    def __init__(self, database_url: str, job: str) -> None:
        super().__init__(database_url)
        self.job = job

    def add_many(self, entries: Sequence[SeenURL]) -> None:
        now = _now()
        rows = [(self.job, entry.fingerprint, entry.url, entry.depth, "waiting", now, now,
                 "finished" if entry.finished else "waiting", None if entry.finished else entry.request)
                for entry in entries]
        self._run(_executemany, UPSERT_URL, rows)

    def waiting(self, after: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        def select(connection: Connection[Cursor]) -> list[tuple[bytes, bytes | None]]:
            with connection.cursor() as cursor:
                cursor.execute("SELECT fingerprint, request FROM urls WHERE job = %s AND fingerprint > %s"
                               " AND frontier = 'waiting' ORDER BY fingerprint LIMIT %s", (self.job, after, limit))
                return [(bytes(fingerprint), None if request is None else bytes(request))
                        for fingerprint, request in cursor.fetchall()]

        rows: list[tuple[bytes, bytes | None]] = self._run(select)
        return rows

    def contains_many(self, fingerprints: Sequence[bytes]) -> set[bytes]:
        found: set[bytes] = self._run(self._contains, list(fingerprints))
        return found

    def _contains(self, connection: Connection[Cursor], fingerprints: list[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        with connection.cursor() as cursor:
            for chunk in chunks(fingerprints):
                cursor.execute(f"SELECT fingerprint FROM urls WHERE job = %s AND frontier IS NOT NULL"
                               f" AND fingerprint IN ({MYSQL.marks(len(chunk))})", [self.job, *chunk])
                found.update(bytes(row[0]) for row in cursor.fetchall())
        return found

    def count(self) -> int:
        def count_rows(connection: Connection[Cursor]) -> int:
            with connection.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM urls WHERE job = %s AND frontier IS NOT NULL", (self.job,))
                row = cursor.fetchone()
                return int(row[0]) if row else 0

        result: int = self._run(count_rows)
        return result

    def set_states(self, states: Sequence[URLState]) -> None:
        rows = [(self.job, s.fingerprint, s.url, s.depth, s.state, s.at, s.at, s.http_status, s.error) for s in states]
        self._run(_executemany, UPSERT_URL_STATE, rows)


def _executemany(connection: Connection[Cursor], statement: str, rows: list[tuple[Any, ...]]) -> None:
    with connection.cursor() as cursor:
        cursor.executemany(statement, rows)


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)

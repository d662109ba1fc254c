"""Exact stores of request fingerprints: the truth behind the dupefilter's LRU, and the
durable frontier.

A store holds every fingerprint of one crawl job, each either *waiting* (queued, held or
being crawled) with its request as data (:mod:`topicspider.requestcodec`), or
*finished* (done, failed or dropped, and its page, if any, stored). A resumed job queues
its waiting requests again. In local mode it is an SQLite file: ``JOBDIR/frontier.sqlite``
when the crawl has a ``JOBDIR``, otherwise a temporary file removed when the crawl ends
(a new crawl re-fetches, and re-stores, its pages; no request is kept in it). With a
MySQL ``DATABASE_URL`` it is the crawl job's rows of the database's ``urls`` table
(:mod:`topicspider.storage.mysql`), which record each URL's state as well. Calls come
from one thread, never the reactor's.

A ``JOBDIR`` of an earlier version holds ``seen.sqlite``, fingerprints only, beside
Scrapy's own disk queue: its fingerprints become finished ones, and the scheduler moves
the disk queue's requests into the store.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol
from urllib.parse import quote
from weakref import WeakKeyDictionary

from topicspider.cluster import ClusterKeys, redis_url
from topicspider.storage import chunks
from topicspider.storage.crawls import check_crawl_id
from topicspider.storage.dialect import SQLITE

if TYPE_CHECKING:
    from datetime import datetime

    from scrapy.crawler import Crawler

JOB_NAME_MAX = 100  # the urls table's job column
JOB_NAME_FILE = "topicspider-job"
STORE_FILE = "frontier.sqlite"
LEGACY_STORE_FILE = "seen.sqlite"  # fingerprints only, before the durable frontier
DURABLE_MARKER = "durable-frontier"  # the store holds the frontier (absent: an earlier version's JOBDIR)


class SeenURL(NamedTuple):
    """What the exact store is told of a URL: that it waits, with its ``request`` (JSON,
    or None where it is not kept), or that it is ``finished``."""

    fingerprint: bytes
    url: str = ""
    depth: int = 0
    request: bytes | None = None
    finished: bool = False


class URLState(NamedTuple):
    """A URL's progress: ``waiting``, ``running``, ``done`` or ``error`` (MySQL mode)."""

    fingerprint: bytes
    url: str
    depth: int
    state: str
    at: datetime  # naive UTC
    http_status: int | None = None
    error: str | None = None


class SeenStore(Protocol):
    def add_many(self, entries: Sequence[SeenURL]) -> None:
        """Record ``entries`` in one transaction, each replacing what was known of its URL."""

    def contains_many(self, fingerprints: Sequence[bytes]) -> set[bytes]: ...

    def count(self) -> int: ...

    def waiting(self, after: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        """Up to ``limit`` waiting URLs' (fingerprint, request), in fingerprint order,
        after ``after``."""

    def close(self) -> None: ...


WAITING, FINISHED = 0, 1


class LocalSQLiteFile:
    """An SQLite file of the crawl's own, written from one thread: kept in a ``JOBDIR``,
    or temporary and removed at close."""

    def __init__(self, path: Path, *, temporary: bool) -> None:
        self.path, self.temporary = path, temporary
        self.connection = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        self.connection.close()
        if self.temporary:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def local_sqlite_path(jobdir: str | None, name: str) -> tuple[Path, bool]:
    """Where a :class:`LocalSQLiteFile` called ``name`` goes, and whether it is temporary."""
    if jobdir:
        Path(jobdir).mkdir(parents=True, exist_ok=True)
        return Path(jobdir) / name, False
    handle, temporary = tempfile.mkstemp(prefix=f"topicspider-{Path(name).stem}-", suffix=".sqlite")
    os.close(handle)
    return Path(temporary), True


class SQLiteSeenStore(LocalSQLiteFile):
    def __init__(self, path: Path, *, temporary: bool) -> None:
        legacy = path.with_name(LEGACY_STORE_FILE)
        adopt = not temporary and not path.exists() and legacy.exists()
        super().__init__(path, temporary=temporary)
        self.connection.execute("CREATE TABLE IF NOT EXISTS frontier (fingerprint BLOB PRIMARY KEY,"
                                " state INTEGER NOT NULL, request BLOB) WITHOUT ROWID")
        if adopt:
            self._adopt(legacy)

    def _adopt(self, legacy: Path) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
            self.connection.execute(f"INSERT OR IGNORE INTO frontier SELECT fingerprint, {FINISHED}, NULL"
                                    " FROM legacy.seen")
        self.connection.execute("DETACH DATABASE legacy")

    def add_many(self, entries: Sequence[SeenURL]) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany(
                "INSERT INTO frontier (fingerprint, state, request) VALUES (?, ?, ?) ON CONFLICT (fingerprint)"
                " DO UPDATE SET state = excluded.state, request = excluded.request",
                [(entry.fingerprint, FINISHED if entry.finished else WAITING, entry.request) for entry in entries],
            )

    def contains_many(self, fingerprints: Sequence[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        for chunk in chunks(fingerprints):
            marks = SQLITE.marks(len(chunk))
            found.update(row[0] for row in self.connection.execute(
                f"SELECT fingerprint FROM frontier WHERE fingerprint IN ({marks})", chunk))
        return found

    def count(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM frontier").fetchone()[0])

    def waiting(self, after: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.connection.execute(
            f"SELECT fingerprint, request FROM frontier WHERE fingerprint > ? AND state = {WAITING}"
            " ORDER BY fingerprint LIMIT ?", (after, limit)))


def is_legacy_jobdir(jobdir: str | None) -> bool:
    """Whether ``jobdir`` is an earlier version's, whose queue is Scrapy's disk queue
    (saved at a clean close, ``active.json``), not yet taken over by the store."""
    return (bool(jobdir) and Path(jobdir, "requests.queue", "active.json").exists()
            and not Path(jobdir, DURABLE_MARKER).exists())


def mark_durable(jobdir: str) -> None:
    """Record that the store holds ``jobdir``'s whole frontier."""
    Path(jobdir, DURABLE_MARKER).write_text("1\n", encoding="ascii")


def open_seen_store(jobdir: str | None, database_url: str = "", job: str = "") -> SeenStore:
    """The job's store: with a MySQL ``database_url``, the job's rows of its ``urls``
    table; otherwise an SQLite file kept in ``jobdir`` if given, else a temporary one."""
    if database_url.lower().startswith("mysql"):
        from topicspider.storage.mysql import MySQLURLTable

        return MySQLURLTable(database_url, job)
    path, temporary = local_sqlite_path(jobdir, STORE_FILE)
    return SQLiteSeenStore(path, temporary=temporary)


_job_names: WeakKeyDictionary[Crawler, str] = WeakKeyDictionary()


def job_name(crawler: Crawler) -> str:
    """The crawl job's name in the ``urls`` table, the same for every component of one
    crawl. With a ``JOBDIR``, the one kept in ``JOBDIR/topicspider-job``, made on first
    use from the directory's name and a random suffix (a resumed job is the same job;
    two directories of the same name are two jobs); without, the spider's name, the start
    time (UTC) and a random suffix. In distributed mode, every worker's job is the
    crawl's Redis queue key (``redis:topic:requests``), so that all share one. A
    ``CRAWL_ID`` setting names it outright (the console names the crawls it starts)."""
    name = _job_names.get(crawler)
    if name is None:
        jobdir = crawler.settings.get("JOBDIR") or ""
        if crawler.settings.get("CRAWL_ID"):
            name = check_crawl_id(crawler.settings.get("CRAWL_ID"))
        elif redis_url(crawler.settings):
            spider = crawler.spidercls.name if crawler.spidercls else "crawl"
            name = cluster_job_name(ClusterKeys.from_settings(crawler.settings, spider))
        elif jobdir:
            name = _kept_job_name(Path(jobdir))
        else:
            name = _new_job_name(crawler.spidercls.name if crawler.spidercls else "crawl",
                                 time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        _job_names[crawler] = name
    return name


def cluster_job_name(keys: ClusterKeys) -> str:
    """A distributed crawl's job name: its Redis queue key, ``redis:topic:requests``."""
    return quote(f"redis:{keys.queue}", safe=":-_.")[:JOB_NAME_MAX]


def _new_job_name(*parts: str) -> str:
    stem = "-".join(quote(part, safe="-_.") for part in parts)
    return f"{stem[:JOB_NAME_MAX - 9]}-{secrets.token_hex(4)}"


def _kept_job_name(jobdir: Path) -> str:
    marker = jobdir / JOB_NAME_FILE
    try:
        return marker.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        name = _new_job_name(jobdir.resolve().name)
        jobdir.mkdir(parents=True, exist_ok=True)
        marker.write_text(name + "\n", encoding="ascii")
        return name

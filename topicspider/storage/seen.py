"""Exact stores of request fingerprints: the truth behind the dupefilter's LRU.

A store holds every fingerprint of one crawl job. In local mode it is an SQLite file:
``JOBDIR/seen.sqlite`` when the crawl has a ``JOBDIR`` (so a resumed job remembers
what it fetched), otherwise a temporary file removed when the crawl ends (a new crawl
re-fetches, and re-stores, its pages). Calls come from one thread, never the reactor's.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

# SQLite's host-parameter limit is 999 in old builds.
CHUNK = 500


class SeenStore(Protocol):
    def add_many(self, fingerprints: Sequence[bytes]) -> None: ...

    def contains_many(self, fingerprints: Sequence[bytes]) -> set[bytes]: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


class SQLiteSeenStore:
    def __init__(self, path: Path, *, temporary: bool) -> None:
        self.path, self.temporary = path, temporary
        self.connection = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("PRAGMA synchronous = NORMAL")
        self.connection.execute("CREATE TABLE IF NOT EXISTS seen (fingerprint BLOB PRIMARY KEY) WITHOUT ROWID")

    def add_many(self, fingerprints: Sequence[bytes]) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany(
                "INSERT OR IGNORE INTO seen (fingerprint) VALUES (?)", [(fp,) for fp in fingerprints]
            )

    def contains_many(self, fingerprints: Sequence[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        for start in range(0, len(fingerprints), CHUNK):
            chunk = list(fingerprints[start:start + CHUNK])
            marks = ",".join("?" * len(chunk))
            found.update(row[0] for row in self.connection.execute(
                f"SELECT fingerprint FROM seen WHERE fingerprint IN ({marks})", chunk))
        return found

    def count(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM seen").fetchone()[0])

    def close(self) -> None:
        self.connection.close()
        if self.temporary:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def open_seen_store(jobdir: str | None) -> SQLiteSeenStore:
    """The job's store: kept in ``jobdir`` if given, else a temporary file."""
    if jobdir:
        Path(jobdir).mkdir(parents=True, exist_ok=True)
        return SQLiteSeenStore(Path(jobdir) / "seen.sqlite", temporary=False)
    handle, name = tempfile.mkstemp(prefix="topicspider-seen-", suffix=".sqlite")
    os.close(handle)
    return SQLiteSeenStore(Path(name), temporary=True)

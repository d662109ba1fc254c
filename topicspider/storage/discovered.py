"""The store of URLs the crawl found as links and did not request, for its ledger
(:mod:`topicspider.discovery`): one row per URL, with the reason it was first left and
the number of the run (a resumed job's runs are 1, 2...) that first found it. An
SQLite file, ``JOBDIR/discovered.sqlite`` with a ``JOBDIR``, otherwise a temporary one
removed at close. Calls come from one thread, never the reactor's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from topicspider.storage.seen import LocalSQLiteFile, local_sqlite_path

STORE_FILE = "discovered.sqlite"


class DiscoveredStore(LocalSQLiteFile):
    def __init__(self, path: Path, *, temporary: bool) -> None:
        super().__init__(path, temporary=temporary)
        self.connection.execute("CREATE TABLE IF NOT EXISTS dropped (fingerprint BLOB PRIMARY KEY,"
                                " reason TEXT NOT NULL, run INTEGER NOT NULL) WITHOUT ROWID")
        self.run = int(self.connection.execute("SELECT COALESCE(MAX(run), 0) + 1 FROM dropped").fetchone()[0])

    def add_many(self, links: Sequence[tuple[bytes, str]]) -> Counter[str]:
        """Record the links not known yet, in one transaction; how many were new, by reason."""
        new: Counter[str] = Counter()
        with self.connection:
            self.connection.execute("BEGIN")
            for fingerprint, reason in links:
                cursor = self.connection.execute(
                    "INSERT OR IGNORE INTO dropped (fingerprint, reason, run) VALUES (?, ?, ?)",
                    (fingerprint, reason, self.run))
                new[reason] += cursor.rowcount
        return +new

    def this_run(self, after: bytes, limit: int) -> list[tuple[bytes, str]]:
        """Up to ``limit`` of the URLs this run found first, in fingerprint order, after ``after``."""
        return list(self.connection.execute(
            "SELECT fingerprint, reason FROM dropped WHERE fingerprint > ? AND run = ? ORDER BY fingerprint LIMIT ?",
            (after, self.run, limit)))


def open_discovered_store(jobdir: str | None) -> DiscoveredStore:
    path, temporary = local_sqlite_path(jobdir, STORE_FILE)
    return DiscoveredStore(path, temporary=temporary)

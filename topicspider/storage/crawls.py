"""The crawls' live status and control inbox, two tables of the storage database that
SQLite and MySQL/MariaDB share, so that a console sees every crawl writing to the same
database, wherever it runs (a local process, a scrapyd job, distributed workers).

* ``crawl_status (crawl, worker, state, updated, status)``: each worker's latest
  snapshot (JSON), written every ``STATUS_INTERVAL`` seconds by
  :mod:`topicspider.extensions.livestatus`; ``updated`` is a Unix time.
* ``crawl_control (id, crawl, action, argument, created)``: instructions for a running
  crawl (``add`` a URL, ``block`` a URL pattern), read in ``id`` order by
  :mod:`topicspider.extensions.control`; a resumed crawl reads them all again.

The functions take a DB-API cursor and a :class:`~topicspider.storage.dialect.Dialect`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from topicspider.config import ConfigError
from topicspider.storage.dialect import Dialect

ACTIONS = ("add", "block")
CRAWL_ID_MAX = 100
# What job names are made of (topicspider.storage.seen: quoted, so "%" too); never a
# "/" or a name of dots alone, so that an id is also a safe directory name.
CRAWL_ID = re.compile(r"[A-Za-z0-9._:%-]+")


@dataclass(frozen=True)
class WorkerStatus:
    crawl: str
    worker: str
    state: str  # "running" or "finished"
    updated: float
    status: dict[str, Any]


@dataclass(frozen=True)
class Control:
    id: int
    action: str
    argument: str


def is_crawl_id(crawl: str) -> bool:
    return len(crawl) <= CRAWL_ID_MAX and bool(CRAWL_ID.fullmatch(crawl)) and crawl.strip(".") != ""


def check_crawl_id(crawl: str) -> str:
    """``crawl`` if it is a valid crawl id (``CRAWL_ID``); :class:`ConfigError` if not."""
    if not is_crawl_id(crawl):
        raise ConfigError(f"CRAWL_ID must be 1 to {CRAWL_ID_MAX} letters, digits and . _ : % -, "
                          f"not dots alone, got {crawl!r}")
    return crawl


def put_status(cursor: Any, dialect: Dialect, status: WorkerStatus) -> None:
    cursor.execute(dialect.sql("REPLACE INTO crawl_status (crawl, worker, state, updated, status) VALUES (?, ?, ?, ?, ?)"),
                   (status.crawl, status.worker, status.state, status.updated, json.dumps(status.status)))


def statuses(cursor: Any, dialect: Dialect, crawl: str | None = None, limit: int = 200) -> list[WorkerStatus]:
    """The workers' latest snapshots, most recently updated first; one crawl's or all."""
    where, parameters = ("WHERE crawl = ?", [crawl]) if crawl is not None else ("", [])
    cursor.execute(dialect.sql(f"SELECT crawl, worker, state, updated, status FROM crawl_status {where} "
                               "ORDER BY updated DESC LIMIT ?"), [*parameters, limit])
    return [WorkerStatus(crawl_id, worker, state, float(updated), json.loads(status))
            for crawl_id, worker, state, updated, status in cursor.fetchall()]


def add_controls(cursor: Any, dialect: Dialect, crawl: str, action: str, arguments: list[str], created: float) -> None:
    """Queue ``action`` once per argument for the crawl, in order."""
    if action not in ACTIONS:
        raise ValueError(f"unknown control action {action!r}")
    check_crawl_id(crawl)
    cursor.executemany(dialect.sql("INSERT INTO crawl_control (crawl, action, argument, created) VALUES (?, ?, ?, ?)"),
                       [(crawl, action, argument, created) for argument in arguments])


def controls_after(cursor: Any, dialect: Dialect, crawl: str, after: int) -> list[Control]:
    """The crawl's instructions with an id above ``after``, in order."""
    cursor.execute(dialect.sql("SELECT id, action, argument FROM crawl_control WHERE crawl = ? AND id > ? ORDER BY id"),
                   (crawl, after))
    return [Control(int(row_id), action, argument) for row_id, action, argument in cursor.fetchall()]


def crawl_ids(cursor: Any, dialect: Dialect, limit: int = 200) -> list[tuple[str, float]]:
    """Every crawl that reported a status, with its latest update, most recent first."""
    cursor.execute(dialect.sql("SELECT crawl, MAX(updated) AS latest FROM crawl_status GROUP BY crawl "
                               "ORDER BY latest DESC LIMIT ?"), (limit,))
    return [(crawl, float(latest)) for crawl, latest in cursor.fetchall()]

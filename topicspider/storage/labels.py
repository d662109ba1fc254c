"""Relevance labels a person gave stored pages, in the storage database that SQLite and
MySQL/MariaDB share: ``page_labels (page_id, relevant, labelled_at)``, one row per
labelled page, written by the console (``/pages/<id>/label``) and read by
``scrapy topic-train -a labels=database`` to retrain a topic. A labels file names pages
by URL instead (:func:`read_labels_file`); they must be stored pages too.

The functions take a DB-API cursor and a :class:`~topicspider.storage.dialect.Dialect`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topicspider.config import ConfigError
from topicspider.storage import chunks
from topicspider.storage.dialect import Dialect

LABELS_FROM_DATABASE = "database"
RELEVANT_WORDS = {"relevant": True, "yes": True, "1": True, "+": True,
                  "irrelevant": False, "no": False, "0": False, "-": False}


@dataclass(frozen=True)
class LabelledPage:
    url: str
    relevant: bool
    title: str
    text: str


def set_label(cursor: Any, dialect: Dialect, page_id: int, relevant: bool | None) -> None:
    """Label a stored page relevant or not; ``None`` takes its label back."""
    cursor.execute(dialect.sql("DELETE FROM page_labels WHERE page_id = ?"), (page_id,))
    if relevant is not None:
        cursor.execute(dialect.sql("INSERT INTO page_labels (page_id, relevant, labelled_at) VALUES (?, ?, ?)"),
                       (page_id, int(relevant), time.time()))


def labels_of(cursor: Any, dialect: Dialect, page_ids: list[int]) -> dict[int, bool]:
    labels: dict[int, bool] = {}
    for chunk in chunks(page_ids):
        cursor.execute(dialect.sql(f"SELECT page_id, relevant FROM page_labels WHERE page_id IN ({dialect.marks(len(chunk))})"),
                       chunk)
        labels.update((int(page_id), bool(relevant)) for page_id, relevant in cursor.fetchall())
    return labels


def labelled_pages(cursor: Any, dialect: Dialect) -> list[LabelledPage]:
    """Every page labelled in the database, in the order it was labelled."""
    cursor.execute("SELECT p.url, l.relevant, p.title, p.text FROM page_labels l JOIN pages p ON p.id = l.page_id "
                   "ORDER BY l.labelled_at, p.id")
    return [LabelledPage(url, bool(relevant), title, text) for url, relevant, title, text in cursor.fetchall()]


def pages_by_url(cursor: Any, dialect: Dialect, labels: dict[str, bool]) -> tuple[list[LabelledPage], list[str]]:
    """The stored pages ``labels`` names, and the URLs of those it names that are not stored."""
    found: dict[str, tuple[str, str]] = {}
    urls = list(labels)
    for chunk in chunks(urls):
        cursor.execute(dialect.sql(f"SELECT url, title, text FROM pages WHERE url IN ({dialect.marks(len(chunk))})"), chunk)
        found.update((url, (title, text)) for url, title, text in cursor.fetchall())
    pages = [LabelledPage(url, labels[url], *found[url]) for url in urls if url in found]
    return pages, [url for url in urls if url not in found]


def read_labels_file(path: Path) -> dict[str, bool]:
    """``URL LABEL`` lines (``relevant``/``irrelevant``, ``yes``/``no``, ``1``/``0`` or
    ``+``/``-``; ``#`` comments) as URL -> relevant; a URL labelled twice keeps its last."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read labels file {str(path)!r}: {exc}") from None
    labels: dict[str, bool] = {}
    for number, line in enumerate(lines, start=1):
        fields = re.split(r"\s+", line.strip())
        if not fields[0] or fields[0].startswith("#"):
            continue
        if len(fields) != 2 or fields[1].lower() not in RELEVANT_WORDS:
            raise ConfigError(f"{path}:{number}: expected 'URL relevant|irrelevant', got {line.strip()[:200]!r}")
        labels[fields[0]] = RELEVANT_WORDS[fields[1].lower()]
    if not labels:
        raise ConfigError(f"labels file {str(path)!r} holds no labels")
    return labels

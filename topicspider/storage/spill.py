"""Pages the database would not take, kept in a JSON-lines file until they are replayed.

The storage pipeline appends a batch here when its writes keep failing, or the pages
the database refused (``STORAGE_SPILL_FILE``); ``scrapy replay-spill FILE`` writes the
pages to the database later, and may run while a crawl spills to the same file. One page per line, the :class:`~topicspider.items.PageItem` fields as
a JSON object, UTF-8.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from pathlib import Path

from topicspider.config import ConfigError
from topicspider.items import PageItem

PAGE_FIELDS = frozenset(field.name for field in fields(PageItem))


def spill_pages(path: Path, pages: Sequence[PageItem]) -> None:
    """Append ``pages`` to ``path``, on disk before this returns.

    Under an exclusive lock, and only to the file still at ``path``: a replay that
    claimed the file (:func:`claim_spill`) has read it whole, so a crawl spilling at the
    same moment writes a new file rather than into the claimed one."""
    _append(path, "".join(json.dumps(_spilled(page), ensure_ascii=False) + "\n" for page in pages).encode("utf-8"))


def _spilled(page: PageItem) -> dict[str, object]:
    # The index terms are worked out again when the page is replayed: no need to keep them.
    fields = asdict(page)
    fields.pop("search_terms", None)
    return fields


def _append(path: Path, data: bytes) -> None:
    while True:
        with path.open("ab") as spill:
            fcntl.flock(spill, fcntl.LOCK_EX)
            if not _still_at(spill.fileno(), path):
                continue  # claimed meanwhile: open the new one
            spill.write(data)
            spill.flush()
            os.fsync(spill.fileno())
            return


def _still_at(descriptor: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except FileNotFoundError:
        return False


def claim_spill(path: Path) -> Path:
    """Move ``path`` aside for a replay, once no crawl is appending to it; the new name."""
    claimed = path.with_name(f"{path.name}.replaying-{os.getpid()}")
    while True:
        with path.open("rb") as spill:
            fcntl.flock(spill, fcntl.LOCK_EX)
            if not _still_at(spill.fileno(), path):
                continue  # another replay claimed it first
            os.replace(path, claimed)
            return claimed


def give_back(claimed: Path, path: Path) -> None:
    """Return a claimed file's lines to ``path``, as they were, after what was spilled
    meanwhile."""
    data = claimed.read_bytes()
    if data:
        _append(path, data)
    claimed.unlink()


def read_spill(path: Path) -> Iterator[PageItem]:
    """The pages of a spill file; :class:`ConfigError` naming the line of a bad one."""
    try:
        with path.open(encoding="utf-8") as spill:
            for number, line in enumerate(spill, 1):
                if line.strip():
                    yield _page(line, path, number)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read spill file {str(path)!r}: {exc}") from None


def _page(line: str, path: Path, number: int) -> PageItem:
    try:
        values = json.loads(line)
        if not isinstance(values, dict) or not set(values) <= PAGE_FIELDS:
            raise ValueError("not a page")
        return PageItem(**values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}:{number}: not a spilled page ({exc})") from None

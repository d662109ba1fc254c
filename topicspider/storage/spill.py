"""Pages the database would not take, kept in a JSON-lines file until they are replayed.

The storage pipeline appends a batch here when its writes keep failing
(``STORAGE_SPILL_FILE``); ``scrapy replay-spill FILE`` writes the pages to the
database later. One page per line, the :class:`~topicspider.items.PageItem` fields as
a JSON object, UTF-8.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from pathlib import Path

from topicspider.config import ConfigError
from topicspider.items import PageItem

PAGE_FIELDS = frozenset(field.name for field in fields(PageItem))


def spill_pages(path: Path, pages: Sequence[PageItem]) -> None:
    """Append ``pages`` to ``path``, on disk before this returns."""
    lines = "".join(json.dumps(asdict(page), ensure_ascii=False) + "\n" for page in pages)
    with path.open("a", encoding="utf-8") as spill:
        spill.write(lines)
        spill.flush()
        os.fsync(spill.fileno())


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

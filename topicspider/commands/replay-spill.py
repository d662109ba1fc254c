"""``scrapy replay-spill [FILE]``: store the pages a crawl spilled when the database
would not take them (``STORAGE_SPILL_FILE``, the default file), into ``DATABASE_URL``.

Pages are upserted, so replaying twice, or after a crawl stored a newer copy of a page,
does no harm; but the spilled copy wins over a newer one, so replay before re-crawling. The file
is removed once every page is stored; on a failure it is kept whole, with the count
of pages written so far, and the command exits 1 (run it again). A bad file or
database gets one line and exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topicspider.config import ConfigError, get_int
from topicspider.storage import StorageError, open_store
from topicspider.storage.spill import read_spill
from topicspider.urls import mask_url

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "[FILE] [-s DATABASE_URL=...]"

    def short_desc(self) -> str:
        return "Store the pages a crawl spilled to a file when the database failed"

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) > 1:
            raise UsageError("give at most one spill file")
        assert self.settings is not None
        path = Path(args[0] if args else self.settings.get("STORAGE_SPILL_FILE"))
        database_url: str = self.settings.get("DATABASE_URL") or ""
        try:
            if not path.is_file():
                raise ConfigError(f"no spill file {str(path)!r}")
            pages = list(read_spill(path))
            batch_size = get_int(self.settings, "STORAGE_BATCH_SIZE")
            store = open_store(database_url)
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        written = 0
        try:
            for start in range(0, len(pages), batch_size):
                batch = pages[start:start + batch_size]
                store.write_pages(batch)
                written += len(batch)
        except StorageError as exc:
            sys.stderr.write(f"topicspider: error: {written} of {len(pages)} pages stored, then: {exc}; "
                             f"{path} is kept, run this again\n")
            self.exitcode = 1
            return
        finally:
            store.close()
        path.unlink()
        print(f"Stored {written} pages from {path} in {mask_url(database_url)}; {path} removed")

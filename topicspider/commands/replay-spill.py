"""``scrapy replay-spill [FILE]``: store the pages a crawl spilled when the database
would not take them (``STORAGE_SPILL_FILE``, the default file), into ``DATABASE_URL``.

The file is claimed first (moved aside under a lock), so a crawl may go on spilling to
it meanwhile; whatever stops the replay gives the claimed lines back to it. Pages are upserted, so replaying twice does no harm; but a spilled copy
wins over a newer one, so replay before re-crawling. Pages the database still refuses
(a value it will not take) are set aside in ``FILE.rejected``, with exit status 1. If
the database fails, every page not yet stored goes back to ``FILE`` and the command
exits 1 (run it again). A bad file or database gets one line and exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topicspider.config import ConfigError, get_bool, get_int
from topicspider.items import PageItem
from topicspider.storage import BatchOutcome, StorageError, Store, open_store, write_isolating
from topicspider.storage.spill import claim_spill, give_back, read_spill, spill_pages
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
            batch_size = get_int(self.settings, "STORAGE_BATCH_SIZE")
            store = open_store(database_url, index=get_bool(self.settings, "SEARCH_INDEX"))
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        claimed = claim_spill(path)
        try:
            pages = list(read_spill(claimed))  # a bad file is refused before anything is written
            outcome = self._replay(store, pages, batch_size)
            if outcome.refused:
                rejected = path.with_name(f"{path.name}.rejected")
                spill_pages(rejected, [page for page, _ in outcome.refused])
        except (ConfigError, StorageError) as exc:
            give_back(claimed, path)
            again = "" if isinstance(exc, ConfigError) else "; the pages are back in it, run this again"
            sys.stderr.write(f"topicspider: error: {exc}{again}\n")
            self.exitcode = 2 if isinstance(exc, ConfigError) else 1
            return
        except BaseException:
            give_back(claimed, path)  # interrupted: nothing is lost
            raise
        finally:
            store.close()
        claimed.unlink()
        print(f"Stored {outcome.written} pages from {path} in {mask_url(database_url)}")
        if outcome.refused:
            page, reason = outcome.refused[0]
            sys.stderr.write(f"topicspider: error: the database refused {len(outcome.refused)} pages, kept in "
                             f"{rejected} (e.g. {page.url}: {reason})\n")
            self.exitcode = 1

    @staticmethod
    def _replay(store: Store, pages: list[PageItem], batch_size: int) -> BatchOutcome:
        outcome = BatchOutcome()
        for start in range(0, len(pages), batch_size):
            outcome += write_isolating(store, pages[start:start + batch_size])
        return outcome

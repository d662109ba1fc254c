"""``scrapy control CRAWL add URL...`` and ``scrapy control CRAWL block PATTERN``: give
a running crawl new seed URLs, or block a URL pattern for the rest of it, through its
control inbox (the ``crawl_control`` table of ``DATABASE_URL``, read every
``CONTROL_INTERVAL`` seconds by :mod:`topicspider.extensions.control`). CRAWL is the
crawl's ``CRAWL_ID`` (in its log at start, and in the console). This is what the
console does for a local crawl; a distributed crawl also takes seeds from its Redis
start list (``scrapy push-seeds``). Bad input gets one line and exit status 2.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topicspider.config import ConfigError
from topicspider.console.forms import FormError, added_urls, block_pattern
from topicspider.storage import StorageError, open_store
from topicspider.storage.crawls import add_controls, check_crawl_id
from topicspider.urls import mask_url

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "CRAWL add URL [URL...] | CRAWL block PATTERN [-s DATABASE_URL=...]"

    def short_desc(self) -> str:
        return "Add seed URLs to a running crawl, or block a URL pattern in it"

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) < 3 or args[1] not in ("add", "block") or (args[1] == "block" and len(args) != 3):
            raise UsageError("use: scrapy control CRAWL add URL [URL...], or scrapy control CRAWL block PATTERN")
        crawl, action, values = args[0], args[1], args[2:]
        assert self.settings is not None
        database_url: str = self.settings.get("DATABASE_URL") or ""
        try:
            check_crawl_id(crawl)
            arguments = added_urls("\n".join(values)) if action == "add" else [block_pattern(values[0])]
            store = open_store(database_url)
        except (ConfigError, FormError) as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        now = time.time()
        try:
            store.transaction(lambda cursor, dialect: add_controls(cursor, dialect, crawl, action, arguments, now),
                              write=True)
        except StorageError as exc:
            sys.stderr.write(f"topicspider: error: {mask_url(database_url)}: {exc}\n")
            self.exitcode = 1
            return
        finally:
            store.close()
        what = f"{len(arguments)} URLs to add" if action == "add" else f"the pattern {arguments[0]!r} to block"
        print(f"Sent {what} to crawl {crawl} in {mask_url(database_url)}")

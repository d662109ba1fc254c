"""``scrapy crawl``, with topicspider's checks run before the crawler starts.

Overrides Scrapy's built-in command through ``COMMANDS_MODULE``. A bad spider argument,
setting or database gets one line on stderr and exit status 2, before any request.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from topicspider.config import ConfigError
from topicspider.preflight import check_settings

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) == 1:
            try:
                self._preflight(args[0], opts.spargs)
            except ConfigError as exc:
                sys.stderr.write(f"topicspider: error: {exc}\n")
                self.exitcode = 2
                return
        super().run(args, opts)

    def _preflight(self, spider_name: str, spider_args: dict[str, str]) -> None:
        assert self.crawler_process is not None and self.settings is not None
        spider_class = self.crawler_process.spider_loader.load(spider_name)
        check_arguments = getattr(spider_class, "check_arguments", None)
        if check_arguments is not None:
            check_arguments(**spider_args)
        check_settings(self.settings)

"""``scrapy crawl``, with topicspider's checks run before the crawler starts.

Overrides Scrapy's built-in command through ``COMMANDS_MODULE``. A bad spider argument,
setting or database gets one line on stderr and exit status 2, before any request. A
crawl that ends for a reason in the spider's ``BAD_INPUT_REASONS`` (a training sample or
negative that could not be read) exits with status 2 too, one in its ``FAILED_REASONS``
with status 1.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from topicspider.config import ConfigError
from topicspider.preflight import check_settings

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCrawlCommand):
    #: Passed to the spider's ``check_arguments``.
    need_seeds = True
    #: Whether the crawl stores pages, so that the database is checked first.
    stores_pages = True

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give exactly one spider name")
        try:
            self._preflight(args[0], opts.spargs)
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        assert self.crawler_process is not None
        crawler = self._create_crawler(args[0])
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1  # the crawler never started: it has no stats
            return
        reason = crawler.stats.get_value("finish_reason") if crawler.stats is not None else None
        if reason in getattr(crawler.spidercls, "BAD_INPUT_REASONS", frozenset()):
            self.exitcode = 2
        elif reason in getattr(crawler.spidercls, "FAILED_REASONS", frozenset()):
            self.exitcode = 1

    def _preflight(self, spider_name: str, spider_args: dict[str, Any]) -> None:
        assert self.crawler_process is not None and self.settings is not None
        spider_class = self.crawler_process.spider_loader.load(spider_name)
        check_arguments = getattr(spider_class, "check_arguments", None)
        if check_arguments is not None:
            check_arguments(**spider_args, need_seeds=self.need_seeds, settings=self.settings)
        check_settings(self.settings, database=self.stores_pages)

"""``scrapy push-seeds SEEDS [--reset] -s REDIS_URL=...``: hand seed URLs to a distributed
crawl, through the spider's Redis start-URL list (``REDIS_START_URLS_KEY``, by default
``topic:start_urls``, as scrapy-redis names it).

``SEEDS`` is written as for ``-a seeds=``: ``URL[,URL...]`` or ``@file``. Running workers
take the URLs within a second; workers started later take them when they start.
``--reset`` first deletes the crawl's keys (queue, seen URLs, start list, leases), to
crawl again what an earlier crawl of the same keys has seen. A bad seed, or a missing or
unreachable Redis, gets one line and exit status 2, and nothing is pushed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topicspider.cluster import ClusterKeys, check_server, connect, redis_url
from topicspider.config import ConfigError, parse_seeds
from topicspider.urls import mask_url

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "SEEDS [--reset] [--spider NAME] -s REDIS_URL=redis://HOST:PORT/DB"

    def short_desc(self) -> str:
        return "Push seed URLs to a distributed crawl's Redis start list"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--reset", action="store_true",
                            help="delete the crawl's Redis keys first (a new crawl of the same keys)")
        parser.add_argument("--spider", default="topic", help="the spider whose keys to use (default: topic)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give the seeds: URL[,URL...] or @file")
        assert self.settings is not None
        try:
            seeds = parse_seeds(args[0])
            if not redis_url(self.settings):
                raise ConfigError("REDIS_URL is not set: use -s REDIS_URL=redis://HOST:PORT/DB")
            check_server(self.settings)
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        from topicspider.cluster.frontier import RedisFrontier

        keys = ClusterKeys.from_settings(self.settings, opts.spider)
        frontier = RedisFrontier(connect(self.settings), keys, lease=0.0)
        if opts.reset:
            frontier.clear()
            print(f"Deleted the Redis keys of {keys.queue}")
        length = frontier.push_seeds(seeds)
        print(f"Pushed {len(seeds)} seed URLs to {keys.start_urls} at {mask_url(redis_url(self.settings))}"
              f" ({length} waiting)")

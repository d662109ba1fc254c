"""``scrapy topic-train -a train=URL_OR_PATH[,...]|@file [-a seeds=...] [-a negatives=...]
[-a labels=database|@file] [-a topic=@saved.json] -o topic.json``: learn a topic from
sample pages, or learn a saved one again with more labelled pages, and save it as a
topic file, for ``scrapy crawl topic -a topic=@topic.json``.

The samples, negatives and background are read exactly as a crawl reads them
(robots.txt, the user agent and the per-host delay apply): the background is sampled
from the seeds' sites, or the http(s) samples' sites without seeds. The topic is written
to ``-o`` through the ``TOPIC_TRAIN_OUTPUT`` setting, and no page is crawled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.utils.conf import arglist_to_dict

from topicspider.commands.crawl import Command as CrawlCommand

if TYPE_CHECKING:
    import argparse

SPIDER = "topic"


class Command(CrawlCommand):
    need_seeds = False
    stores_pages = False

    def syntax(self) -> str:
        return "-a train=URL_OR_PATH[,...]|@file|-a labels=database|@file -o FILE [options]"

    def short_desc(self) -> str:
        return "Learn a topic from sample pages and write it as a topic file"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        ScrapyCommand.add_options(self, parser)
        parser.add_argument("-a", dest="spargs", action="append", default=[], metavar="NAME=VALUE",
                            help="spider argument: train=... or labels=... (one is required); seeds=..., "
                                 "negatives=..., topic=@saved.json; TOPIC_* settings with -s")
        parser.add_argument("-o", "--output", metavar="FILE", required=True, help="the topic file to write")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        ScrapyCommand.process_options(self, args, opts)
        try:
            opts.spargs = arglist_to_dict(opts.spargs)
        except ValueError:
            raise UsageError("Invalid -a value, use -a NAME=VALUE", print_help=False) from None
        if not (opts.spargs.get("train", "").strip() or opts.spargs.get("labels", "").strip()):
            raise UsageError("give the samples: -a train=URL_OR_PATH[,...], -a train=@file or -a labels=...",
                             print_help=False)
        assert self.settings is not None
        self.settings.set("TOPIC_TRAIN_OUTPUT", opts.output, priority="cmdline")
        # The topic file is the only output: no crawl log, report file, database or live status.
        for name in ("CRAWL_LOG", "STATS_FILE"):
            self.settings.set(name, "", priority="cmdline")
        for name in ("STATUS_INTERVAL", "CONTROL_INTERVAL"):
            self.settings.set(name, 0, priority="cmdline")
        self.settings.set("ITEM_PIPELINES", {}, priority="cmdline")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("topic-train takes no positional arguments")
        super().run([SPIDER], opts)

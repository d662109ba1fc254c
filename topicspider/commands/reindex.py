"""``scrapy reindex WARC_DIR``: the pages a crawl archived (``WARC_DIR``), read again
without fetching anything: scored against the topic given now, indexed for search and
stored, as the crawl would have stored them.

It runs the ``topic`` spider with ``WARC_REPLAY_DIR`` set
(:mod:`topicspider.middlewares.replay`): every page the crawl fetched (a 2xx response
the archive's index gives a crawl depth) is a start request at that depth, answered from
the archive, and no link is followed. The pages go into ``DATABASE_URL``, which must hold none yet, so that no
page of another topic stays among them. The report and the stats are a crawl's. A bad
directory, argument or database gets one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError
from scrapy.settings import SETTINGS_PRIORITIES

from topicspider.commands.crawl import Command as CrawlCommand
from topicspider.config import ConfigError
from topicspider.middlewares.replay import check_replay_dir
from topicspider.storage import open_store
from topicspider.urls import mask_url

if TYPE_CHECKING:
    import argparse

# A replay waits on no server: many pages at once, with no delay between them.
REPLAY_SETTINGS = {
    "DOWNLOAD_DELAY": 0,
    "DOWNLOAD_DELAY_JITTER": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 32,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
    "ROBOTSTXT_OBEY": False,  # the archived pages were fetched under it already
    "WARC_DIR": "",  # replayed responses are in the archive already
    "CRAWL_LOG": "",
}
# Spider arguments that would fetch (topic samples, their background) or crawl.
REFUSED_ARGUMENTS = ("seeds", "depth", "train", "negatives")


class Command(CrawlCommand):
    need_seeds = False

    def syntax(self) -> str:
        return "WARC_DIR [-a topic=...] [-s DATABASE_URL=...]"

    def short_desc(self) -> str:
        return "Read the pages archived in WARC_DIR again, with no fetching: score, index and store them"

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        for name, value in REPLAY_SETTINGS.items():
            if (self.settings.getpriority(name) or 0) < SETTINGS_PRIORITIES["cmdline"]:  # -s wins
                self.settings.set(name, value, priority="cmdline")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give exactly one WARC directory (a WARC_DIR a crawl archived into)")
        assert self.settings is not None
        self.settings.set("WARC_REPLAY_DIR", args[0], priority="cmdline")
        try:
            check_replay_dir(args[0])
            _check_arguments(opts.spargs)
            _check_empty(self.settings.get("DATABASE_URL") or "")
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        super().run(["topic"], opts)


def _check_arguments(arguments: dict[str, Any]) -> None:
    for name in REFUSED_ARGUMENTS:
        if name in arguments:
            hint = (" (learn the topic first: scrapy topic-train ... -o topic.json, then -a topic=@topic.json)"
                    if name in ("train", "negatives") else "")
            raise ConfigError(f"scrapy reindex takes no -a {name}=: it reads the archive, it fetches nothing{hint}")


def _check_empty(database_url: str) -> None:
    store = open_store(database_url)
    try:
        pages = store.transaction(_count_pages)
    finally:
        store.close()
    if pages:
        raise ConfigError(f"the database {mask_url(database_url) or 'topicspider.db'} already holds {pages} pages:"
                          " reindex into a new one (-s DATABASE_URL=sqlite:///reindexed.db)")


def _count_pages(cursor: Any, dialect: Any) -> int:
    cursor.execute("SELECT COUNT(*) FROM pages")
    return int(cursor.fetchone()[0])


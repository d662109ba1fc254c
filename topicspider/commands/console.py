"""``scrapy console``: the web console (:mod:`topicspider.console.app`), served by
waitress on ``CONSOLE_HOST:CONSOLE_PORT`` (127.0.0.1:8070 by default).

Binding to anything but a loopback address needs an access token (``--token``, or the
``TOPICSPIDER_CONSOLE_TOKEN`` environment variable, which keeps it out of process
lists, or ``CONSOLE_TOKEN``); without one the console refuses to start. Crawls it starts
run as local processes under ``CONSOLE_RUNS_DIR``, or as jobs of ``SCRAPYD_PROJECT`` when
``SCRAPYD_URL`` is set; its own ``-s`` settings go to each (but ``CONSOLE_*`` and any
holding a password). A crawl page refreshes every ``CONSOLE_REFRESH`` seconds.
A bad setting, database or address gets one line and exit status 2.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import SETTINGS_PRIORITIES

from topicspider.cluster import redis_url
from topicspider.config import ConfigError, get_float, get_int
from topicspider.console.runs import TOKEN_ENV
from topicspider.storage import open_store
from topicspider.urls import is_loopback, mask_url

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from scrapy.settings import BaseSettings

    from topicspider.cluster.frontier import RedisFrontier
    from topicspider.console.app import ConsoleConfig

MIN_TOKEN_CHARS = 16
THREADS = 8


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "[--host HOST] [--port PORT] [--token TOKEN]"

    def short_desc(self) -> str:
        return "Serve the web console: start, watch and steer crawls, search the pages"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--host", help="address to listen on (default CONSOLE_HOST, 127.0.0.1)")
        parser.add_argument("--port", type=int, help="port (default CONSOLE_PORT, 8070)")
        parser.add_argument("--token", help=f"access token, required off loopback (or ${TOKEN_ENV})")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("scrapy console takes no arguments")
        assert self.settings is not None
        settings = self.settings
        host = opts.host or settings.get("CONSOLE_HOST")
        token = opts.token or os.environ.get(TOKEN_ENV, "") or settings.get("CONSOLE_TOKEN") or ""
        try:
            port = opts.port if opts.port is not None else get_int(settings, "CONSOLE_PORT")
            config = self._config(settings, host, port, token)
            from waitress.server import create_server

            from topicspider.console.app import create_app

            server = create_server(create_app(config), host=host, port=port, threads=THREADS)
        except (ConfigError, OSError) as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        logging.getLogger("waitress").setLevel(logging.WARNING)
        where = f"http://{'[' + host + ']' if ':' in host else host}:{server.effective_port}/"
        print(f"topicspider console on {where} (database {mask_url(config.database_url)}; Ctrl-C stops it, "
              "crawls it started go on)", flush=True)
        try:
            server.run()
        except KeyboardInterrupt:
            pass
        finally:
            server.close()

    @staticmethod
    def _config(settings: BaseSettings, host: str, port: int, token: str) -> ConsoleConfig:
        from topicspider.console.app import ConsoleConfig

        if not 0 <= port <= 65535:
            raise ConfigError(f"the console's port must be 0 to 65535, got {port}")
        loopback = is_loopback(host)
        if not loopback:
            if not token:
                raise ConfigError(f"listening on {host!r} (not loopback) needs an access token: --token or ${TOKEN_ENV}")
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(f"the access token must be at least {MIN_TOKEN_CHARS} characters")
        try:
            socket.getaddrinfo(host, port)
        except socket.gaierror as exc:
            raise ConfigError(f"CONSOLE_HOST {host!r}: {exc}") from None
        database_url = settings.get("DATABASE_URL") or ""
        open_store(database_url).close()
        cluster = _cluster_frontier(settings)
        return ConsoleConfig(
            database_url=database_url, runs_dir=Path(settings.get("CONSOLE_RUNS_DIR")), token=token,
            loopback=loopback, scrapyd_url=settings.get("SCRAPYD_URL") or "",
            scrapyd_project=settings.get("SCRAPYD_PROJECT") or "topicspider",
            push_seeds=_seed_pusher(cluster), dead_letters=_dead_letter_reader(cluster),
            refresh_seconds=get_float(settings, "CONSOLE_REFRESH"),
            crawl_settings=command_line_settings(settings), warc_dir=absolute_warc_dir(settings),
        )


def absolute_warc_dir(settings: BaseSettings) -> str:
    """``WARC_DIR`` from the console's working directory: its crawls run in others."""
    warc_dir = settings.get("WARC_DIR") or ""
    return str(Path(warc_dir).resolve()) if warc_dir else ""


def command_line_settings(settings: BaseSettings) -> dict[str, str]:
    """The settings given with ``-s`` on the console's command line (``WARC_DIR`` made
    absolute, as the crawls' database is: they run in directories of their own)."""
    given = {name: str(value) for name, value in settings.items()
             if settings.getpriority(name) == SETTINGS_PRIORITIES["cmdline"]}
    if "WARC_DIR" in given:
        given["WARC_DIR"] = absolute_warc_dir(settings)
    return given


def _cluster_frontier(settings: BaseSettings) -> tuple[RedisFrontier, str] | None:
    """Distributed mode: the shared frontier of the crawl these Redis settings name, and
    that crawl's id (``redis:topic:requests``); None without ``REDIS_URL``."""
    if not redis_url(settings):
        return None
    from topicspider.cluster import ClusterKeys, check_server, connect
    from topicspider.cluster.frontier import RedisFrontier
    from topicspider.storage.seen import cluster_job_name

    check_server(settings)
    keys = ClusterKeys.from_settings(settings, "topic")
    return RedisFrontier(connect(settings), keys, lease=0.0), cluster_job_name(keys)


def _dead_letter_reader(cluster: tuple[RedisFrontier, str] | None) -> Callable[[str, int], tuple[int, list[Any]]] | None:
    """A function reading the latest dead letters of the cluster's crawl (none for another crawl)."""
    if cluster is None:
        return None
    frontier, name = cluster

    def read(crawl: str, limit: int) -> tuple[int, list[Any]]:
        return frontier.dead_letters(limit) if crawl == name else (0, [])

    return read


def _seed_pusher(cluster: tuple[RedisFrontier, str] | None) -> Callable[[str, list[str]], int] | None:
    """A function pushing URLs to the cluster's crawl's Redis start list."""
    if cluster is None:
        return None
    from topicspider.console.runs import RunError

    frontier, name = cluster

    def push(crawl: str, urls: list[str]) -> int:
        if crawl != name:
            raise RunError(f"this console's Redis settings name the crawl {name}, not {crawl}")
        return frontier.push_seeds(urls)

    return push

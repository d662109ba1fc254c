"""Fixtures: local web sites served by a subprocess, and real ``scrapy crawl`` runs."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from topicspider.ledger import imbalance, ledger_line, ledger_of
from topicspider.localsite import spawn
from topicspider.runner import crawl_command, project_env


@dataclass
class Site:
    """A running local site: its base URL and the requests it has served."""

    url: str
    log_path: Path

    def requests(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        # The server may be writing a line at this moment: only whole lines count.
        complete = self.log_path.read_text().rpartition("\n")[0]
        return [json.loads(line) for line in complete.splitlines()]

    def paths(self, *, robots: bool = False) -> list[str]:
        return [r["path"] for r in self.requests() if robots or r["path"] != "/robots.txt"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(root, host=...)`` starts ``topicspider.localsite`` on a free port of a
    loopback address (127.0.0.2 and up are distinct hosts to the crawler)."""
    processes: list[subprocess.Popen[str]] = []

    def start(root: Path, host: str = "127.0.0.1") -> Site:
        log_path = tmp_path / f"server-{len(processes)}.log"
        process, port = spawn(root, "--log", str(log_path), "--host", host)
        processes.append(process)
        return Site(f"http://{host}:{port}", log_path)

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class CrawlResult:
    returncode: int
    stdout: str
    stderr: str
    workdir: Path

    @property
    def stats(self) -> dict[str, Any]:
        return json.loads((self.workdir / "stats.json").read_text())["stats"]

    @property
    def report(self) -> dict[str, Any]:
        return json.loads((self.workdir / "stats.json").read_text())["report"]

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.workdir / "topicspider.db") as connection:
            return connection.execute(sql, params).fetchall()

    def pages(self) -> dict[str, str]:
        """Stored pages: canonical URL -> title."""
        return dict(self.rows("SELECT url, title FROM pages"))


def assert_ledger(stats: dict[str, Any]) -> None:
    """Every URL the crawl queued ended in exactly one state, and none is left waiting
    if the crawl finished."""
    ledger = ledger_of(stats)
    assert ledger, "the crawl kept no ledger"
    assert imbalance(ledger) == 0, ledger_line(ledger)
    if stats.get("finish_reason") == "finished":
        assert ledger.get("waiting", 0) == 0, ledger_line(ledger)


def stop_crawl_when(command: list[str], cwd: Path, due: Callable[[], bool], signum: int = signal.SIGINT,
                    *, stderr: Path | None = None, poll: float = 0.01) -> int:
    """Start ``command`` in ``cwd``, send it ``signum`` once ``due()`` holds (or it has
    ended, or after 60 s), and return its exit status. Its log goes to ``stderr`` if given."""
    with (stderr or Path("/dev/null")).open("w") as log:
        crawler = subprocess.Popen(command, cwd=cwd, env=project_env(), stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while not due() and crawler.poll() is None and time.monotonic() < deadline:
        time.sleep(poll)
    crawler.send_signal(signum)
    return crawler.wait(timeout=60)


# The end of a ``python -c`` script that patched part of topicspider: Scrapy's command
# line, with the command's own arguments.
_SCRAPY_AFTER_PATCH = """
import sys
from scrapy.cmdline import execute
sys.argv = ["scrapy", *sys.argv[1:]]
execute()
"""


def patched_command(command: list[str], patch: str) -> list[str]:
    """``command`` (``python -m scrapy ...``) run as ``python -c``, ``patch`` first: a
    crawl with one of topicspider's functions replaced, as a bug or a failing server
    would make it behave."""
    assert command[1:3] == ["-m", "scrapy"], command[:3]
    return [command[0], "-c", patch + _SCRAPY_AFTER_PATCH, *command[3:]]


def run_project(command: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd``, with the project's settings, output captured."""
    return subprocess.run(command, cwd=cwd, env=project_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def crawl(tmp_path: Path) -> Any:
    """``crawl(seeds, depth=..., settings={...}, topic=...)`` runs ``scrapy crawl topic`` in a
    subprocess, in a work directory of its own, with politeness delays off."""
    workdir = tmp_path / "work"
    workdir.mkdir()

    def run(seeds: str, *, depth: int | str | None = None, settings: dict[str, Any] | None = None,
            timeout: float = 120, **arguments: str) -> CrawlResult:
        command = crawl_command(seeds, depth, {"DOWNLOAD_DELAY": 0, **(settings or {})}, **arguments)
        done = run_project(command, workdir, timeout)
        result = CrawlResult(done.returncode, done.stdout, done.stderr, workdir)
        # Every crawl of the suite that ran keeps a ledger that adds up; a distributed
        # crawl's is the whole cluster's, checked once its workers have all ended
        # (tests/test_cluster.py, finish).
        if done.returncode == 0 and (workdir / "stats.json").exists() and "REDIS_URL" not in (settings or {}):
            assert_ledger(result.stats)
        return result

    return run


from tests.services import (  # noqa: E402,F401 (fixtures)
    mysql_server,
    mysql_url,
    private_mariadb,
    private_redis,
    redis_crawl,
    redis_server,
    scrapyd,
    veth_network,
)

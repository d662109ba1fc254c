"""The progress line: made without a crawler; logged by a real crawl writing to a pipe,
and drawn live on a terminal (a pseudo-terminal here), never mixed with log records."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading

from conftest import run_project

from topicspider.extensions.progress import CLEAR_LINE, progress_line
from topicspider.localsite import generate_site
from topicspider.runner import crawl_command, project_env

REPORT = {"pages_fetched": 1234, "pages_stored": 1100, "errors": 3}
LINE = re.compile(r"Progress: fetched (\d+) · stored (\d+) · ([\d.]+) pages/s · queued (\d+)(?: · depth [^·]+)? · errors 0")


def test_the_line_says_what_the_crawl_has_done() -> None:
    line = progress_line({**REPORT, "pages_relevant": 900, "pages_irrelevant": 200}, 45.25, 532,
                         {"c.cn": 3, "a.cn": 2, "b.cn": 2, "d.cn": 3})
    assert line == ("fetched 1,234 · stored 1,100 · 45.2 pages/s · queued 532 · depth a.cn 2, b.cn 2, c.cn 3 "
                    "(+1 sites) · relevant 900, irrelevant 200 · errors 3")
    assert progress_line(REPORT, 0.0, 0, {}) == "fetched 1,234 · stored 1,100 · 0.0 pages/s · queued 0 · errors 3"


def test_a_crawl_logs_the_line_every_interval_instead_of_logstats(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 80, 3)
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=10, settings={"PROGRESS_INTERVAL": 0.2, "DOWNLOAD_DELAY": 0.02,
                                                       "DOWNLOAD_DELAY_JITTER": 0})

    assert result.returncode == 0, result.stderr[-2000:]
    lines = [LINE.search(line) for line in result.stderr.splitlines() if "Progress:" in line]
    assert len(lines) >= 3 and all(lines), result.stderr[-3000:]
    fetched = [int(match.group(1)) for match in lines if match]
    assert fetched == sorted(fetched) and 0 < fetched[-1] <= 80
    assert any(float(match.group(3)) > 0 for match in lines if match)
    assert "Crawled " not in result.stderr  # Scrapy's LogStats line, replaced


def test_on_a_terminal_the_line_is_live_and_log_records_clear_it(tmp_path, serve) -> None:
    generate_site(tmp_path / "site", 60, 3)
    site = serve(tmp_path / "site")
    (tmp_path / "work").mkdir()
    master, slave = pty.openpty()
    command = crawl_command(site.url + "/", 10, {"DOWNLOAD_DELAY": 0.05, "DOWNLOAD_DELAY_JITTER": 0})
    process = subprocess.Popen(command, cwd=tmp_path / "work", env={**project_env(), "TERM": "xterm"},
                               stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    received: list[bytes] = []

    def drain() -> None:  # the child must never block on a full terminal
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            received.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    assert process.wait(timeout=120) == 0
    reader.join(timeout=10)
    os.close(master)
    output = b"".join(received).decode("utf-8", "replace")

    drawn = re.findall(re.escape(CLEAR_LINE) + r"fetched (\d+) · stored", output)
    assert len(drawn) >= 2, output[-3000:]
    assert "Progress:" not in output  # drawn, not logged
    # Every log record starts at the beginning of a line: after a newline, or after the
    # sequence that cleared the live line.
    for record in re.finditer(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[", output):
        before = output[max(0, record.start() - len(CLEAR_LINE)):record.start()]
        assert record.start() == 0 or before.endswith(("\n", CLEAR_LINE)), \
            output[max(0, record.start() - 200):record.start() + 80]


def test_a_negative_interval_is_one_error_line(tmp_path) -> None:
    done = run_project(crawl_command("http://127.0.0.1:1/", 1, {"PROGRESS_INTERVAL": -1}), tmp_path)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert done.returncode == 2 and errors == [
        "topicspider: error: PROGRESS_INTERVAL must be at least 0.0, got -1.0"], done.stderr[-2000:]

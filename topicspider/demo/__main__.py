"""``python -m topicspider.demo``: serve the bundled sample site on localhost, crawl it
with ``scrapy crawl topic``, and show what was stored and where.

Everything it writes goes to ``demo-output/`` in the working directory.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from topicspider.runner import REPO, crawl_command, project_env

SITE = Path(__file__).resolve().parent / "site"
OUTPUT = Path("demo-output")


def start_site() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "topicspider.localsite", str(SITE), "--log", str((OUTPUT / "server.log").resolve())],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}/"


def run_crawl(seed: str) -> int:
    settings = {
        "DATABASE_URL": f"sqlite:///{OUTPUT / 'topicspider.db'}",
        "CRAWL_LOG": str(OUTPUT / "crawl.log"),
        "STATS_FILE": str(OUTPUT / "stats.json"),
        # Polite even to ourselves, but quick enough for a demo.
        "DOWNLOAD_DELAY": "0.2",
        "LOG_LEVEL": "WARNING",
    }
    print(f"$ scrapy crawl topic -a seeds={seed} -a depth=3  (sample site served from {SITE})", flush=True)
    return subprocess.run(crawl_command(seed, 3, settings), env=project_env(), check=False).returncode


def show_results() -> None:
    with sqlite3.connect(OUTPUT / "topicspider.db") as db:
        pages = db.execute("SELECT depth, url, title, encoding FROM pages ORDER BY depth, url").fetchall()
        emails = db.execute("SELECT DISTINCT email FROM emails ORDER BY email").fetchall()
    print(f"\nStored pages ({len(pages)}):")
    for depth, url, title, encoding in pages:
        print(f"  [{depth}] {title}  <{url}>  ({encoding})")
    print(f"\nE-mail addresses ({len(emails)}): " + ", ".join(email for (email,) in emails))
    print(f"\nData: {OUTPUT / 'topicspider.db'} (SQLite), fetch log {OUTPUT / 'crawl.log'}, "
          f"report {OUTPUT / 'stats.json'}")


def main() -> int:
    OUTPUT.mkdir(exist_ok=True)
    for name in ("topicspider.db", "crawl.log", "server.log"):
        (OUTPUT / name).unlink(missing_ok=True)
    server, seed = start_site()
    try:
        status = run_crawl(seed)
    finally:
        server.terminate()
        server.wait(timeout=10)
    if status != 0:
        return status
    show_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m topicspider.demo``: serve the bundled sample site on localhost, crawl it
with ``scrapy crawl topic`` against a keyword topic, and show what was stored and where.

The demo stores and follows every page (``TOPIC_STORE_ALL``, ``TOPIC_FOLLOW_ALL``) so
that each page's score can be seen; a real crawl keeps only the relevant ones.

Everything it writes goes to ``demo-output/`` in the working directory.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from topicspider.localsite import spawn
from topicspider.runner import crawl_command, project_env

SITE = Path(__file__).resolve().parent / "site"
OUTPUT = Path("demo-output")
TOPIC = "电子表格,公式,单元格,试算表,spreadsheet,formula"


def start_site() -> tuple[subprocess.Popen[str], str]:
    server, port = spawn(SITE, "--log", str((OUTPUT / "server.log").resolve()))
    return server, f"http://127.0.0.1:{port}/"


def run_crawl(seed: str) -> int:
    settings = {
        "DATABASE_URL": f"sqlite:///{OUTPUT / 'topicspider.db'}",
        "CRAWL_LOG": str(OUTPUT / "crawl.log"),
        "STATS_FILE": str(OUTPUT / "stats.json"),
        # Polite even to ourselves, but quick enough for a demo.
        "DOWNLOAD_DELAY": "0.2",
        "LOG_LEVEL": "WARNING",
        "TOPIC_STORE_ALL": "True",
        "TOPIC_FOLLOW_ALL": "True",
    }
    print(f"$ scrapy crawl topic -a seeds={seed} -a depth=3 -a topic={TOPIC} -s TOPIC_STORE_ALL=True "
          f"-s TOPIC_FOLLOW_ALL=True  (sample site served from {SITE})", flush=True)
    command = crawl_command(seed, 3, settings, topic=TOPIC)
    return subprocess.run(command, env=project_env(), check=False).returncode


def show_results() -> None:
    with sqlite3.connect(OUTPUT / "topicspider.db") as db:
        pages = db.execute("SELECT depth, url, title, encoding, relevance, relevance_terms FROM pages "
                           "ORDER BY depth, url").fetchall()
        emails = db.execute("SELECT DISTINCT email FROM emails ORDER BY email").fetchall()
    # The topic's own threshold, as the crawl report gives it.
    threshold = json.loads((OUTPUT / "stats.json").read_text("utf-8"))["report"]["relevance_threshold"]
    print(f"\nStored pages ({len(pages)}), with their topic relevance (* = relevant, at least {threshold}) "
          "and the terms that weighed most:")
    for depth, url, title, encoding, relevance, terms in pages:
        mark = "*" if relevance >= threshold else " "
        why = f"  [{terms}]" if terms else ""
        print(f"  {mark} {relevance:4.2f} [{depth}] {title}  <{url}>  ({encoding}){why}")
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

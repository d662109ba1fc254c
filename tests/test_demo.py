"""The README's demo: the bundled sample site, crawled for real."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from conftest import run_project


def test_demo_crawls_the_sample_site(tmp_path: Path) -> None:
    done = run_project([sys.executable, "-m", "topicspider.demo"], tmp_path)

    assert done.returncode == 0, done.stderr[-2000:]
    output = tmp_path / "demo-output"
    with sqlite3.connect(output / "topicspider.db") as db:
        titles = {url.split("/", 3)[3]: title for url, title in db.execute("SELECT url, title FROM pages")}
        emails = {email for (email,) in db.execute("SELECT email FROM emails")}
    assert titles["news"] == "行业新闻"  # GBK with no declaration
    assert titles["news/big5.html"] == "繁體新聞：試算表公式"
    assert titles["guide/english.html"] == "Spreadsheet basics in English"
    assert "private/drafts.html" not in titles  # robots.txt
    assert emails == {"editor@example.cn", "news@example.cn", "partner@example.cn", "service@example.cn"}
    fetched = [json.loads(line)["path"] for line in (output / "server.log").read_text().splitlines()]
    assert "/private/drafts.html" not in fetched
    assert "/style.css" not in fetched and "/logo.png" not in fetched
    with sqlite3.connect(output / "topicspider.db") as db:
        relevance = {url.split("/", 3)[3]: score for url, score in db.execute("SELECT url, relevance FROM pages")}
    assert relevance["guide/formulas.html"] > 2 and relevance["contact.html"] == 0.0
    report = json.loads((output / "stats.json").read_text())["report"]
    assert report["pages_stored"] == len(titles) and report["errors"] == 0
    # Each of three pages is also served as its directory's index.html: stored once.
    with sqlite3.connect(output / "topicspider.db") as db:
        aliases = {frozenset(path.split("/", 3)[3] for path in pair)
                   for pair in db.execute("SELECT url, duplicate_of FROM page_aliases")}
    assert aliases == {frozenset({"", "index.html"}), frozenset({"guide", "guide/index.html"}),
                       frozenset({"news", "news/index.html"})}
    assert report["duplicates_stored"] == 3
    assert report["pages_relevant"] + report["pages_irrelevant"] == len(titles) + 3, "every page fetched is scored"
    assert " WARNING: " not in done.stderr, "a crawl at the defaults starts and ends quietly"
    assert "relevance histogram" in done.stdout and "* " in done.stdout
    assert "topicspider crawl report" in done.stdout and "Stored pages" in done.stdout

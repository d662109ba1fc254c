"""``scrapy reindex WARC_DIR``: the pages a crawl archived, read again without fetching
(a new topic, a new search index), against a real crawl of the same site."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

from conftest import assert_ledger, run_project

from topicspider.localsite import generate_site
from topicspider.runner import scrapy_command

TOPIC = "归档,测试"


def topic_site(root: Path) -> None:
    """Pages about the topic (every third) and pages not, one of them served gzipped."""
    generate_site(root, 24, 3, body_text=lambda n: "归档测试页面，归档的测试。" * 5 if n % 3 == 0 else
                  "天气预报：今天晴，明天多云。" * 5)
    page = root / "p3.html"
    page.write_bytes(gzip.compress(page.read_bytes()))
    (root / "p3.html.headers").write_text("Content-Encoding: gzip\nContent-Type: text/html; charset=utf-8\n")


def reindex(workdir: Path, *arguments: str) -> tuple[int, str, dict]:
    done = run_project(scrapy_command("reindex", *arguments), workdir)
    stats_file = workdir / "stats.json"
    stats = json.loads(stats_file.read_text())["stats"] if stats_file.exists() and done.returncode == 0 else {}
    return done.returncode, done.stderr, stats


def pages_of(database: Path) -> set[tuple[str, int, float, str]]:
    with sqlite3.connect(database) as db:
        return set(db.execute("SELECT url, depth, relevance, title FROM pages"))


def test_a_reindex_reads_the_archive_as_a_crawl_with_the_topic_would_have_read_the_site(
        tmp_path, serve, crawl) -> None:
    topic_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    archived = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc"})  # no topic: every page stored
    assert archived.returncode == 0, archived.stderr[-2000:]
    with_topic = crawl(site.url + "/", depth=10, topic=TOPIC, settings={
        "DATABASE_URL": "sqlite:///direct.db", "TOPIC_FOLLOW_ALL": True})
    assert with_topic.returncode == 0, with_topic.stderr[-2000:]
    fetched = len(site.requests())

    status, stderr, stats = reindex(archived.workdir, "warc", "-a", f"topic={TOPIC}",
                                    "-s", "DATABASE_URL=sqlite:///reindexed.db")

    assert status == 0, stderr[-2000:]
    assert len(site.requests()) == fetched, "nothing was fetched"
    reindexed, direct = pages_of(archived.workdir / "reindexed.db"), pages_of(archived.workdir / "direct.db")
    assert len(reindexed) == 8 and f"{site.url}/p3.html" in {url for url, *_ in reindexed}  # the gzipped one
    assert reindexed == direct, "the same pages, depths, scores and titles as a crawl with the topic"
    assert stats["replay/responses"] == 24 and stats["storage/pages_written"] == 8
    assert stats["ledger/dropped/irrelevant"] == 16 and "replay/not_archived" not in stats
    assert_ledger(stats)
    found = run_project(scrapy_command("search", "归档", "-n", "20", "-s", "DATABASE_URL=sqlite:///reindexed.db"),
                        archived.workdir)
    assert found.returncode == 0 and found.stdout.count(f"{site.url}/") == 8


def test_a_response_that_cannot_be_read_back_ends_as_an_error_and_the_rest_are_read(
        tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 30, 3)
    site = serve(tmp_path / "site")
    archived = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc", "WARC_MAX_SIZE": 4000})
    assert archived.returncode == 0, archived.stderr[-2000:]
    files = sorted((archived.workdir / "warc").glob("*.warc.gz"))
    assert len(files) > 3
    lines = [json.loads(line) for line in (archived.workdir / "warc" / "index.jsonl").read_text().splitlines() if line]
    lost = {line["url"] for line in lines if line["file"] == files[1].name and line["status"] == 200}
    assert lost
    files[1].write_bytes(b"not a WARC file")

    status, stderr, stats = reindex(archived.workdir, "warc", "-s", "DATABASE_URL=sqlite:///reindexed.db")

    assert status == 0, stderr[-2000:]
    assert stats["replay/unreadable"] == len(lost) == stats["ledger/error/ArchiveError"]
    assert len(pages_of(archived.workdir / "reindexed.db")) == 30 - len(lost)
    assert sum("could not be read" in line for line in stderr.splitlines()) == 1, "logged once"
    assert_ledger(stats)


def test_bad_input_is_one_error_line_before_anything_is_read(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 4, 2)
    site = serve(tmp_path / "site")
    archived = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc"})
    assert archived.returncode == 0, archived.stderr[-2000:]
    cases = [
        (("nowhere",), "WARC_REPLAY_DIR 'nowhere': no index.jsonl there"),
        (("warc",), "already holds 4 pages: reindex into a new one"),  # the crawl's own topicspider.db
        (("warc", "-a", "train=@samples.txt", "-s", "DATABASE_URL=sqlite:///new.db"), "then -a topic=@topic.json"),
        (("warc", "-a", "seeds=http://a.cn/", "-s", "DATABASE_URL=sqlite:///new.db"), "takes no -a seeds="),
    ]
    for arguments, message in cases:
        status, stderr, _ = reindex(archived.workdir, *arguments)
        errors = [line for line in stderr.splitlines() if "error" in line.lower()]
        assert status == 2 and len(errors) == 1 and message in errors[0], (arguments, stderr[-1000:])
    assert not (archived.workdir / "new.db").exists()

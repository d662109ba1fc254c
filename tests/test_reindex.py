"""``scrapy reindex WARC_DIR``: the pages a crawl archived, read again without fetching
(a new topic, a new search index), against a real crawl of the same site."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

from backports import zstd
from conftest import assert_ledger, run_project

from topicspider.localsite import generate_site
from topicspider.runner import scrapy_command

TOPIC = "归档,测试"


def topic_site(root: Path) -> None:
    """Pages about the topic (every third) and pages not, every one under a bar that
    names the topic's words (a template: only the background sample shows it is one);
    one page served gzipped, one in zstd."""
    bar = "导航：归档 测试 首页 关于 联系\n"
    generate_site(root, 24, 3, body_text=lambda n: bar + ("归档测试页面，归档的测试。" * 5 if n % 3 == 0 else
                                                          "天气预报：今天晴，明天多云。" * 5))
    for name, encoding, compress in (("p3.html", "gzip", gzip.compress), ("p6.html", "zstd", zstd.compress)):
        page = root / name
        page.write_bytes(compress(page.read_bytes()))
        (root / f"{name}.headers").write_text(f"Content-Encoding: {encoding}\nContent-Type: text/html; charset=utf-8\n")


def reindex(workdir: Path, *arguments: str) -> tuple[int, str, dict]:
    done = run_project(scrapy_command("reindex", *arguments), workdir)
    stats_file = workdir / "stats.json"
    stats = json.loads(stats_file.read_text())["stats"] if stats_file.exists() and done.returncode == 0 else {}
    return done.returncode, done.stderr, stats


def pages_of(database: Path) -> set[tuple[str, int, float, str]]:
    with sqlite3.connect(database) as db:
        return set(db.execute("SELECT url, depth, relevance, title FROM pages"))


def fetch_times(database: Path) -> dict[str, str]:
    with sqlite3.connect(database) as db:
        return dict(db.execute("SELECT url, fetched_at FROM pages"))


def archive_dates(directory: Path) -> dict[str, str]:
    """Each URL's WARC-Date, as pages' fetched_at is written."""
    lines = [json.loads(line) for line in (directory / "index.jsonl").read_text().splitlines() if line]
    return {line["url"]: line["date"].replace("Z", "+00:00") for line in lines}


def test_a_reindex_reads_the_archive_as_the_crawl_read_the_site(tmp_path, serve, crawl) -> None:
    topic_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    crawled = crawl(site.url + "/", depth=10, topic=TOPIC, settings={"WARC_DIR": "warc"})
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    assert crawled.stats["topic/template_blocks"] >= 1, "the bar is learnt as a template"
    fetched = len(site.requests())
    workdir = crawled.workdir

    status, stderr, stats = reindex(workdir, "warc", "-a", f"topic={TOPIC}", "-s", "DATABASE_URL=sqlite:///again.db")

    assert status == 0, stderr[-2000:]
    assert len(site.requests()) == fetched, "nothing was fetched"
    stored = pages_of(workdir / "topicspider.db")
    assert {url for url, *_ in stored} >= {f"{site.url}/p3.html", f"{site.url}/p6.html"}  # gzip and zstd
    assert 3 <= len(stored) < 24, "a focused crawl: the bar alone makes no page relevant"
    assert pages_of(workdir / "again.db") == stored, "the same pages, depths, scores and titles"
    dates = archive_dates(workdir / "warc")
    assert fetch_times(workdir / "again.db") == {url: dates[url] for url, *_ in stored}, "fetched when archived"
    assert stats["topic/template_blocks"] == crawled.stats["topic/template_blocks"]
    assert stats["replay/responses"] >= crawled.stats["pages/fetched"] and "replay/not_archived" not in stats
    assert_ledger(stats)

    status, stderr, stats = reindex(workdir, "warc", "-s", "DATABASE_URL=sqlite:///everything.db")
    assert status == 0, stderr[-2000:]
    every = pages_of(workdir / "everything.db")
    assert len(every) == crawled.stats["pages/fetched"], "every page the crawl fetched, none it only sampled"
    assert {url for url, *_ in stored} <= {url for url, *_ in every}
    found = run_project(scrapy_command("search", "天气", "-n", "30", "-s", "DATABASE_URL=sqlite:///everything.db"),
                        workdir)
    assert found.returncode == 0 and found.stdout.count(f"{site.url}/") == len(every) - len(stored)


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

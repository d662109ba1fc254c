"""The MySQL backend against real MariaDB servers: schema and upgrades, a crawl equal
to the same crawl into SQLite, re-crawls, URL states, an unreachable server, a server
restart mid-crawl, and spilled pages replayed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_project
from tests.services import PrivateMariaDB, free_port, mysql_connect, query
from topicspider.config import ConfigError
from topicspider.localsite import generate_site, page_html
from topicspider.runner import crawl_command, project_env
from topicspider.storage.mysql import MIGRATIONS, SCHEMA_VERSION, MySQLStore

TRICKY_TITLE = "O'Reilly 的 \"引号\" 和 emoji 😀; DROP TABLE pages; --"


def write_site(root: Path) -> None:
    """Pages with e-mails, a tricky title, a 404 link, a redirect and a page robots.txt forbids."""
    root.mkdir()
    pages = {
        "index.html": ("首页", "联系 webmaster@example.cn",
                       ["a.html", "b.html", "missing.html", "private/x.html", "old.html"]),
        "a.html": (TRICKY_TITLE, "写信给 a@example.cn 或 b@example.org", ["c.html"]),
        "b.html": ("第二页", "没有邮箱", ["c.html"]),
        "c.html": ("第三页 🚀", "sales [at] example [dot] com", []),
    }
    for path, (title, body, links) in pages.items():
        (root / path).write_text(page_html(title, body, links), encoding="utf-8")
    (root / "private").mkdir()
    (root / "private" / "x.html").write_text(page_html("secret", "", []), encoding="utf-8")
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n", encoding="utf-8")
    (root / "old.html").write_text("", encoding="utf-8")
    (root / "old.html.headers").write_text("Status: 301\nLocation: /c.html\n", encoding="utf-8")


def stored(rows: list[tuple[Any, ...]]) -> dict[str, tuple[str, list[str]]]:
    """url -> (title, sorted e-mails) from (url, title, email-or-None) rows."""
    pages: dict[str, tuple[str, list[str]]] = {}
    for url, title, email in rows:
        pages.setdefault(url, (title, []))
        if email:
            pages[url][1].append(email)
    return {url: (title, sorted(emails)) for url, (title, emails) in pages.items()}


PAGES_WITH_EMAILS = """
SELECT p.url, p.title, e.email FROM pages p LEFT JOIN emails e ON e.page_id = p.id
"""


def test_crawl_into_mysql_equals_the_same_crawl_into_sqlite(tmp_path, serve, crawl, mysql_url):
    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")

    into_sqlite = crawl(site.url + "/", depth=3)
    into_mysql = crawl(site.url + "/", depth=3, settings={"DATABASE_URL": mysql_url})

    assert into_sqlite.returncode == 0 and into_mysql.returncode == 0, into_mysql.stderr
    sqlite_pages = stored(into_sqlite.rows(PAGES_WITH_EMAILS))
    mysql_pages = stored(query(mysql_url, PAGES_WITH_EMAILS))
    assert mysql_pages == sqlite_pages
    assert mysql_pages[site.url + "/a.html"] == (TRICKY_TITLE, ["a@example.cn", "b@example.org"])
    assert len(mysql_pages) == 4
    assert into_mysql.stats["storage/pages_written"] == 4 and into_mysql.stats["storage/emails_written"] == 4
    assert query(mysql_url, "SELECT COUNT(*) FROM pages WHERE url_hash = UNHEX(MD5(url))") == [(4,)]


def test_url_states_show_the_crawl_job_in_sql(tmp_path, serve, crawl, mysql_url):
    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=3, settings={"DATABASE_URL": mysql_url})

    assert result.returncode == 0, result.stderr
    rows = query(mysql_url, "SELECT job, url, state, depth, http_status, last_error FROM urls")
    assert len({row[0] for row in rows}) == 1 and rows[0][0].startswith("topic-")
    states = {row[1].removeprefix(site.url): row[2:] for row in rows}
    assert states["/"] == ("done", 0, 200, None)
    # Two hops through a.html or b.html, or one through old.html's redirect: whichever
    # request for it came first (a redirect keeps its request's depth) is the URL's.
    assert states["/c.html"] in (("done", 2, 200, None), ("done", 1, 200, None))
    assert states["/missing.html"] == ("error", 1, 404, "HTTP 404")
    assert states["/private/x.html"][0] == "error" and states["/private/x.html"][3].startswith("ignored:")
    assert states["/old.html"] == ("done", 1, 301, None)
    assert len(states) == 7, "every URL the crawl met, once"
    assert result.stats["urlstate/updates"] == 13, "running and an outcome for each fetched URL, one for the refused"


def test_a_recrawl_updates_pages_in_place(tmp_path, serve, crawl, mysql_url):
    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    assert crawl(site.url + "/", depth=3, settings={"DATABASE_URL": mysql_url}).returncode == 0
    before = dict(query(mysql_url, "SELECT url, id FROM pages"))
    (tmp_path / "site" / "a.html").write_text(page_html("新标题", "改成 new@example.cn", ["c.html"]), encoding="utf-8")

    again = crawl(site.url + "/", depth=3, settings={"DATABASE_URL": mysql_url})

    assert again.returncode == 0, again.stderr
    assert dict(query(mysql_url, "SELECT url, id FROM pages")) == before, "same rows, same ids"
    pages = stored(query(mysql_url, PAGES_WITH_EMAILS))
    assert pages[site.url + "/a.html"] == ("新标题", ["new@example.cn"])
    assert query(mysql_url, "SELECT COUNT(*) FROM emails") == [(3,)]


def test_an_old_schema_is_upgraded_and_a_newer_one_refused(mysql_url):
    connection = mysql_connect(mysql_url)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE topicspider_schema (version INT NOT NULL)")
        for statement in MIGRATIONS[1]:
            cursor.execute(statement)
        cursor.execute("INSERT INTO topicspider_schema VALUES (1)")
        cursor.execute("INSERT INTO pages (url_hash, url, title, depth, http_status, fetched_at, text, content_type,"
                       " encoding, content_length) VALUES (UNHEX(MD5('http://a.cn/')), 'http://a.cn/', 'old', 0, 200,"
                       " NOW(), '', 'text/html', 'utf-8', 0)")

    MySQLStore(mysql_url).close()

    assert query(mysql_url, "SELECT MAX(version) FROM topicspider_schema") == [(SCHEMA_VERSION,)]
    assert query(mysql_url, "SELECT title FROM pages") == [("old",)]
    assert query(mysql_url, "SELECT COUNT(*) FROM urls") == [(0,)]
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO topicspider_schema VALUES (99)")
    with pytest.raises(ConfigError, match="schema version 99 is newer"):
        MySQLStore(mysql_url)
    connection.close()


def test_an_unreachable_server_is_one_line_naming_host_and_port(tmp_path, serve, crawl):
    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    port = free_port()

    result = crawl(site.url + "/", settings={"DATABASE_URL": f"mysql://crawler:S3cret-pw@127.0.0.1:{port}/corpus"})

    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"topicspider: error: cannot connect to MySQL at 127.0.0.1:{port}")
    assert "S3cret-pw" not in result.stderr + result.stdout
    assert site.requests() == []


def slow_site(root: Path, pages: int) -> int:
    generate_site(root, pages=pages, links_per_page=3)
    return pages


def start_crawl(workdir: Path, seed: str, database_url: str, **settings: Any) -> subprocess.Popen[str]:
    workdir.mkdir(exist_ok=True)
    command = crawl_command(seed, 10, {"DATABASE_URL": database_url, "DOWNLOAD_DELAY": 0.01,
                                       "STORAGE_BATCH_SIZE": 5, "STORAGE_FLUSH_INTERVAL": 0.1, **settings})
    return subprocess.Popen(command, cwd=workdir, env=project_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_rows(url: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if query(url, "SELECT COUNT(*) FROM pages")[0][0] >= at_least:
                return
        except Exception:  # noqa: BLE001 - schema not there yet
            pass
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} pages stored after {timeout} s")


def with_crawler_user(server: PrivateMariaDB, password: str) -> str:
    connection = mysql_connect(server.url("root", ""), database=False)
    with connection.cursor() as cursor:
        cursor.execute("CREATE DATABASE corpus CHARACTER SET utf8mb4")
        cursor.execute("CREATE USER 'crawler'@'%%' IDENTIFIED BY %s", (password,))
        cursor.execute("GRANT ALL ON corpus.* TO 'crawler'@'%'")
    connection.close()
    return server.url("crawler", password, "corpus")


def test_a_server_restart_mid_crawl_loses_nothing(tmp_path, serve, private_mariadb):
    password = "Pw-never-in-logs-42"
    url = with_crawler_user(private_mariadb, password)
    pages = slow_site(tmp_path / "site", 300)
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"

    crawler = start_crawl(workdir, site.url + "/", url)
    wait_for_rows(url, 30)
    private_mariadb.kill()
    time.sleep(2)  # the crawl goes on meanwhile, its writes failing
    private_mariadb.start()
    stdout, stderr = crawler.communicate(timeout=180)

    assert crawler.returncode == 0, stderr
    stats = json.loads((workdir / "stats.json").read_text())["stats"]
    assert stats["storage/retries"] >= 1 and stats.get("storage/pages_spilled", 0) == 0
    assert query(url, "SELECT COUNT(*) FROM pages") == [(pages,)]
    assert stats["storage/pages_written"] == pages
    everything = stdout + stderr + "".join(path.read_text() for path in workdir.iterdir() if path.is_file()
                                           and path.suffix in {".json", ".log"})
    assert password not in everything and "crawler:***@" in everything


def test_pages_the_database_cannot_take_are_spilled_then_replayed(tmp_path, serve, private_mariadb):
    url = with_crawler_user(private_mariadb, "pw")
    pages = slow_site(tmp_path / "site", 200)
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"

    crawler = start_crawl(workdir, site.url + "/", url, STORAGE_RETRY_TIMES=1, STORAGE_RETRY_DELAY=0.1)
    wait_for_rows(url, 20)
    private_mariadb.kill()
    stdout, stderr = crawler.communicate(timeout=180)

    assert crawler.returncode == 0, stderr
    stats = json.loads((workdir / "stats.json").read_text())["stats"]
    spilled = stats["storage/pages_spilled"]
    assert spilled > 0 and stats["storage/pages_written"] + spilled == pages
    assert stats.get("storage/pages_lost", 0) == 0
    assert "scrapy replay-spill topicspider-spill.jsonl" in stdout
    private_mariadb.start()

    replay = run_project([sys.executable, "-m", "scrapy", "replay-spill", "-s", f"DATABASE_URL={url}"], workdir)

    assert replay.returncode == 0, replay.stderr
    assert f"Stored {spilled} pages" in replay.stdout
    assert query(url, "SELECT COUNT(*) FROM pages") == [(pages,)]
    assert not (workdir / "topicspider-spill.jsonl").exists()


def test_the_urls_table_is_the_exact_store_behind_a_small_lru(tmp_path, serve, crawl, mysql_url):
    depths = generate_site(tmp_path / "site", pages=150, links_per_page=4)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=10, settings={"DATABASE_URL": mysql_url, "DUPEFILTER_LRU_CAPACITY": 10})

    assert result.returncode == 0, result.stderr
    requested = site.paths()
    assert len(requested) == len(set(requested)) == len(depths), "every URL fetched once"
    assert result.stats["dupefilter/store_lookups"] > 0 and result.stats["dupefilter/store_hits"] > 0
    assert query(mysql_url, "SELECT state, COUNT(*) FROM urls GROUP BY state") == [("done", len(depths))]
    assert query(mysql_url, "SELECT COUNT(*) FROM pages p JOIN urls u ON u.fingerprint = p.url_hash") == [(len(depths),)]


def test_credentials_come_from_the_url_or_the_environment(monkeypatch):
    from topicspider.storage.mysql import parse_mysql_url

    monkeypatch.delenv("MYSQL_USER", raising=False)
    monkeypatch.delenv("MYSQL_PASSWORD", raising=False)
    target = parse_mysql_url("mysql://bob:p%40ss@db.example.cn/corpus")
    assert (target.user, target.password, target.host, target.port, target.database) == \
        ("bob", "p@ss", "db.example.cn", 3306, "corpus")
    assert "p@ss" not in repr(target) and target.where == "db.example.cn:3306/corpus"
    with pytest.raises(ConfigError, match="no user"):
        parse_mysql_url("mysql://db.example.cn/corpus")
    monkeypatch.setenv("MYSQL_USER", "crawler")
    monkeypatch.setenv("MYSQL_PASSWORD", "from-env")
    target = parse_mysql_url("mysql://db.example.cn:3307/corpus")
    assert (target.user, target.password, target.port) == ("crawler", "from-env", 3307)
    with pytest.raises(ConfigError, match="options after"):
        parse_mysql_url("mysql://db.example.cn/corpus?ssl=1")


def test_a_url_state_only_moves_forward(mysql_url):
    from datetime import datetime

    from topicspider.storage.mysql import MySQLURLTable
    from topicspider.storage.seen import SeenURL, URLState

    table = MySQLURLTable(mysql_url, "job-1")
    fingerprint, url, now = b"f" * 16, "http://a.cn/x", datetime(2026, 11, 30, 12, 0, 0)
    table.add_many([SeenURL(fingerprint, url, 2)])
    table.set_states([URLState(fingerprint, url, 2, "done", now, 200)])
    table.set_states([URLState(fingerprint, url, 2, "running", now)])  # late, from another batch
    table.add_many([SeenURL(fingerprint, url, 2)])
    assert query(mysql_url, "SELECT state, http_status, last_error FROM urls") == [("done", 200, None)]
    table.set_states([URLState(b"g" * 16, "http://a.cn/y", 1, "error", now, 503, "HTTP 503")])
    table.set_states([URLState(b"g" * 16, "http://a.cn/y", 1, "running", now)])
    assert query(mysql_url, "SELECT state, http_status FROM urls WHERE url = 'http://a.cn/y'") == [("error", 503)]
    table.set_states([URLState(b"g" * 16, "http://a.cn/y", 1, "done", now, 200)])  # the retry succeeded
    assert query(mysql_url, "SELECT state, http_status, last_error FROM urls WHERE url = 'http://a.cn/y'") == \
        [("done", 200, None)]
    # g's row is the state log's alone: not a URL the dupefilter has written, so not seen
    # (a kill before the dupefilter's write would otherwise skip its link for good).
    assert table.contains_many([fingerprint, b"g" * 16, b"h" * 16]) == {fingerprint}
    assert MySQLURLTable(mysql_url, "job-2").count() == 0 and table.count() == 1
    table.close()


def test_relevance_terms_and_labels_in_mysql(mysql_url):
    from topicspider.items import PageItem
    from topicspider.storage.labels import labelled_pages, pages_by_url, set_label

    store = MySQLStore(mysql_url)
    pages = [PageItem(url=f"http://a.cn/{n}", title=f"页 {n}", depth=1, http_status=200,
                      fetched_at="2026-12-02T00:00:00+00:00", text="单元格 公式", relevance=0.4,
                      relevance_terms="单元格 0.300, 公式 0.100") for n in (1, 2)]
    store.write_pages(pages)
    ids = dict(query(mysql_url, "SELECT url, id FROM pages"))
    assert query(mysql_url, "SELECT DISTINCT relevance_terms FROM pages") == [("单元格 0.300, 公式 0.100",)]
    store.transaction(lambda cursor, dialect: set_label(cursor, dialect, ids["http://a.cn/2"], False), write=True)
    store.transaction(lambda cursor, dialect: set_label(cursor, dialect, ids["http://a.cn/1"], True), write=True)
    store.transaction(lambda cursor, dialect: set_label(cursor, dialect, ids["http://a.cn/2"], True), write=True)
    labelled = store.transaction(labelled_pages)
    assert [(page.url, page.relevant, page.title) for page in labelled] == [
        ("http://a.cn/1", True, "页 1"), ("http://a.cn/2", True, "页 2")]
    found, missing = store.transaction(lambda cursor, dialect: pages_by_url(
        cursor, dialect, {"http://a.cn/1": False, "http://a.cn/9": True}))
    assert [(page.url, page.relevant) for page in found] == [("http://a.cn/1", False)] and missing == ["http://a.cn/9"]
    store.close()

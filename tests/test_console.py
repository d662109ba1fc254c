"""The web console: a real ``scrapy console`` driven by headless Chromium (start a crawl
from the form, watch it, stop and resume it, search), and its guards through Flask's
test client (escaping, form checks, tokens, CSRF, hosts)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_project
from tests.console_tools import chromium, running_console, text_of, texts_of, wait_for
from topicspider.console.app import ConsoleConfig, create_app
from topicspider.items import PageItem
from topicspider.localsite import generate_site
from topicspider.search.terms import fts_token
from topicspider.runner import scrapy_command
from topicspider.storage import open_store
from topicspider.storage.crawls import WorkerStatus, put_status
from topicspider.storage.labels import labelled_pages

HOSTILE_TITLE = "<script>window.pwned=1</script> 新闻 hostile"
SITE_PAGES = 40


def write_site(root: Path) -> None:
    """A site on the topic (新闻, python) with one page whose title holds a script."""
    generate_site(root, pages=SITE_PAGES, links_per_page=2,
                  body_text=lambda i: f"今日新闻第{i}条：python 教程与新闻报道。\nNews about Python, item {i}.")
    page = root / "p1.html"
    escaped = HOSTILE_TITLE.replace("<", "&lt;").replace(">", "&gt;")
    page.write_text(page.read_text().replace("<title>Page /p1.html</title>", f"<title>{escaped}</title>"))


def count(driver: Any, name: str) -> int:
    return int(text_of(driver, f"count-{name}") or 0)


def shown(driver: Any, element_id: str, message: str) -> None:
    """Waits until the page (the one a form submission loads) shows ``message``."""
    wait_for(lambda: message in text_of(driver, element_id), timeout=15, what=f"{message!r} in #{element_id}")


def submit_start_form(driver: Any, seeds: str, depth: str, topic: str) -> None:
    for field, value in (("seeds", seeds), ("depth", depth), ("topic", topic)):
        box = driver.find_element("id", field)
        box.clear()
        box.send_keys(value)
    driver.find_element("id", "start").click()


# -- in a browser ------------------------------------------------------------------------


def test_bad_form_input_is_shown_on_the_page_and_starts_nothing(tmp_path: Path) -> None:
    with running_console(tmp_path) as base, chromium() as driver:
        driver.get(base)
        submit_start_form(driver, "", "2", "")
        shown(driver, "problem-seeds", "give at least one seed URL")
        assert "give at least one keyword" in text_of(driver, "problem-topic")

        submit_start_form(driver, "http://ok.example/ ftp://bad.example/x", "-1", "新闻")
        shown(driver, "problem-depth", "between 0 and 100")  # the new page has come
        assert "bad seed URL" in text_of(driver, "problem-seeds") and "ftp" in text_of(driver, "problem-seeds")
        assert not driver.find_elements("id", "problem-topic")
        assert driver.find_element("id", "seeds").get_attribute("value").startswith("http://ok.example/"), \
            "what was typed is kept"

        submit_start_form(driver, "not a url", "two", "   ")
        shown(driver, "problem-depth", "whole number")
        assert "bad seed URL" in text_of(driver, "problem-seeds")
        assert "give at least one keyword" in text_of(driver, "problem-topic")

    runs = tmp_path / "console-runs"
    assert not runs.exists() or not any(runs.iterdir()), "nothing was started"


def test_a_crawl_is_started_watched_stopped_resumed_and_searched_in_a_browser(tmp_path: Path, serve) -> None:
    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"
    workdir.mkdir()
    # No background sample: its pages, served to the crawl at once, would leave nothing to watch rise.
    settings = ["-s", "DOWNLOAD_DELAY=0.25", "-s", "DOWNLOAD_DELAY_JITTER=0", "-s", "STATUS_INTERVAL=0.5",
                "-s", "CONSOLE_REFRESH=0.5", "-s", "TOPIC_BACKGROUND_PAGES=0"]
    with running_console(workdir, *settings) as base, chromium() as driver:
        driver.get(base)
        submit_start_form(driver, site.url + "/", "3", "新闻, python")
        wait_for(lambda: "/crawls/console-" in driver.current_url, what="the crawl page")
        crawl = driver.current_url.rsplit("/", 1)[1]

        # The counters rise without a reload, and the charts are drawn.
        first = wait_for(lambda: count(driver, "pages_fetched") >= 3 and count(driver, "pages_fetched"),
                         what="pages fetched")
        wait_for(lambda: count(driver, "pages_fetched") > first, what="the counter to rise")
        wait_for(lambda: float(text_of(driver, "rate")) > 0, what="a rate")
        assert count(driver, "pages_relevant") > 0
        assert driver.execute_script(BLANK_CANVAS, "rate-chart") is False
        wait_for(lambda: driver.execute_script(BLANK_CANVAS, "histogram") is False, what="the histogram")

        # The index grows during the crawl.
        wait_for(lambda: searchable(workdir / "topicspider.db", "新闻"), timeout=15, what="indexed pages")
        assert text_of(driver, "process") == "running"

        # Stop: a clean stop, the JOBDIR kept.
        driver.find_element("id", "stop").click()
        wait_for(lambda: text_of(driver, "process") == "stopped", timeout=60, what="the stop")
        stopped_at = count(driver, "pages_fetched")
        assert stopped_at < SITE_PAGES, "stopped mid-crawl"
        jobdir = workdir / "console-runs" / crawl / "job"
        assert (jobdir / "requests.queue").is_dir()

        # Resume: the rest of the site, nothing fetched twice.
        driver.find_element("id", "resume").click()
        wait_for(lambda: text_of(driver, "process") == "finished", timeout=90, what="the resumed crawl")
        fetched = [path for path in site.paths() if path != "/favicon.ico"]
        assert len(fetched) == len(set(fetched)) > stopped_at

        # Search: a two-character Chinese word, an English word; the script title is text.
        box = driver.find_element("css selector", "header input[name=q]")
        box.send_keys("新闻")
        box.submit()
        wait_for(lambda: driver.find_elements("css selector", "li.result"), what="results")
        assert "pages match" in text_of(driver, "summary")
        marks = [mark.text for mark in driver.find_elements("css selector", "li.result mark")]
        assert "新闻" in marks
        titles = [link.text for link in driver.find_elements("css selector", "li.result a.title")]
        assert any(HOSTILE_TITLE in title for title in titles), titles
        assert driver.execute_script("return window.pwned === undefined") is True
        assert not driver.find_elements("css selector", "li.result script")

        driver.find_element("id", "q").clear()
        driver.find_element("id", "q").send_keys("Python")
        driver.find_element("id", "search").click()
        wait_for(lambda: "Python" in texts_of(driver, "li.result mark"), what="English results")

        driver.get(base + "emails")
        assert "webmaster@example.com" in driver.find_element("id", "emails").text

        driver.get(f"{base}crawls/{crawl}/log")
        assert "Spider closed (finished)" in driver.find_element("tag name", "main").text


def searchable(database: Path, term: str) -> int:
    with sqlite3.connect(database) as db:
        found = db.execute("SELECT doc FROM search_vocab WHERE term = ?", (fts_token(term),)).fetchone()
        return int(found[0]) if found else 0


BLANK_CANVAS = """
const canvas = document.getElementById(arguments[0]);
const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
for (let i = 3; i < pixels.length; i += 4) { if (pixels[i] !== 0) return false; }
return true;
"""


# -- through Flask's test client ------------------------------------------------------------


@pytest.fixture
def console(tmp_path: Path) -> Any:
    def make(**options: Any) -> Any:
        config = ConsoleConfig(database_url=f"sqlite:///{tmp_path}/console.db", runs_dir=tmp_path / "runs", **options)
        app = create_app(config)
        app.testing = True
        return app.test_client()

    return make


def csrf_of(client: Any, path: str = "/") -> str:
    page = client.get(path).get_data(as_text=True)
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def store_pages(tmp_path: Path, *pages: PageItem) -> None:
    store = open_store(f"sqlite:///{tmp_path}/console.db")
    store.write_pages(list(pages))
    store.close()


def page(url: str, title: str, text: str, emails: list[str] | None = None) -> PageItem:
    return PageItem(url=url, title=title, depth=0, http_status=200, fetched_at="2026-11-30T00:00:00+00:00",
                    text=text, emails=emails or [])


def test_crawled_text_is_escaped_in_every_page(console, tmp_path: Path) -> None:
    evil = '<img src=x onerror="alert(1)">'
    store_pages(tmp_path, page("http://a.cn/x", HOSTILE_TITLE, f"新闻 {evil}", [f"a{evil}@a.cn"]),
                page("javascript:alert(1)", "新闻 link", "新闻"))
    client = console()

    found = client.get("/search?q=新闻").get_data(as_text=True)
    emails = client.get("/emails").get_data(as_text=True)

    assert "<script>window.pwned" not in found and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in found
    assert "<img src=x" not in found + emails and "&lt;img src=x onerror=" in found
    assert 'href="javascript:' not in found
    assert "script-src 'self'" in client.get("/").headers["Content-Security-Policy"]


def test_a_stored_page_is_labelled_relevant_or_not_from_search(console, tmp_path: Path) -> None:
    scored = page("http://a.cn/calc", "电子表格 新闻", "新闻 单元格 公式")
    scored.relevance, scored.relevance_terms = 0.42, "单元格 0.210, 公式 0.100"
    store_pages(tmp_path, scored, page("http://a.cn/other", "新闻", "新闻"))
    client = console()
    found = client.get("/search?q=新闻").get_data(as_text=True)
    assert "why: 单元格 0.210, 公式 0.100" in found and found.count("not labelled") == 2
    token = csrf_of(client, "/search?q=新闻")
    after_calc = found.split('<div class="url">http://a.cn/calc</div>', 1)[1]
    page_id = int(after_calc.split('action="/pages/', 1)[1].split("/", 1)[0])

    marked = client.post(f"/pages/{page_id}/label", data={"label": "relevant", "csrf": token, "next": "/search?q=新闻"})
    assert marked.status_code == 302 and marked.headers["Location"].endswith("/search?q=%E6%96%B0%E9%97%BB")
    store = open_store(f"sqlite:///{tmp_path}/console.db")
    labelled = store.transaction(labelled_pages)
    assert [(entry.url, entry.relevant) for entry in labelled] == [("http://a.cn/calc", True)]
    assert "labelled relevant" in client.get("/search?q=新闻").get_data(as_text=True)

    client.post(f"/pages/{page_id}/label", data={"label": "irrelevant", "csrf": token})
    assert [entry.relevant for entry in store.transaction(labelled_pages)] == [False]
    client.post(f"/pages/{page_id}/label", data={"label": "clear", "csrf": token})
    assert store.transaction(labelled_pages) == []
    store.close()
    assert client.post(f"/pages/{page_id}/label", data={"label": "maybe", "csrf": token}).status_code == 400
    assert client.post("/pages/999/label", data={"label": "relevant", "csrf": token}).status_code == 404
    assert client.post(f"/pages/{page_id}/label", data={"label": "relevant"}).status_code == 400, "no CSRF token"
    outside = client.post(f"/pages/{page_id}/label", data={"label": "relevant", "csrf": token, "next": "//evil.cn/"})
    assert outside.headers["Location"].endswith("/") and "evil" not in outside.headers["Location"]


def test_live_status_of_several_workers_is_summed(console, tmp_path: Path) -> None:
    now = time.time()
    store = open_store(f"sqlite:///{tmp_path}/console.db")
    for worker, fetched, state in (("w1", 10, "running"), ("w2", 5, "finished")):
        status = {"report": {"pages_fetched": fetched, "pages_relevant": fetched - 1, "pages_irrelevant": 1,
                             "relevance_histogram": {"0.5": 1, "0.9": fetched - 1}},
                  "rate": 2.5, "queue": [["http://a.cn", 3]], "history": [[0, 0, 0], [2, fetched, 0]]}
        store.transaction(lambda c, d, w=worker, f=state, s=status: put_status(
            c, d, WorkerStatus("c1", w, f, now, s)), write=True)
    store.close()

    view = console().get("/api/crawls/c1").get_json()

    assert view["state"] == "running" and view["counts"]["pages_fetched"] == 15
    assert view["histogram"] == [["0.5", 2], ["0.9", 13]]
    assert view["rate"] == 2.5, "only running workers count towards the rate"
    assert view["queue"] == [["http://a.cn", 6]] and len(view["series"]) == 2
    assert console().get("/api/crawls/nope").status_code == 404


def test_a_form_without_its_csrf_token_is_refused(console, tmp_path: Path) -> None:
    client = console()
    client.get("/")

    refused = client.post("/crawls", data={"seeds": "http://a.cn/", "depth": "1", "topic": "新闻"})
    forged = client.post("/crawls", data={"seeds": "http://a.cn/", "depth": "1", "topic": "新闻", "csrf": "forged"})

    assert refused.status_code == forged.status_code == 400
    assert not any((tmp_path / "runs").iterdir()), "nothing was started"


def test_a_token_guards_every_page_and_the_api(console) -> None:
    client = console(token="s3cret-token-0123456789", loopback=False)

    assert client.get("/search?q=x").status_code == 302
    assert client.get("/api/crawls/x").status_code == 401
    assert client.get("/api/crawls/x", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/crawls/x", headers={"Authorization": "Bearer s3cret-token-0123456789"}).status_code == 404
    assert client.post("/login", data={"token": "wrong"}).status_code == 403
    signed_in = client.post("/login?next=/emails", data={"token": "s3cret-token-0123456789"})
    assert signed_in.status_code == 302 and signed_in.headers["Location"] == "/emails"
    assert client.get("/emails").status_code == 200


def test_without_a_token_only_loopback_host_names_are_served(console) -> None:
    client = console()

    assert client.get("/", headers={"Host": "127.0.0.1:8070"}).status_code == 200
    assert client.get("/", headers={"Host": "localhost"}).status_code == 200
    assert client.get("/", headers={"Host": "evil.example:8070"}).status_code == 403


def test_added_urls_and_blocks_reach_the_control_inbox_or_redis(console, tmp_path: Path, redis_crawl) -> None:
    from scrapy.settings import Settings

    from topicspider.commands.console import _cluster_frontier, _seed_pusher

    settings = Settings({"REDIS_URL": "", **redis_crawl.settings()})
    distributed = f"redis:{redis_crawl.prefix}:requests"
    store = open_store(f"sqlite:///{tmp_path}/console.db")
    for crawl in ("local-1", distributed, "redis:another:requests"):
        store.transaction(lambda c, d, k=crawl: put_status(c, d, WorkerStatus(k, "w", "running", time.time(), {})),
                          write=True)
    store.close()
    client = console(push_seeds=_seed_pusher(_cluster_frontier(settings)))
    token = csrf_of(client)

    bad = client.post("/crawls/local-1/add", data={"csrf": token, "urls": "nope"})
    assert bad.status_code == 400 and "bad added URL" in bad.get_data(as_text=True)
    bad_pattern = client.post("/crawls/local-1/block", data={"csrf": token, "pattern": "  "})
    assert bad_pattern.status_code == 400 and "empty URL pattern" in bad_pattern.get_data(as_text=True)

    assert client.post("/crawls/local-1/add", data={"csrf": token, "urls": "http://b.cn/\nhttp://c.cn/"}).status_code == 302
    assert client.post("/crawls/local-1/block", data={"csrf": token, "pattern": "*/tag/*"}).status_code == 302
    assert client.post(f"/crawls/{distributed}/add", data={"csrf": token, "urls": "http://d.cn/"}).status_code == 302
    other = client.post("/crawls/redis:another:requests/add", data={"csrf": token, "urls": "http://e.cn/"})

    with sqlite3.connect(tmp_path / "console.db") as db:
        rows = db.execute("SELECT crawl, action, argument FROM crawl_control ORDER BY id").fetchall()
    assert rows == [("local-1", "add", "http://b.cn/"), ("local-1", "add", "http://c.cn/"),
                    ("local-1", "block", "*/tag/*")]
    assert redis_crawl.client.lrange(f"{redis_crawl.prefix}:start_urls", 0, -1) == [b"http://d.cn/"], \
        "a distributed crawl's URLs go to its Redis start list"
    assert other.status_code == 400 and "name the crawl" in other.get_data(as_text=True)


def test_the_console_refuses_to_listen_off_loopback_without_a_token(tmp_path: Path) -> None:
    refused = run_project(scrapy_command("console", "--host", "0.0.0.0", "--port", "0"), tmp_path, timeout=60)
    short = run_project(scrapy_command("console", "--host", "0.0.0.0", "--port", "0", "--token", "short"),
                        tmp_path, timeout=60)

    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "topicspider: error: listening on '0.0.0.0' (not loopback) needs an access token: "
        "--token or $TOPICSPIDER_CONSOLE_TOKEN"]
    assert short.returncode == 2 and "at least 16 characters" in short.stderr


def test_a_bad_database_stops_the_console_before_it_listens(tmp_path: Path) -> None:
    done = run_project(scrapy_command("console", "-s", "DATABASE_URL=mysql://root:pw@127.0.0.1:1/x"), tmp_path,
                       timeout=60)

    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("topicspider: error: cannot connect to MySQL at 127.0.0.1:1")
    assert "pw@" not in done.stderr and "console on" not in done.stdout


# -- the control inbox in a real crawl ---------------------------------------------------


def test_a_running_crawl_takes_added_urls_and_blocks_from_its_inbox(tmp_path: Path, serve) -> None:
    from topicspider.localsite import page_html
    from topicspider.storage.crawls import add_controls

    root, other = tmp_path / "site", tmp_path / "other"
    for directory in (root, other):
        directory.mkdir()
    (root / "index.html").write_text(page_html("index", "新闻", [f"a{n}.html" for n in range(5)]))
    for n in range(5):
        (root / f"a{n}.html").write_text(page_html(f"a{n}", "新闻", [f"b{n}-{m}.html" for m in range(3)]))
        for m in range(3):
            (root / f"b{n}-{m}.html").write_text(page_html(f"b{n}-{m}", "新闻", []))
    (other / "index.html").write_text(page_html("other", "新闻", ["more.html"]))
    (other / "more.html").write_text(page_html("more", "新闻", []))
    site, second = serve(root), serve(other, host="127.0.0.2")
    workdir = tmp_path / "work"
    workdir.mkdir()
    database = f"sqlite:///{workdir}/topicspider.db"
    command = scrapy_command("crawl", "topic", "-a", f"seeds={site.url}/", "-a", "depth=3",
                             "-s", "CRAWL_ID=inbox-test", "-s", "DOWNLOAD_DELAY=0.3", "-s", "DOWNLOAD_DELAY_JITTER=0",
                             "-s", "CONTROL_INTERVAL=0.2", "-s", f"DATABASE_URL={database}")
    import subprocess

    from topicspider.runner import project_env

    crawl = subprocess.Popen(command, cwd=workdir, env=project_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: "/" in site.paths(), what="the first page")
        store = open_store(database)
        now = time.time()
        store.transaction(lambda c, d: (add_controls(c, d, "inbox-test", "block", [f"{site.url}/b*"], now),
                                        # A URL the links' filters refuse (too long) is refused from the console too.
                                        add_controls(c, d, "inbox-test", "add", [f"{second.url}/", "not a url",
                                                                                 f"{second.url}/{'x' * 3000}"], now)),
                          write=True)
        store.close()
        _, errors = crawl.communicate(timeout=120)
    finally:
        crawl.kill()
    assert crawl.returncode == 0, errors[-3000:]
    stats = json.loads((workdir / "stats.json").read_text())["stats"]

    assert not [path for path in site.paths() if path.startswith("/b")], "blocked pages were not fetched"
    assert stats["block/dropped"] == 15 and stats["block/patterns"] == 1
    assert sorted(second.paths()) == ["/", "/more.html"], "the added URL was crawled as a seed"
    assert stats["control/added"] == 1 and stats["control/bad"] == 2
    assert "Ignored control instruction" in errors and "refused by URLLENGTH_LIMIT (too_long)" in errors


# -- with scrapyd -----------------------------------------------------------------------------


def test_with_scrapyd_a_crawl_is_scheduled_watched_and_cancelled(tmp_path: Path, serve, console, scrapyd) -> None:
    import subprocess

    from tests.services import call, tool
    from tests.test_scrapyd import project_copy

    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    project = project_copy(tmp_path / "project", scrapyd)
    deployed = subprocess.run([tool("scrapyd-deploy"), "test"], cwd=project, capture_output=True, text=True,
                              timeout=120)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    # No background sample: pages served from it would end the crawl before it can be cancelled.
    client = console(scrapyd_url=scrapyd, crawl_settings={"DOWNLOAD_DELAY": "0.3", "STATUS_INTERVAL": "0.5",
                                                          "TOPIC_BACKGROUND_PAGES": "0"})

    started = client.post("/crawls", data={"csrf": csrf_of(client), "seeds": site.url + "/", "depth": "3",
                                           "topic_kind": "keywords", "topic": "新闻"})
    assert started.status_code == 302, started.get_data(as_text=True)
    crawl = started.headers["Location"].rsplit("/", 1)[1]
    run = json.loads((tmp_path / "runs" / crawl / "run.json").read_text())
    assert run["mode"] == "scrapyd" and run["job"] == crawl

    view = wait_for(lambda: (v := client.get(f"/api/crawls/{crawl}").get_json())["counts"].get("pages_fetched", 0) >= 2
                    and v, timeout=90, what="the job's live status")
    assert view["process"] == "running" and view["state"] == "running"

    page = client.post(f"/crawls/{crawl}/stop", data={"csrf": csrf_of(client, f"/crawls/{crawl}")},
                       follow_redirects=True)
    assert "Asked scrapyd to cancel the job" in page.get_data(as_text=True)
    wait_for(lambda: any(job["id"] == crawl for job in call(scrapyd, "listjobs.json?project=topicspider")["finished"]),
             timeout=60, what="the cancelled job")
    # scrapyd's job list is read at most once a second: both say so soon enough.
    final = wait_for(lambda: (v := client.get(f"/api/crawls/{crawl}").get_json())["state"] == "finished"
                     and v["process"] == "finished" and v, what="the last status")
    assert final["counts"]["pages_fetched"] < SITE_PAGES
    assert final["workers"][0]["finish_reason"] == "shutdown"
    assert "Spider opened" in client.get(f"/crawls/{crawl}/log").get_data(as_text=True)


def test_a_local_crawl_with_a_trained_topic_runs_to_the_end(tmp_path: Path, serve) -> None:
    from topicspider.console.forms import crawl_request
    from topicspider.console.runs import Launcher

    write_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    database = f"sqlite:///{tmp_path}/pages.db"
    launcher = Launcher(tmp_path / "runs", database, settings={"DOWNLOAD_DELAY": "0", "CONSOLE_PORT": "1"})
    request = crawl_request({"seeds": site.url + "/", "depth": "1", "topic_kind": "training",
                             "topic": f"{site.url}/p2.html {site.url}/p3.html"})

    run = launcher.start(request)
    wait_for(lambda: launcher.state(launcher.get(run.crawl)) != "running", timeout=120, what="the crawl")

    done = launcher.get(run.crawl)
    assert launcher.state(done) == "finished", launcher.logs(done)["output.log"][-3000:]
    assert (tmp_path / "runs" / run.crawl / "train.txt").read_text().split() == request.training
    with sqlite3.connect(tmp_path / "pages.db") as db:
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone()[0] > 1
        (status,) = db.execute("SELECT status FROM crawl_status WHERE crawl = ?", (run.crawl,)).fetchone()
    assert json.loads(status)["report"]["pages_relevant"] > 0
    log = launcher.logs(done)["crawl.log"]
    assert "'DOWNLOAD_DELAY': '0'" in log and "CONSOLE_PORT" not in log, "the console's -s, its own aside"


def test_crawl_ids_in_paths_never_leave_the_runs_directory(console, tmp_path: Path) -> None:
    from topicspider.console.runs import Launcher

    (tmp_path / "run.json").write_text('{"crawl": "x"}')
    launcher = Launcher(tmp_path / "runs", f"sqlite:///{tmp_path}/console.db")
    client = console()

    assert launcher.get("..") is None and launcher.get(".") is None and launcher.get("a/b") is None
    assert client.get("/crawls/..").status_code == 404
    assert client.get("/crawls/%2e%2e/log").status_code == 404
    assert client.post("/crawls/../stop", data={"csrf": csrf_of(client)}).status_code in (404, 405)


def test_login_redirects_only_within_the_console() -> None:
    from topicspider.console.app import host_name, local_path

    assert local_path("/emails?q=a") == "/emails?q=a"
    assert [local_path(target) for target in ("//evil.cn", "/\\evil.cn", "/\t/evil.cn", "https://evil.cn/")] == ["/"] * 4
    assert [host_name(host) for host in ("127.0.0.1:8070", "[::1]:8070", "[::1]", "localhost")] == [
        "127.0.0.1", "::1", "::1", "localhost"]


def test_scrapy_control_writes_to_a_crawls_inbox(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/inbox.db"
    added = run_project(scrapy_command("control", "crawl-1", "add", "http://a.cn/", "http://b.cn/x",
                                       "-s", f"DATABASE_URL={database}"), tmp_path)
    blocked = run_project(scrapy_command("control", "crawl-1", "block", "*/tag/*", "-s", f"DATABASE_URL={database}"),
                          tmp_path)
    bad_url = run_project(scrapy_command("control", "crawl-1", "add", "ftp://a.cn/", "-s", f"DATABASE_URL={database}"),
                          tmp_path)
    bad_crawl = run_project(scrapy_command("control", "../x", "add", "http://a.cn/", "-s", f"DATABASE_URL={database}"),
                            tmp_path)

    assert added.returncode == 0 and "Sent 2 URLs to add to crawl crawl-1" in added.stdout, added.stderr
    assert blocked.returncode == 0, blocked.stderr
    assert bad_url.returncode == 2 and bad_url.stderr.startswith("topicspider: error: urls: bad added URL")
    assert bad_crawl.returncode == 2 and "CRAWL_ID must be" in bad_crawl.stderr
    with sqlite3.connect(tmp_path / "inbox.db") as db:
        assert db.execute("SELECT crawl, action, argument FROM crawl_control ORDER BY id").fetchall() == [
            ("crawl-1", "add", "http://a.cn/"), ("crawl-1", "add", "http://b.cn/x"), ("crawl-1", "block", "*/tag/*")]


def test_redis_passwords_stay_off_the_crawls_command_lines(tmp_path: Path) -> None:
    from topicspider.console.runs import Launcher, Run, child_redis_url, holds_password

    assert holds_password("redis://:pw@h:6379/0") and holds_password('{"password": "pw"}')
    assert holds_password({"ssl_password": "pw"}) and not holds_password('{"socket_timeout": 5}')
    assert not holds_password("redis://h:6379/0") and not holds_password("0.5")
    launcher = Launcher(tmp_path / "runs", f"sqlite:///{tmp_path}/console.db", settings={
        "REDIS_URL": "redis://worker:s3cret@redis.internal:6379/2", "REDIS_PARAMS": '{"password": "other"}'})
    command, env = launcher._command(Run("c1", "local", time.time(), ["http://example.com/"], 1))
    assert "-s" in command and "REDIS_URL=redis://worker@redis.internal:6379/2" in command
    assert not any("s3cret" in part or "other" in part for part in command)
    assert env["REDIS_PASSWORD"] == "s3cret"
    assert child_redis_url("redis://h:6379/0?password=s3cret&db=1") == ("redis://h:6379/0?db=1",
                                                                         {"REDIS_PASSWORD": "s3cret"})
    assert holds_password("redis://h:6379/0?password=s3cret")


def test_a_distributed_crawls_page_shows_its_dead_letters(console, tmp_path: Path, redis_crawl) -> None:
    from scrapy.settings import Settings

    from topicspider.cluster import ClusterKeys
    from topicspider.cluster.frontier import Exchange, RedisFrontier, dead_letter
    from topicspider.commands.console import _cluster_frontier, _dead_letter_reader, _seed_pusher

    settings = Settings({"REDIS_URL": "", **redis_crawl.settings()})
    distributed = f"redis:{redis_crawl.prefix}:requests"
    store = open_store(f"sqlite:///{tmp_path}/console.db")
    store.transaction(lambda c, d: put_status(c, d, WorkerStatus(distributed, "w", "running", time.time(), {})),
                      write=True)
    store.close()
    frontier = RedisFrontier(redis_crawl.client, ClusterKeys.from_settings(settings, "topic"), lease=0.0)
    frontier.exchange(Exchange(dead_letters=[
        dead_letter(json.dumps({"url": "http://a.cn/<b>x</b>", "callback": "_private"}).encode(),
                    "'_private' is not a method of the spider", "host:1:ab"),
        dead_letter(b"\x80\x04pickle", "undecodable request", "host:2:cd"),
    ]))
    redis_crawl.client.rpush(f"{redis_crawl.prefix}:requests:dead_letters", b"{not json", b"[1]")
    cluster = _cluster_frontier(settings)
    client = console(push_seeds=_seed_pusher(cluster), dead_letters=_dead_letter_reader(cluster))

    page = client.get(f"/crawls/{distributed}").get_data(as_text=True)

    assert "Dead letters (4)" in page
    assert "http://a.cn/&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # shown as text, never markup
    assert "is not a method of the spider" in page and "host:1:ab" in page and "undecodable request" in page
    assert page.count("not a dead-letter record") == 2


def test_an_element_of_a_replaced_page_reads_as_nothing_yet() -> None:
    """Regression (CI): Chromium 156 reported an element of the page a search replaced
    as an inspector error, not a stale element, and the wait gave up at once."""
    from selenium.common.exceptions import WebDriverException

    class Gone:
        @property
        def text(self) -> str:
            raise WebDriverException('unknown error: unhandled inspector error: {"code":-32000,"message":'
                                     '"Node with given id does not belong to the document"}')

    class Driver:
        def find_elements(self, by: str, selector: str) -> list[Gone]:
            return [Gone()]

        def find_element(self, by: str, selector: str) -> Gone:
            return Gone()

    assert texts_of(Driver(), "li.result mark") == [] and text_of(Driver(), "summary") == ""


def test_a_search_result_links_to_its_archived_copy_shown_in_a_sandbox(console, tmp_path: Path) -> None:
    from topicspider.archive import Exchange, WarcFiles, append_to_index

    (tmp_path / "warc").mkdir()
    files = WarcFiles(tmp_path / "warc", "t", 10**9)
    body = '<html><script>alert(1)</script><p>新闻 archived</p></html>'.encode()
    append_to_index(tmp_path / "warc", [files.write(Exchange(
        "http://a.cn/x", "GET", "/x", [("Host", "a.cn")], "HTTP/1.1", 200,
        [("Content-Type", "text/html; charset=utf-8")], body, ""))])
    files.close()
    store_pages(tmp_path, page("http://a.cn/x", "新闻", "新闻 archived"), page("http://a.cn/y", "新闻 2", "新闻"))
    client = console(warc_dir=str(tmp_path / "warc"))

    found = client.get("/search?q=新闻").get_data(as_text=True)
    assert found.count('class="archived"') == 1 and 'href="/archived?url=http://a.cn/x"' in found
    copy = client.get("/archived?url=http://a.cn/x")
    assert copy.status_code == 200 and copy.get_data() == body
    assert copy.headers["Content-Type"] == "text/html; charset=utf-8"
    assert copy.headers["Content-Security-Policy"].startswith("sandbox;") and "script-src" not in copy.headers[
        "Content-Security-Policy"]
    assert client.get("/archived?url=http://a.cn/y").status_code == 404
    assert console().get("/archived?url=http://a.cn/x").status_code == 404  # no WARC_DIR

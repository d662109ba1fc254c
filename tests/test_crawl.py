"""Real crawls: ``scrapy crawl topic`` in a subprocess against local sites."""

from __future__ import annotations

import gzip
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_project
from test_encoding import FIXTURES, TITLES

from topicspider.localsite import generate_site, page_html
from topicspider.middlewares.redirect import goes_round
from topicspider.runner import crawl_command


def test_multi_hundred_page_site_is_stored_whole_breadth_first(tmp_path, serve, crawl):
    depths = generate_site(tmp_path / "site", pages=400, links_per_page=4, seed=7)
    site = serve(tmp_path / "site")
    deepest = max(depths.values())

    result = crawl(site.url + "/", depth=deepest, settings={"CONCURRENT_REQUESTS": 1})

    assert result.returncode == 0, result.stderr[-2000:]
    stored = result.pages()
    assert len(stored) == 400
    for path in depths:
        assert stored[site.url + path] == f"Page {path}"
    fetched = site.paths()
    assert sorted(fetched) == sorted(depths), "every page requested exactly once"
    order = [depths[path] for path in fetched]
    assert order == sorted(order), "a deeper page was fetched before a shallower one"
    assert result.report["pages_fetched"] == 400
    assert result.report["pages_stored"] == 400


def test_depth_limits_how_far_links_are_followed(tmp_path, serve, crawl):
    depths = generate_site(tmp_path / "site", pages=60, links_per_page=2, seed=3)
    site = serve(tmp_path / "site")

    assert crawl(site.url + "/", depth=0).pages() == {site.url + "/": "Page /"}
    one = crawl(site.url + "/", depth=1)
    assert set(one.pages()) == {site.url + p for p, d in depths.items() if d <= 1}


def test_default_depth_is_three(tmp_path, serve, crawl):
    depths = generate_site(tmp_path / "site", pages=120, links_per_page=1, seed=5)
    assert max(depths.values()) > 3
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/")

    assert set(result.pages()) == {site.url + p for p, d in depths.items() if d <= 3}


@pytest.mark.parametrize("level_sync", [True, False])
def test_depth_is_the_shortest_link_distance_under_concurrency(tmp_path, serve, crawl, level_sync):
    # /target.html is 2 links away through the slow page, 3 through the fast ones. Found
    # first through the fast path, it would be fetched at depth 3 and /leaf.html lost.
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/slow.html", "/fast.html"]))
    write(root / "slow.html", page_html("Slow", "", ["/target.html"]), "Delay: 1.5")
    write(root / "fast.html", page_html("Fast", "", ["/a.html"]))
    write(root / "a.html", page_html("A", "", ["/target.html"]))
    write(root / "target.html", page_html("Target", "", ["/leaf.html"]))
    write(root / "leaf.html", page_html("Leaf", "", []))
    site = serve(root)

    result = crawl(site.url + "/", depth=3, settings={"SCHEDULER_LEVEL_SYNC": level_sync})

    assert (site.url + "/leaf.html" in result.pages()) is level_sync


@pytest.mark.parametrize("max_held", [20_000, 5])
def test_a_redirect_at_a_shallower_depth_is_not_held_behind_deeper_pages(tmp_path, serve, crawl, max_held):
    # slow.html (depth 1) answers late with a redirect, which comes back at depth 1
    # while the depth-2 pages wait for their level.
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/slow.html"] + [f"/p{i}.html" for i in range(5)]))
    write(root / "slow.html", "", "Delay: 1\nStatus: 301\nLocation: /slow2.html")
    write(root / "slow2.html", page_html("Slow2", "", []))
    for i in range(5):
        write(root / f"p{i}.html", page_html(f"P{i}", "", [f"/q{i}_{j}.html" for j in range(10)]))
        for j in range(10):
            write(root / f"q{i}_{j}.html", page_html(f"Q{i}{j}", "", []))
    site = serve(root)

    result = crawl(site.url + "/", settings={"SCHEDULER_MAX_HELD": max_held}, timeout=60)

    assert result.report["finish_reason"] == "finished"
    assert len(result.pages()) == 57
    assert (result.stats.get("scheduler/held/overflow", 0) > 0) is (max_held == 5)


def write(path: Path, html: str | bytes, headers: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(html.encode("utf-8") if isinstance(html, str) else html)
    if headers is not None:
        path.with_name(path.name + ".headers").write_text(headers)


def test_offsite_links_are_counted_but_never_followed(tmp_path, serve, crawl):
    other = serve(_single_page(tmp_path / "other"))
    write(tmp_path / "home" / "index.html", page_html("Home", "", [other.url + "/", "/in.html"]))
    write(tmp_path / "home" / "in.html", page_html("In", "", [other.url + "/deeper.html"]))
    home = serve(tmp_path / "home")

    result = crawl(home.url + "/")

    assert other.requests() == []
    assert set(result.pages()) == {home.url + "/", home.url + "/in.html"}
    assert result.report["links_offsite"] == 2
    assert result.stats["links/offsite"] == 2


def _single_page(root: Path) -> Path:
    write(root / "index.html", page_html("Elsewhere", "", []))
    return root


def test_links_are_resolved_filtered_and_canonicalised(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", """<html><head><title>Links</title><base href="/docs/"></head><body>
        <a href="guide.html#part2">relative to base</a>
        <a href='dir'>directory without slash</a>
        <a href=q.html?b=2&amp;a=1>unquoted, query</a> <a href="q.html?a=1&b=2">same, sorted</a>
        <a href="style.css">css</a> <a href="pic.JPG">image</a> <a href="setup.exe">exe</a>
        <a href="javascript:void(0)">js</a> <a href="mailto:x@example.com">mail</a>
        <a href="tel:+123">tel</a> <a href="data:text/html,hi">data</a>
        <a href="/docs/data.json">json, served as HTML-less data</a>
        </body></html>""")
    write(root / "docs" / "guide.html", page_html("Guide", "", []))
    write(root / "docs" / "dir" / "index.html", page_html("Dir", "", ["../guide.html"]))
    write(root / "docs" / "q.html", page_html("Query", "", []))
    write(root / "docs" / "style.css", "body {}")
    site = serve(root)

    result = crawl(site.url + "/")

    assert result.pages() == {
        site.url + "/": "Links",
        site.url + "/docs/guide.html": "Guide",
        site.url + "/docs/dir": "Dir",
        site.url + "/docs/q.html?a=1&b=2": "Query",
    }
    fetched = site.paths()
    # /docs/dir is answered with a redirect to /docs/dir/, which must still be fetched.
    assert sorted(fetched) == sorted(["/", "/docs/guide.html", "/docs/dir", "/docs/dir/", "/docs/q.html?b=2&a=1"])
    dropped = result.stats
    assert dropped["links/dropped/extension"] == 4
    assert dropped["links/dropped/scheme"] == 4


def test_only_html_responses_are_parsed(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/feed", "/page"]))
    write(root / "feed", '<html><a href="/hidden.html">x</a></html>', "Content-Type: text/plain")
    write(root / "page", page_html("Page", "", []), "Content-Type: text/html")
    write(root / "hidden.html", page_html("Hidden", "", []))
    site = serve(root)

    result = crawl(site.url + "/")

    assert "/hidden.html" not in site.paths()
    assert set(result.pages()) == {site.url + "/", site.url + "/page"}
    assert result.stats["pages/not_html"] == 1


def test_binary_bodies_labelled_html_are_not_parsed_as_pages(tmp_path, serve, crawl):
    """Regression: an image or a gzipped body sent as text/html was stored as junk text."""
    root = tmp_path / "site"
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    write(root / "index.html", page_html("Home", "", ["/image.html", "/packed.html", "/page.html"]))
    write(root / "image.html", png, "Content-Type: text/html")
    write(root / "packed.html", gzip.compress(page_html("Packed", "text " * 200, []).encode()), "Content-Type: text/html")
    write(root / "page.html", page_html("Page", "a stray \x01 control character", []), "Content-Type: text/html")
    site = serve(root)

    result = crawl(site.url + "/")

    assert set(result.pages()) == {site.url + "/", site.url + "/page.html"}
    assert result.stats["pages/binary"] == 2 and result.stats["pages/not_html"] == 2


def test_rerun_updates_rows_without_duplicating(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("First", "mail a@example.com", ["/b.html"]))
    write(root / "b.html", page_html("B", "", []))
    site = serve(root)
    crawl(site.url + "/")
    write(root / "index.html", page_html("Second", "mail b@example.com", ["/b.html"]))

    result = crawl(site.url + "/")

    assert result.rows("SELECT COUNT(*) FROM pages") == [(2,)]
    assert result.pages()[site.url + "/"] == "Second"
    emails = result.rows("SELECT email FROM emails JOIN pages ON pages.id = page_id WHERE url = ?", site.url + "/")
    assert emails == [("b@example.com",)]


def test_crawl_log_and_stats_file(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=5, links_per_page=1)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=5)

    lines = [line.split("\t") for line in (result.workdir / "crawl.log").read_text().splitlines()]
    pages = [fields for fields in lines if not fields[1].endswith("/robots.txt")]
    assert len(pages) == 5
    for timestamp, url, status, depth, relevance, terms in pages:
        assert timestamp.startswith("20") and timestamp.endswith("+00:00")
        assert url.startswith(site.url) and status == "200" and int(depth) >= 0
        assert relevance == terms == "-"  # no topic, nothing scored
    report = result.report
    assert report["pages_fetched"] == 5 and report["pages_stored"] == 5
    assert report["elapsed_seconds"] > 0
    assert report["pages_per_second"] == pytest.approx(5 / report["elapsed_seconds"], rel=0.02)
    assert "topicspider crawl report" in result.stdout


def test_unreachable_seed_is_logged_and_the_crawl_still_reports(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=1)
    site = serve(tmp_path / "site")
    dead = "http://127.0.0.1:9/"  # the discard port: nothing listens there

    result = crawl(f"{dead},{site.url}/", settings={"RETRY_TIMES": 0, "ROBOTSTXT_RETRY_DELAY": 0.1})

    assert result.returncode == 0
    assert "Could not fetch http://127.0.0.1:9/" in result.stderr
    assert result.report["errors"] >= 1
    assert len(result.pages()) == 3


def test_a_page_that_fails_to_parse_does_not_stop_the_crawl(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/bad.html", "/empty.html", "/badbase.html", "/refresh.html"]))
    write(root / "bad.html", bytes(range(256)) * 40, "Content-Type: text/html")
    write(root / "empty.html", b"")
    write(root / "badbase.html", '<html><head><base href="http://[oops/"><meta http-equiv="refresh" '
                                 'content="5; url=http://[x/"><title>Bad base</title></head>'
                                 '<body><a href="good.html">good</a> <a href="http://[x/">broken</a></body></html>')
    # A base that cannot be parsed is ignored, as browsers ignore it: the refresh is
    # resolved against the page's own URL, and followed.
    write(root / "refresh.html", '<html><head><base href="http://[oops/"><meta http-equiv="refresh" '
                                 'content="5; url=next.html"><title>Refresh</title></head><body></body></html>')
    write(root / "next.html", page_html("Next", "", []))
    write(root / "good.html", page_html("Good", "", []))
    site = serve(root)

    result = crawl(site.url + "/")

    assert result.returncode == 0
    stored = result.pages()
    assert stored[site.url + "/badbase.html"] == "Bad base"  # a refresh to a malformed URL is none
    assert stored[site.url + "/good.html"] == "Good"  # resolved against the page URL
    assert stored[site.url + "/next.html"] == "Next" and site.url + "/refresh.html" not in stored
    assert site.url + "/empty.html" in stored
    # Every byte value, labelled HTML: binary data, so no page (pages/binary), no error.
    assert site.url + "/bad.html" not in stored and result.stats["pages/binary"] == 1
    assert result.stats["links/dropped/malformed"] >= 1
    assert result.report["errors"] == 0


def test_a_page_the_database_refuses_is_isolated_spilled_and_replayed(tmp_path, serve, crawl):
    import sqlite3

    generate_site(tmp_path / "site", pages=5, links_per_page=2)
    site = serve(tmp_path / "site")
    crawl(site.url + "/", depth=0)
    database = tmp_path / "work" / "topicspider.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON pages WHEN NEW.url LIKE '%/p3.html'"
                   " BEGIN SELECT RAISE(ABORT, 'refused'); END")

    result = crawl(site.url + "/", depth=5, settings={"STORAGE_BATCH_SIZE": 10, "STORAGE_FLUSH_INTERVAL": 60})

    assert result.returncode == 0
    assert result.stats["storage/pages_refused"] == 1 and result.stats["storage/pages_spilled"] == 1
    assert result.stats["storage/pages_written"] == 4, "the rest of its batch is stored"
    assert result.stats.get("storage/retries", 0) == 0, "a refusal is not retried"
    assert result.report["pages_spilled"] == 1 and result.report["errors"] >= 1
    assert "refused 1 pages" in result.stderr and "scrapy replay-spill topicspider-spill.jsonl" in result.stdout
    replay = [sys.executable, "-m", "scrapy", "replay-spill"]

    refused_again = run_project(replay, result.workdir)

    assert refused_again.returncode == 1 and "refused 1 pages, kept in topicspider-spill.jsonl.rejected" in refused_again.stderr
    assert not (result.workdir / "topicspider-spill.jsonl").exists()
    with sqlite3.connect(database) as db:
        db.execute("DROP TRIGGER refuse")
    stored = run_project([*replay, "topicspider-spill.jsonl.rejected"], result.workdir)
    assert stored.returncode == 0, stored.stderr
    assert site.url + "/p3.html" in result.pages() and len(result.pages()) == 5
    missing = run_project(replay, result.workdir)
    assert missing.returncode == 2 and "topicspider: error: no spill file" in missing.stderr


def test_chinese_pages_in_every_encoding_are_stored_right(serve, crawl):
    site = serve(FIXTURES)

    # The fixtures say the same in each encoding: each is to be stored as a page.
    result = crawl(site.url + "/index.html", depth=1, settings={"DUPLICATE_CONTENT": False})

    stored = result.pages()
    for name, title in TITLES.items():
        assert stored[f"{site.url}/{name}"] == title
    texts = dict(result.rows("SELECT url, text FROM pages"))
    assert "朱镕基" in texts[site.url + "/gbk-declared-utf8.html"]
    assert result.rows("SELECT DISTINCT email FROM emails ORDER BY email") == [
        ("service@example.cn",), ("service@example.tw",)]


@pytest.mark.parametrize(("arguments", "message"), [
    (["-a", "seeds=ftp://example.com/"], "bad seed URL 'ftp://example.com/': scheme must be http or https"),
    (["-a", "seeds=http://"], "bad seed URL 'http://': no host"),
    (["-a", "seeds="], "no seed URLs given"),
    (["-a", "seeds=@missing.txt"], "cannot read seed file 'missing.txt'"),
    (["-a", "depth=-1"], "depth must be 0 or more, got -1"),
    (["-a", "depth=two"], "depth must be a whole number, got 'two'"),
    (["-s", "DATABASE_URL=postgres://me:hunter2@db/x"], "DATABASE_URL 'postgres://me:***@db/x': unknown scheme 'postgres'"),
    (["-s", "DATABASE_URL=sqlite:////no/such/dir/x.db"], "directory '/no/such/dir' does not exist"),
    (["-s", "STORAGE_BATCH_SIZE=0"], "STORAGE_BATCH_SIZE must be at least 1, got 0"),
    (["-s", "URL_STRIP_TRAILING_SLASH=maybe"], "URL_STRIP_TRAILING_SLASH must be true or false, got 'maybe'"),
    (["-s", "DOWNLOAD_DELAY=abc"], "DOWNLOAD_DELAY must be a number, got 'abc'"),
    (["-s", "CONCURRENT_REQUESTS=0"], "CONCURRENT_REQUESTS must be at least 1, got 0"),
    (["-s", "CRAWL_LOG=/no/such/dir/crawl.log"], "CRAWL_LOG '/no/such/dir/crawl.log': directory '/no/such/dir' does not exist"),
    (["-s", "STATS_FILE=/no/such/dir/s.json"], "STATS_FILE '/no/such/dir/s.json': directory '/no/such/dir' does not exist"),
    (["-a", "dept=0"], "unknown spider argument 'dept' (known: seeds, depth, topic, train, negatives, labels)"),
    (["-a", "seeds=http://bob:s3cret@exa mple.com/"], "bad seed URL 'http://bob:***@exa mple.com/': white space in the host"),
    (["-s", "DATABASE_URL=sqlite://me:hunter2@host/x.db"], "DATABASE_URL 'sqlite://me:***@host/x.db': use sqlite:///path"),
    (["-s", "DATABASE_URL=mysql://me:hunter2@127.0.0.1:3306/"],
     "DATABASE_URL 'mysql://me:***@127.0.0.1:3306/': use mysql://user:password@host:port/database"),
    (["-s", "DATABASE_URL=mysql://me:hunter2@127.0.0.1:99999/db"], "DATABASE_URL 'mysql://me:***@127.0.0.1:99999/db': Port out of range"),
    (["-s", "STORAGE_RETRY_DELAY=-1"], "STORAGE_RETRY_DELAY"),
    (["-s", "URL_SESSION_PARAMETERS=sid,a b"], "URL_SESSION_PARAMETERS: 'a b' is not a URL parameter name"),
    (["-s", "URL_MAX_PATH_REPEATS=0"], "URL_MAX_PATH_REPEATS must be at least 1, got 0"),
    (["-a", "seeds=http://example.com/a/a/a/a/"],
     "bad seed URL 'http://example.com/a/a/a/a/': refused by URL_MAX_PATH_REPEATS (path_repetition)"),
    (["-s", "DUPLICATE_NEAR_DISTANCE=16"], "DUPLICATE_NEAR_DISTANCE must be from -1 to 7, got 16"),
    (["-s", "DUPLICATE_NEAR_DISTANCE=-2"], "DUPLICATE_NEAR_DISTANCE must be at least -1, got -2"),
    (["-s", "DUPLICATE_NEAR_DISTANCE=three"], "DUPLICATE_NEAR_DISTANCE must be an integer, got 'three'"),
    (["-s", "GC_THRESHOLDS=50000,20"], "GC_THRESHOLDS must be three whole numbers, each at least 1, got '50000,20'"),
])
def test_bad_input_gets_one_error_line_before_any_request(tmp_path, serve, arguments, message):
    generate_site(tmp_path / "site", pages=2, links_per_page=1)
    site = serve(tmp_path / "site")

    done = run_project([*crawl_command(f"{site.url}/"), *arguments], tmp_path, timeout=60)

    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("topicspider: error: ")
    assert message in errors[0]
    assert "hunter2" not in done.stderr + done.stdout and "s3cret" not in done.stderr + done.stdout
    assert site.requests() == []


class _Reference(HTMLParser):
    """A second, independent reading of a page with the standard library's parser."""

    def __init__(self) -> None:
        super().__init__()
        self.title, self.mailto, self._in_title = "", set(), False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_title = self._in_title or tag == "title"
        href = dict(attrs).get("href") or ""
        if tag == "a" and href.lower().startswith("mailto:"):
            self.mailto.add(href[7:].split("?")[0].lower())

    def handle_endtag(self, tag: str) -> None:
        self._in_title = self._in_title and tag != "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def test_a_real_world_site(serve, crawl):
    """The HTML of a Debian documentation package: every page, its title, its mailto addresses."""
    root = Path(__file__).parent / "fixtures" / "maint-guide-zh-tw"
    site = serve(root)
    references = {}
    for page in root.glob("*.html"):
        reference = _Reference()
        reference.feed(page.read_text(encoding="utf-8"))
        references[f"{site.url}/{page.name}"] = reference

    assert sum(len(reference.mailto) for reference in references.values()) >= 5

    result = crawl(site.url + "/index.zh-tw.html", depth=2)

    stored = result.pages()
    assert set(stored) == set(references)
    for url, reference in references.items():
        assert stored[url] == " ".join(reference.title.split())
        emails = {email for (email,) in result.rows(
            "SELECT email FROM emails JOIN pages ON pages.id = page_id WHERE url = ?", url)}
        assert reference.mailto <= emails
    assert result.rows("SELECT COUNT(*) FROM pages WHERE text LIKE '%' || char(65533) || '%'") == [(0,)]
    assert "/debian.css" not in site.paths()


def test_redirects_stay_on_site_except_from_seeds(tmp_path, serve, crawl):
    other = serve(_single_page(tmp_path / "other"))
    write(tmp_path / "other" / "next.html", page_html("Next", "", []))
    write(tmp_path / "other" / "index.html", page_html("Elsewhere", "", ["/next.html"]))
    root = tmp_path / "home"
    write(root / "index.html", page_html("Home", "", ["/old.html", "/away.html"]))
    write(root / "old.html", "", "Status: 301\nLocation: /new.html")
    write(root / "new.html", page_html("New", "", []))
    write(root / "away.html", "", f"Status: 302\nLocation: {other.url}/")
    write(root / "seed.html", "", f"Status: 302\nLocation: {other.url}/")
    home = serve(root)

    result = crawl(home.url + "/")

    assert set(result.pages()) == {home.url + "/", home.url + "/new.html"}
    assert other.requests() == []
    assert result.stats["links/offsite_redirect"] == 1

    seeded = crawl(home.url + "/seed.html")

    assert set(seeded.pages()) >= {other.url + "/", other.url + "/next.html"}


def test_a_retried_page_is_not_stuck_behind_the_deeper_pages_it_holds_back(tmp_path, serve, crawl):
    # A retry lowers the request's priority to that of the next level; the frontier
    # must still give it out first, or the level barrier waits for it forever.
    root = tmp_path / "site"
    kids = [f"k{i}.html" for i in range(5)]
    write(root / "index.html", page_html("home", "", ["a.html", "b.html", "c.html"]))
    write(root / "a.html", page_html("a", "", kids))
    write(root / "b.html", page_html("b", "", ["bk.html"]), "Status-First: 500 1")
    write(root / "c.html", page_html("c", "", []), "Delay: 1")
    for name in [*kids, "bk.html"]:
        write(root / name, page_html(name, "", []))
    site = serve(root)

    result = crawl(site.url + "/", depth=2, settings={"CONCURRENT_REQUESTS_PER_DOMAIN": 1}, timeout=60)

    assert result.returncode == 0
    assert result.stats["retry/count"] == 1
    assert len(result.pages()) == 10


def test_a_redirect_goes_round_when_it_returns_to_its_chain_but_once_to_the_last_url():
    assert not goes_round([b"a"], b"b")
    assert not goes_round([b"a"], b"a"), "/a answered with /a/, or a cookie set: followed once"
    assert goes_round([b"a", b"a"], b"a")
    assert goes_round([b"a", b"b"], b"a")
    assert not goes_round([b"a", b"b"], b"b")


def test_a_page_that_refreshes_or_redirects_to_itself_is_fetched_at_most_twice_and_stored(tmp_path, serve, crawl):
    """A meta refresh to the page itself was followed until REDIRECT_MAX_TIMES ran out
    (22 requests, nothing stored, no error): the dupefilter lets a redirect to the URL
    just asked for through, and the refresh asked for it again and again. Once is
    allowed (a server may set a cookie and send the page again); then the page is kept."""
    root = tmp_path / "site"
    write(root / "index.html", page_html("home", "", ["reload.html", "once.html"]))
    refresh = '<meta http-equiv="refresh" content="0; url=reload.html">'
    write(root / "reload.html", page_html("reloads", "body", ["kid.html"]).replace("<head>", f"<head>{refresh}", 1))
    write(root / "kid.html", page_html("kid", "", []))
    write(root / "once.html", page_html("once", "", []), "Status-First: 302 1\nLocation: /once.html")
    site = serve(root)

    result = crawl(site.url + "/")

    assert result.returncode == 0, result.stderr
    assert site.paths().count("/reload.html") == 2 and site.paths().count("/once.html") == 2
    assert set(result.pages()) == {f"{site.url}/{path}" for path in ("", "reload.html", "kid.html", "once.html")}
    assert result.report["errors"] == 0 and result.stats["redirect/refresh_loops"] == 1


def test_a_redirect_loop_is_an_error_with_its_reason(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("home", "", ["self.html", "ping.html"]))
    write(root / "self.html", "", "Status: 302\nLocation: /self.html")
    write(root / "ping.html", "", "Status: 302\nLocation: /pong.html")
    write(root / "pong.html", "", "Status: 301\nLocation: /ping.html")
    site = serve(root)

    result = crawl(site.url + "/")

    assert result.returncode == 0, result.stderr
    assert site.paths().count("/self.html") == 2, "one redirect to itself is followed, not more"
    assert site.paths().count("/ping.html") == 1 and site.paths().count("/pong.html") == 1
    assert set(result.pages()) == {f"{site.url}/"}
    assert result.stats["fetch/errors/RedirectLoop"] == 2 and result.report["errors"] == 2
    assert result.stderr.count(": redirect loop (") == 2  # "Could not fetch URL: redirect loop (...)"


def test_the_memory_guard_stops_the_crawl_with_its_reason_and_exit_status_1(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", 5, 2)
    site = serve(tmp_path / "site")
    over = crawl(site.url + "/", settings={"MEMUSAGE_LIMIT_MB": 1})  # any process is over 1 MB
    assert over.returncode == 1, over.stderr[-2000:]
    assert over.stats["finish_reason"] == "memusage_exceeded"
    bad = crawl(site.url + "/", settings={"MEMUSAGE_LIMIT_MB": -1})
    errors = [line for line in bad.stderr.splitlines() if "error" in line.lower()]
    assert bad.returncode == 2 and len(errors) == 1 and "MEMUSAGE_LIMIT_MB" in errors[0], bad.stderr[-2000:]


def test_redirects_to_traps_or_to_urls_the_users_rules_refuse_are_not_followed(tmp_path, serve, crawl):
    """Regression: a redirect target skipped the trap filters and the user's rules."""
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/deeper.html", "/private.html", "/ok.html"]))
    write(root / "deeper.html", "", "Status: 302\nLocation: /rep/a/a/a/")
    write(root / "private.html", "", "Status: 302\nLocation: /private/page.html")
    write(root / "ok.html", "", "Status: 301\nLocation: /fine.html")
    for path in ("rep/a/a/a/index.html", "private/page.html", "fine.html"):
        write(root / path, page_html(path, "", []))
    (tmp_path / "rules.txt").write_text("-/private/\n+.\n")
    site = serve(root)

    result = crawl(site.url + "/", settings={"URL_FILTER_FILE": str(tmp_path / "rules.txt")})

    assert set(result.pages()) == {site.url + "/", site.url + "/fine.html"}
    assert not {"/rep/a/a/a/", "/private/page.html"} & set(site.paths())
    assert result.stats["links/dropped/path_repetition"] == 1 and result.stats["links/dropped/url_filter"] == 1
    assert result.stats["ledger/dropped/trap"] == 1 and result.stats["ledger/dropped/filter"] == 1


def test_a_site_stops_at_its_page_budget_and_the_rest_are_dropped_with_the_reason(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", 30, 3, seed=4)
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=5, settings={"SITE_MAX_PAGES": 10})
    assert len([path for path in site.paths() if path != "/robots.txt"]) == 10 and len(result.pages()) == 10
    assert result.stats["budget/sites_exhausted"] == 1
    assert result.stats["ledger/dropped/site_budget"] == result.stats["budget/dropped"] > 0

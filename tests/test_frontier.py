"""The durable frontier: with a ``JOBDIR``, a crawl killed at any moment (SIGKILL, as an
out-of-memory kill or a power cut would) resumes with nothing lost, against real crawls
of a local site."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_ledger, patched_command, run_project, stop_crawl_when
from scrapy import Request

from tests.services import query
from topicspider.fingerprint import url_fingerprint
from topicspider.ledger import imbalance, ledger_line, outcome_of
from topicspider.localsite import generate_site, page_html
from topicspider.requestcodec import UnencodableRequest, decode_request, encode_request
from topicspider.runner import crawl_command, project_env
from topicspider.spiders.topic import TopicSpider
from topicspider.storage.discovered import open_discovered_store
from topicspider.storage.mysql import MySQLURLTable
from topicspider.storage.seen import SeenURL, URLState, open_seen_store

PAGES = 300
# The crawl's own limits, which bound what a kill can cost (the guarantee in docs/crawling.md):
# pages being crawled (the downloader's slots), and pages read but not yet marked
# finished, at most the storage pipeline's last two batches.
CONCURRENCY = 4
STORAGE_BATCH = 50
REFETCH_BOUND = CONCURRENCY + 2 * STORAGE_BATCH


CLOSING = "close"


def _kill_after(command: list[str], workdir: Path, due: Any) -> None:
    """Start the crawl, and SIGKILL it once ``due()`` holds."""
    log = workdir / "killed.log"
    status = stop_crawl_when(command, workdir, lambda: due(log), signal.SIGKILL, stderr=log, poll=0.002)
    assert status == -signal.SIGKILL, "the crawl ended before the kill"


def _moment(kill: int | str, site: Any, depths: dict[str, int], workdir: Path, database_url: str) -> Any:
    """When to kill: once the site has served ``kill`` pages (0: at once, during
    start-up); as the crawl logs that it is closing (CLOSING); as the first page of
    level N is asked for (``level:N``, the level above just finished); or as the
    database first holds N pages (``stored:N``, a storage batch just written, its URLs
    not yet marked finished)."""
    if kill == CLOSING:
        return lambda log: "Closing spider" in log.read_text()
    if isinstance(kill, int):
        return lambda log: len(site.paths()) >= kill
    what, number = kill.split(":")
    if what == "level":
        return lambda log: any(depths.get(path) == int(number) for path in site.paths())
    return lambda log: _stored_count(workdir, database_url) >= int(number)


def _stored_count(workdir: Path, database_url: str) -> int:
    try:
        return sum(_stored(workdir, database_url).values())
    except Exception:  # noqa: BLE001 - no database yet, or its table not yet made
        return 0


def _stored(workdir: Path, database_url: str) -> Counter[str]:
    if database_url:
        return Counter(url for (url,) in query(database_url, "SELECT url FROM pages"))
    with sqlite3.connect(workdir / "topicspider.db") as db:
        return Counter(url for (url,) in db.execute("SELECT url FROM pages"))


@pytest.fixture(params=["sqlite", "mysql"])
def database_url(request) -> str:
    return request.getfixturevalue("mysql_url") if request.param == "mysql" else ""


# Kills during start-up, in the first levels, mid-crawl, near the end (the storage
# pipeline's last batches and close), as a level starts and as a storage batch lands.
@pytest.mark.parametrize("kills", [(0, 40), (15, 120, 200), (260, PAGES), (150, CLOSING), ("level:3", "stored:150")],
                         ids=["start-up", "mid-crawl", "near-the-end", "closing", "new-level-and-storage-batch"])
def test_a_killed_crawl_resumes_with_nothing_lost(tmp_path, serve, kills, database_url):
    depths = generate_site(tmp_path / "site", pages=PAGES, links_per_page=5, seed=17)
    site = serve(tmp_path / "site")
    workdir, jobdir = tmp_path / "work", tmp_path / "job"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": jobdir, "DOWNLOAD_DELAY": 0.005, "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
        "DUPEFILTER_LRU_CAPACITY": 60, "STORAGE_BATCH_SIZE": STORAGE_BATCH,
        **({"DATABASE_URL": database_url} if database_url else {}),
    })

    for kill in kills:
        _kill_after(command, workdir, _moment(kill, site, depths, workdir, database_url))
    before_resume = len(site.paths())
    resumed = run_project(command, workdir)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stored = _stored(workdir, database_url)
    assert len(stored) == PAGES, f"{PAGES - len(stored)} reachable pages never stored"
    assert max(stored.values()) == 1
    requested = Counter(site.paths())
    assert set(requested) == set(depths)
    # Re-fetched: only what was in flight or not yet stored at each kill.
    refetched = sum(requested.values()) - PAGES
    assert refetched <= len(kills) * REFETCH_BOUND, (refetched, before_resume)
    assert_ledger(json.loads((workdir / "stats.json").read_text())["stats"])
    # Done: a second resume has nothing left to fetch.
    again = run_project(command, workdir)
    assert again.returncode == 0 and len(site.paths()) == sum(requested.values()), again.stderr[-2000:]


def test_a_jobdir_of_an_earlier_version_resumes_its_queue(tmp_path, serve, database_url):
    """Before the durable frontier, a JOBDIR held its queue in Scrapy's disk queue only,
    and the fingerprints of the URLs seen in seen.sqlite (or MySQL's urls table): its
    queued requests move into the store."""
    depths = generate_site(tmp_path / "site", pages=80, links_per_page=4, seed=3)
    site = serve(tmp_path / "site")
    workdir, jobdir = tmp_path / "work", tmp_path / "job"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": jobdir, "DOWNLOAD_DELAY": 0.02, "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
        **({"DATABASE_URL": database_url} if database_url else {})})
    assert stop_crawl_when(command, workdir, lambda: len(site.paths()) >= 20) == 0
    # A graceful stop leaves the waiting requests in Scrapy's disk queue too, as that
    # version did; it kept the fingerprints of every URL seen, with no state.
    assert (jobdir / "requests.queue" / "active.json").exists()
    (jobdir / "durable-frontier").unlink()
    if database_url:  # what migration 5 makes of that version's rows
        query(database_url, "UPDATE urls SET request = NULL, frontier = 'finished'")
    else:
        with sqlite3.connect(jobdir / "frontier.sqlite") as frontier:
            fingerprints = frontier.execute("SELECT fingerprint FROM frontier").fetchall()
            assert frontier.execute("SELECT COUNT(*) FROM frontier WHERE state = 0").fetchone()[0] > 0
        for suffix in ("", "-wal", "-shm"):
            Path(f"{jobdir / 'frontier.sqlite'}{suffix}").unlink(missing_ok=True)
        with sqlite3.connect(jobdir / "seen.sqlite") as seen:
            seen.execute("CREATE TABLE seen (fingerprint BLOB PRIMARY KEY) WITHOUT ROWID")
            seen.executemany("INSERT INTO seen VALUES (?)", fingerprints)

    resumed = run_project(command, workdir)

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    requested = Counter(site.paths())
    assert set(requested) == set(depths) and max(requested.values()) == 1
    assert "moved into the URL store" in resumed.stderr
    assert (jobdir / "durable-frontier").exists()


def test_the_store_keeps_waiting_requests_until_they_finish(tmp_path) -> None:
    store = open_seen_store(str(tmp_path / "job"))
    fingerprints = [url_fingerprint(f"http://e.com/{i}") for i in range(5)]
    store.add_many([SeenURL(fp, f"http://e.com/{i}", 1, request=b"{}") for i, fp in enumerate(fingerprints)])
    store.add_many([SeenURL(fingerprints[1], finished=True), SeenURL(fingerprints[3], finished=True)])
    store.close()

    reopened = open_seen_store(str(tmp_path / "job"))
    assert reopened.count() == 5
    first = reopened.waiting(b"", 2)
    assert len(first) == 2 and len(reopened.waiting(first[-1][0], 2)) == 1
    # A finished URL queued again (a retry) waits again.
    reopened.add_many([SeenURL(fingerprints[1], request=b"{}")])
    assert len(reopened.waiting(b"", 100)) == 4


def _wait_for(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# A second Ctrl-C or SIGTERM forces the stop: in each phase, the process is gone within
# 10 s, and the job then resumes with nothing lost.
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", ["start-up", "crawling", "closing"])
def test_a_forced_stop_ends_within_10_s_and_resumes(tmp_path, serve, phase, stop):
    depths = generate_site(tmp_path / "site", pages=120, links_per_page=4, seed=23)
    # The deepest pages are slow, so they are fetched last, and keep a graceful stop waiting.
    deepest = [path for path, depth in depths.items() if depth == max(depths.values())]
    slow = [tmp_path / "site" / f"{path.lstrip('/')}.headers" for path in deepest]
    for sidecar in slow:
        sidecar.write_text("Delay: 60\n")
    site = serve(tmp_path / "site")
    workdir, jobdir = tmp_path / "work", tmp_path / "job"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": jobdir, "DOWNLOAD_DELAY": 0.01, "CONCURRENT_REQUESTS_PER_DOMAIN": 4})
    log = workdir / "crawl.log"
    with log.open("w") as stderr:
        crawler = subprocess.Popen(command, cwd=workdir, env=project_env(), stdout=subprocess.DEVNULL, stderr=stderr)
    if phase == "start-up":
        _wait_for(lambda: "Overridden settings" in log.read_text() or crawler.poll() is not None)
        crawler.send_signal(stop)
    else:
        # Mid-crawl, or with only the slow pages left in flight.
        _wait_for(lambda: len(site.paths()) >= (30 if phase == "crawling" else len(depths) - len(slow)))
        crawler.send_signal(stop)
        if phase == "closing":
            _wait_for(lambda: "Closing spider" in log.read_text())
    time.sleep(0.2)
    crawler.send_signal(stop)
    forced = time.monotonic()
    try:
        crawler.wait(timeout=10)
    except subprocess.TimeoutExpired:
        crawler.kill()
        crawler.wait()
        pytest.fail(f"still running 10 s after a second {signal.Signals(stop).name}: {log.read_text()[-2000:]}")
    assert time.monotonic() - forced < 10

    for sidecar in slow:
        sidecar.unlink()
    resumed = run_project(command, workdir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stored = _stored(workdir, "")
    assert len(stored) == len(depths) and max(stored.values()) == 1


def test_pages_of_a_host_whose_robots_txt_was_unreachable_wait_for_the_resume(tmp_path, serve):
    """RFC 9309 makes an unreachable robots.txt disallow its host for now: its pages end
    as errors of this run, and stay waiting in the store, so that a resume tries them."""
    depths = generate_site(tmp_path / "site", pages=20, links_per_page=3, seed=4)
    sidecar = tmp_path / "site" / "robots.txt.headers"
    (tmp_path / "site" / "robots.txt").write_text("")
    sidecar.write_text("Status: 503\n")
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": tmp_path / "job", "DOWNLOAD_DELAY": 0, "ROBOTSTXT_RETRY_TIMES": 0})

    first = run_project(command, workdir)

    assert first.returncode == 0, first.stderr[-2000:]
    assert site.paths() == [] and "1 URLs left waiting for a resume, failed for now (robots.txt unreachable: 1)" in first.stderr
    sidecar.unlink()
    resumed = run_project(command, workdir)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert sorted(site.paths()) == sorted(depths)
    assert len(_stored(workdir, "")) == len(depths)


def test_the_report_accounts_for_every_queued_url(tmp_path, serve, crawl):
    """The ledger: each queued URL ends done, in error or dropped, with its reason."""
    root = tmp_path / "site"
    root.mkdir()
    links = ["/a.html", "/missing.html", "/private/b.html", "/gone.html", "/c.html"]
    (root / "index.html").write_text(page_html("home", "start", links))
    for name in ("a", "c"):
        (root / f"{name}.html").write_text(page_html(name, "text", ["/", "/a.html"]))
    (root / "private").mkdir()
    (root / "private" / "b.html").write_text(page_html("b", "text", []))
    (root / "gone.html").write_text("")
    (root / "gone.html.headers").write_text("Status: 410\n")
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    site = serve(root)

    result = crawl(site.url + "/", depth=1)

    assert result.returncode == 0, result.stderr[-2000:]
    assert result.report["urls"] == ("6 discovered (6 queued, 0 not) = 3 done + 2 error (http_404 1, http_410 1)"
                                     " + 1 dropped (robots 1) + 0 waiting")
    assert "urls" in result.stdout and "6 discovered (6 queued, 0 not) = 3 done" in result.stdout
    # a.html and c.html, at the depth limit, link to / and a.html: 4 links, no new URL.
    assert result.stats["links/too_deep"] == 4


def test_a_url_a_retry_was_redirected_to_is_not_counted_again_when_a_link_leaves_it(tmp_path, serve, crawl):
    """A retried request that is then redirected queues its new URL without the
    dupefilter (Scrapy copies the retry's dont_filter to the redirect); that URL is
    queued all the same, and a link to it later is no new URL."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text(page_html("home", "start", ["/p.html", "/r.html"]))
    (root / "p.html").write_text("")
    (root / "p.html.headers").write_text("Status: 301\nLocation: /q.html\nStatus-First: 503 1\nRetry-After: 1\n")
    (root / "q.html").write_text(page_html("q", "text", []))
    (root / "r.html").write_text(page_html("r", "text", ["/q.html"]))  # at the depth limit
    site = serve(root)

    result = crawl(site.url + "/", depth=1)

    assert result.returncode == 0, result.stderr[-2000:]
    assert site.paths().count("/q.html") == 1
    assert result.report["urls"] == "4 discovered (4 queued, 0 not) = 4 done + 0 error + 0 dropped + 0 waiting"


def test_session_ids_make_no_new_pages_and_a_trap_is_dropped_as_such(tmp_path, serve, crawl):
    root = tmp_path / "site"
    (root / "rep" / "a" / "a").mkdir(parents=True)
    (root / "index.html").write_text(page_html("home", "start", [
        "/page.html?PHPSESSID=1", "/page.html?PHPSESSID=2&x=1", "/page.html;jsessionid=0AF3", "/rep/a/"]))
    (root / "page.html").write_text(page_html("page", "text", ["/page.html?sid=3", "/"]))
    # A relative link that deepens the path it is on: /rep/a/ -> /rep/a/a/ -> ...
    # Each level's text its own: a copy's links would not be followed (duplicate content).
    for level, deeper in enumerate((root / "rep" / "a", root / "rep" / "a" / "a")):
        (deeper / "index.html").write_text(page_html("rep", f"level {level}", ["a/"]))
    site = serve(root)

    result = crawl(site.url + "/", depth=8)

    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(site.paths()) == ["/", "/page.html", "/page.html?x=1", "/rep/a/", "/rep/a/a/"]
    # 3 links of the home page, and one of each of the two copies of page.html.
    assert result.stats["links/session_ids_stripped"] == 5 and result.stats["links/dropped/path_repetition"] == 1
    assert result.stats["ledger/dropped/trap"] == 1


def test_the_report_counts_each_url_found_and_never_queued_once(tmp_path, serve, crawl):
    """Links not followed are discovered URLs: each counted once, for its reason, unless
    the crawl queued it after all (an off-site link into another seed's site)."""
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "index.html").write_text(page_html("other", "text", ["/p.html"]))
    # Late, so that the first site's link to /p.html is met before /p.html is queued.
    (other_root / "index.html.headers").write_text("Delay: 1\n")
    (other_root / "p.html").write_text(page_html("p", "text", []))
    other = serve(other_root, host="127.0.0.2")
    root = tmp_path / "site"
    root.mkdir()
    elsewhere = "http://127.0.0.9:9"  # never fetched: off-site
    (root / "index.html").write_text(
        page_html("home", "start", ["/a.html", "/b.html", f"{other.url}/p.html", f"{other.url}/",
                                    f"{elsewhere}/x", "/doc.pdf", "/doc.pdf", "mailto:me@example.com"])
        + '<a rel="nofollow" href="/secret.html">s</a>')
    (root / "a.html").write_text(page_html("a", "text", [f"{elsewhere}/x", f"{elsewhere}/y", "/deep1.html",
                                                         "/deep2.html", "/b.html", f"{other.url}/p.html"]))
    (root / "b.html").write_text(page_html("b", "text", ["/deep1.html", "/deep3.html", "/doc.pdf", "/a.html"]))
    site = serve(root)

    result = crawl(f"{site.url}/,{other.url}/", depth=1)

    assert result.returncode == 0, result.stderr[-2000:]
    # Queued: 2 seeds, a.html, b.html, p.html. Not queued: x, y; doc.pdf; secret.html; deep1-3.
    assert result.report["urls"] == ("12 discovered (5 queued, 7 not) = 5 done + 0 error"
                                     " + 7 dropped (too_deep 3, offsite 2, nofollow 1, not_a_page 1) + 0 waiting")
    assert result.stats["ledger/not_queued"] == 7 and result.stats["ledger/dropped/offsite"] == 2


@pytest.mark.parametrize(("failure", "entry"), [
    (None, "done"), ("HTTP 404", "error/http_404"), ("TimeoutError: took too long", "error/TimeoutError"),
    ("ignored: Forbidden by robots.txt", "dropped/robots"), ("ignored: blocked by pattern '/x'", "dropped/filter"),
    ("ignored: redirect to another site: http://b/", "dropped/offsite"), ("ignored: anything else", "dropped/ignored"),
])
def test_a_failure_reason_gives_one_ledger_entry(failure, entry) -> None:
    assert outcome_of(failure) == entry


def test_a_page_not_kept_is_dropped_for_its_reason() -> None:
    assert outcome_of(None, "irrelevant") == "dropped/irrelevant"
    assert outcome_of("HTTP 404", "irrelevant") == "error/http_404"


def test_the_discovered_store_counts_a_url_once_and_only_in_the_run_that_found_it(tmp_path) -> None:
    first = open_discovered_store(str(tmp_path))
    assert first.add_many([(b"a" * 16, "offsite"), (b"b" * 16, "too_deep")]) == {"offsite": 1, "too_deep": 1}
    assert first.add_many([(b"a" * 16, "too_deep"), (b"c" * 16, "too_deep")]) == {"too_deep": 1}
    assert first.this_run(b"", 2) == [(b"a" * 16, "offsite"), (b"b" * 16, "too_deep")]
    first.close()
    resumed = open_discovered_store(str(tmp_path))
    assert resumed.add_many([(b"a" * 16, "offsite"), (b"d" * 16, "nofollow")]) == {"nofollow": 1}
    assert resumed.this_run(b"", 10) == [(b"d" * 16, "nofollow")]
    resumed.close()
    temporary = open_discovered_store(None)
    temporary.close()
    assert not temporary.path.exists()


def test_a_ledger_that_does_not_add_up_says_so() -> None:
    balanced = {"queued": 5, "restored": 2, "done": 4, "error/http_404": 1, "dropped/robots": 1, "waiting": 1}
    assert imbalance(balanced) == 0 and "DOES NOT" not in ledger_line(balanced)
    short = {**balanced, "done": 3}
    assert imbalance(short) == 1 and ledger_line(short).endswith("(DOES NOT ADD UP: 1 unaccounted for)")


@pytest.mark.parametrize("fields", [
    {"url": "file:///etc/passwd"}, {"url": "http://a/", "_class": "scrapy.Nope"},
    {"url": "http://a/", "_class": "scrapy.nope.X"}, {"url": "http://a/", "_class": "os.system"},
    {"url": "http://a/", "_class": "scrapy.http.Response"}, {"url": "http://a/", "encoding": "bogus"},
    {"url": "http://a/", "callback": "_private"}, {"url": "http://a/", "callback": "name"}, {"link": "http://a/"},
    {"url": "http://a/", "meta": {"site": ["x"]}}, {"url": "http://a/", "meta": {"depth": "1"}},
    {"url": "http://a/", "meta": {"depth": 10 ** 9}}, {"url": "http://a/", "meta": {"depth": True}},
    {"url": "http://a/", "meta": {"download_slot": [1]}}, {"url": "http://a/", "meta": [1]},
])
def test_a_stored_request_that_is_not_a_crawl_request_is_refused(fields) -> None:
    """The store is a database others may write to: what it gives back builds a crawl
    request or nothing."""
    spider = TopicSpider()
    with pytest.raises(UnencodableRequest):
        decode_request(json.dumps(fields).encode(), spider)
    with pytest.raises(UnencodableRequest):
        decode_request(b"[" * 100_000 + b"]" * 100_000, spider)
    request = Request("http://a/p?x=1", callback=spider.parse, errback=spider.on_error, meta={"depth": 2, "b": b"\xff"})
    again = decode_request(encode_request(request, spider), spider)
    assert (again.url, again.callback, again.errback, again.meta) == (request.url, spider.parse, spider.on_error, request.meta)


def test_a_url_only_the_state_log_wrote_is_not_seen_yet(mysql_url) -> None:
    """In MySQL mode the URL-state log may write a URL's row before the dupefilter does;
    a kill then must not leave the link looking seen, with no request to resume."""
    table = MySQLURLTable(mysql_url, "job-1")
    fingerprint = url_fingerprint("http://e.com/c")
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    table.set_states([URLState(fingerprint, "http://e.com/c", 1, "running", now)])
    assert table.contains_many([fingerprint]) == set() and table.count() == 0
    table.add_many([SeenURL(fingerprint, "http://e.com/c", 1, request=b"{}")])
    assert table.contains_many([fingerprint]) == {fingerprint} and table.waiting(b"", 10) == [(fingerprint, b"{}")]
    table.close()


def test_a_resume_under_other_fingerprint_settings_still_ends_every_url(tmp_path, serve):
    """A job stopped with URL_STRIP_TRAILING_SLASH off and resumed with it on: its waiting
    URLs have other fingerprints now, and each still ends once."""
    root = tmp_path / "site"
    for name, links in {"": ["/a/", "/b/"], "a": ["/c/"], "b": ["/c/"], "c": []}.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "index.html").write_text(page_html(name or "home", "text", links))
    site = serve(root)
    workdir, jobdir = tmp_path / "work", tmp_path / "job"
    workdir.mkdir()
    settings = {"JOBDIR": jobdir, "DOWNLOAD_DELAY": 1, "DOWNLOAD_DELAY_JITTER": 0}
    first = crawl_command(site.url + "/", 3, {**settings, "URL_STRIP_TRAILING_SLASH": "false"})
    assert stop_crawl_when(first, workdir, lambda: len(site.paths()) >= 1) == 0
    assert len(site.paths()) < 4, "stopped before the end"

    resumed = run_project(crawl_command(site.url + "/", 3, {**settings, "URL_STRIP_TRAILING_SLASH": "true"}), workdir)

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert sorted(set(site.paths())) == ["/", "/a/", "/b/", "/c/"]
    assert_ledger(json.loads((workdir / "stats.json").read_text())["stats"])
    with sqlite3.connect(jobdir / "frontier.sqlite") as frontier:
        assert frontier.execute("SELECT COUNT(*) FROM frontier WHERE state = 0").fetchone() == (0,)


# The database refuses every batch, and the spill file cannot be written either.
LOST_STORAGE = """
from topicspider.pipelines import storage
from topicspider.storage import StorageError
def refuse(store, batch):
    raise StorageError("the database is gone")
def cannot_spill(path, pages):
    raise OSError("No space left on device")
storage.write_isolating = refuse
storage.spill_pages = cannot_spill
"""


def test_pages_neither_stored_nor_spilled_wait_for_the_resume(tmp_path, serve):
    depths = generate_site(tmp_path / "site", pages=12, links_per_page=3, seed=8)
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": tmp_path / "job", "STORAGE_RETRY_TIMES": 0, "DOWNLOAD_DELAY": 0})
    lost = patched_command(command, LOST_STORAGE)

    first = run_project(lost, workdir)

    assert (workdir / "stats.json").exists(), first.stderr[-3000:]
    stats = json.loads((workdir / "stats.json").read_text())["stats"]
    assert stats["storage/pages_lost"] == len(depths), first.stderr[-2000:]
    assert f"{len(depths)} URLs left waiting for a resume" in first.stderr
    resumed = run_project(command, workdir)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(_stored(workdir, "")) == len(depths)
    assert Counter(site.paths()) == Counter({path: 2 for path in depths})

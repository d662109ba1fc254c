"""De-duplication: canonical fingerprints, the bounded LRU with its exact store, and
pause/resume with JOBDIR, against real crawls."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter

import pytest
from conftest import assert_ledger, patched_command, run_project, stop_crawl_when
from scrapy import Request

from topicspider.fingerprint import CanonicalURLFingerprinter, url_fingerprint
from topicspider.localsite import generate_site
from topicspider.lru import LRU
from topicspider.runner import crawl_command
from topicspider.storage.seen import SeenURL, open_seen_store


@pytest.mark.parametrize(("first", "second"), [
    ("http://example.com/a/", "http://example.com/a"),
    ("http://example.com/p?b=1&a=2", "http://example.com/p?a=2&b=1"),
    ("http://EXAMPLE.com/x", "http://example.com/x"),
])
def test_one_url_one_fingerprint(first: str, second: str) -> None:
    fingerprinter = CanonicalURLFingerprinter(strip_trailing_slash=True)
    assert fingerprinter.fingerprint(Request(first)) == fingerprinter.fingerprint(Request(second))


def test_fingerprints_are_raw_md5_and_count_method_and_body() -> None:
    get = url_fingerprint("http://example.com/a")
    assert isinstance(get, bytes) and len(get) == 16
    assert url_fingerprint("http://example.com/a", "POST", b"x=1") != get
    assert url_fingerprint("http://example.com/a", "POST", b"x=1") != url_fingerprint("http://example.com/a", "POST", b"x=2")
    assert url_fingerprint("http://example.com/a/", strip_trailing_slash=False) != get


def test_seen_store_is_exact_and_kept_in_the_jobdir(tmp_path) -> None:
    store = open_seen_store(str(tmp_path / "job"))
    fingerprints = [url_fingerprint(f"http://e.com/{i}") for i in range(1200)]
    store.add_many([SeenURL(fingerprint) for fingerprint in fingerprints[:1000]])
    assert store.contains_many(fingerprints) == set(fingerprints[:1000])
    store.close()
    assert open_seen_store(str(tmp_path / "job")).count() == 1000
    temporary = open_seen_store(None)
    temporary.add_many([SeenURL(fingerprint) for fingerprint in fingerprints[:3]])
    temporary.close()
    assert not temporary.path.exists()


def test_a_small_lru_refetches_nothing(tmp_path, serve, crawl):
    depths = generate_site(tmp_path / "site", pages=400, links_per_page=6, seed=11)
    site = serve(tmp_path / "site")

    small = crawl(site.url + "/", depth=max(depths.values()),
                  settings={"DUPEFILTER_LRU_CAPACITY": 50, "DUPEFILTER_FLUSH_SIZE": 10})

    requested = Counter(site.paths())
    assert set(requested) == set(depths) and max(requested.values()) == 1
    assert len(small.pages()) == 400
    stats = small.stats
    assert stats["dupefilter/lru_evictions"] >= 350
    assert stats["dupefilter/store_lookups"] > 0 and stats["dupefilter/store_hits"] > 0
    assert stats["dupefilter/filtered"] > 0

    large = crawl(site.url + "/", depth=max(depths.values()), settings={"DUPEFILTER_LRU_CAPACITY": 100_000})
    assert set(large.pages()) == set(small.pages())
    assert "dupefilter/store_lookups" not in large.stats


def test_links_to_urls_memory_knows_make_no_request(tmp_path, serve, crawl):
    depths = generate_site(tmp_path / "site", pages=200, links_per_page=6, seed=3)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=max(depths.values()))

    assert result.returncode == 0, result.stderr[-2000:]
    requested = Counter(site.paths())
    assert set(requested) == set(depths) and max(requested.values()) == 1
    assert len(result.pages()) == 200
    stats = result.stats
    # Counted as the dupefilter's duplicates too; the rest of those are links whose
    # request was on its way to the frontier when another page's link was read.
    assert stats["links/known"] <= stats["dupefilter/filtered"]
    assert stats["links/known"] >= 0.8 * stats["dupefilter/filtered"] > 0


def test_pause_and_resume_with_jobdir(tmp_path, serve):
    depths = generate_site(tmp_path / "site", pages=150, links_per_page=4, seed=5)
    site = serve(tmp_path / "site")
    workdir, jobdir = tmp_path / "work", tmp_path / "job"
    workdir.mkdir()
    command = crawl_command(site.url + "/", max(depths.values()), {
        "JOBDIR": jobdir, "DOWNLOAD_DELAY": 0.02, "DUPEFILTER_LRU_CAPACITY": 40,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
    })
    # SIGINT is what Ctrl-C sends; Scrapy stops gracefully.
    assert stop_crawl_when(command, workdir, lambda: len(site.paths()) >= 40) == 0
    first_run = len(site.paths())
    assert 40 <= first_run < 150, "the crawl must be stopped mid-way"

    resumed = run_project(command, workdir)

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    requested = Counter(site.paths())
    assert set(requested) == set(depths), "no URL that was waiting is lost"
    assert max(requested.values()) == 1, "no URL is fetched twice"
    job = (jobdir / "topicspider-job").read_text().strip()
    assert re.fullmatch(r"job-[0-9a-f]{8}", job) and f"Resuming job {job}:" in resumed.stderr
    with sqlite3.connect(workdir / "topicspider.db") as db:
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone() == (150,)


# The store fails once on a read and once on a write, as a locked SQLite file would.
FLAKY_STORE = """
import sqlite3
from topicspider.storage import seen
failed = set()
def flaky(name):
    real = getattr(seen.SQLiteSeenStore, name)
    def method(self, fingerprints):
        if name not in failed:
            failed.add(name)
            raise sqlite3.OperationalError("database is locked")
        return real(self, fingerprints)
    return method
seen.SQLiteSeenStore.contains_many = flaky("contains_many")
seen.SQLiteSeenStore.add_many = flaky("add_many")
"""


def test_a_failing_store_loses_nothing_and_fetches_nothing_twice(tmp_path, serve):
    depths = generate_site(tmp_path / "site", pages=60, links_per_page=4, seed=9)
    site = serve(tmp_path / "site")
    command = crawl_command(site.url + "/", max(depths.values()), {
        "DOWNLOAD_DELAY": 0, "DUPEFILTER_LRU_CAPACITY": 5, "DUPEFILTER_FLUSH_SIZE": 5, "JOBDIR": tmp_path / "job"})
    command = patched_command(command, FLAKY_STORE)
    (tmp_path / "work").mkdir()

    result = run_project(command, tmp_path / "work", timeout=90)

    assert result.returncode == 0, result.stderr[-2000:]
    requested = Counter(site.paths())
    assert set(requested) == set(depths) and max(requested.values()) == 1
    stats = json.loads((tmp_path / "work" / "stats.json").read_text())["stats"]
    assert stats["scheduler/store_check_errors"] == 1 and stats["dupefilter/store_write_errors"] == 1
    assert stats["storage/pages_written"] == 60
    # A look-up that failed, with a link asked for again meanwhile, once left every later
    # URL unmarked: a resume would have fetched the whole crawl again.
    with sqlite3.connect(tmp_path / "job" / "frontier.sqlite") as frontier:
        assert frontier.execute("SELECT state, COUNT(*) FROM frontier GROUP BY state").fetchall() == [(1, 60)]


def test_the_lru_forgets_the_least_recently_used_and_a_look_is_not_a_use() -> None:
    lru: LRU[str, int] = LRU(2)
    assert lru.put("a", 1) == 0 and lru.put("b", 2) == 0
    assert lru.touch("a")  # now b is the least recent
    assert "b" in lru  # asking is not using: b stays the least recent
    assert lru.put("c", 3) == 1
    assert "b" not in lru and lru.get("a") == 1 and lru.get("c") == 3 and len(lru) == 2
    assert not lru.touch("b") and lru.get("b") is None
    with pytest.raises(ValueError, match="at least 1"):
        LRU(0)


# The spider's callback raises for one page, as a bug of ours would.
FAILING_CALLBACK = """
from topicspider.spiders.topic import TopicSpider
real = TopicSpider._page_item
def page_item(self, response, depth, analysis):
    if response.url.endswith("/p3.html"):
        raise RuntimeError("a bug while reading the page")
    return real(self, response, depth, analysis)
TopicSpider._page_item = page_item
"""


def test_a_page_whose_callback_raises_ends_as_an_error(tmp_path, serve):
    """Its URL was counted done, and its page was not stored: lost without a word."""
    depths = generate_site(tmp_path / "site", pages=12, links_per_page=3, seed=4)
    site = serve(tmp_path / "site")
    command = crawl_command(site.url + "/", max(depths.values()), {"DOWNLOAD_DELAY": 0, "JOBDIR": tmp_path / "job"})
    command = patched_command(command, FAILING_CALLBACK)
    (tmp_path / "work").mkdir()

    result = run_project(command, tmp_path / "work", timeout=90)

    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads((tmp_path / "work" / "stats.json").read_text())["stats"]
    assert stats["spider_exceptions/RuntimeError"] == 1
    assert stats["ledger/error/RuntimeError"] == 1 and stats["ledger/done"] == 11 == stats["storage/pages_written"]
    assert_ledger(stats)

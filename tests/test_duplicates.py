"""Duplicate content (topicspider.duplicates), without a crawler."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from conftest import run_project, stop_crawl_when
from test_crawl import write

from tests.services import query
from topicspider.localsite import page_html
from topicspider.runner import crawl_command
from topicspider.duplicates import (
    SIMHASH_MAX_CHARS,
    ContentIndex,
    NearDuplicateIndex,
    content_digest,
    distance,
    simhash,
)

WORDS = ("crawler robots delay topic page link site queue fetch parse store index score title body "
         "spreadsheet formula chart table cell column row sheet print export import macro filter").split()


def some_text(seed: int, words: int = 600) -> str:
    chooser = random.Random(seed)
    return " ".join(chooser.choice(WORDS) + str(chooser.randrange(50)) for _ in range(words))


def test_the_digest_reads_text_not_white_space() -> None:
    assert content_digest("A  title", "one\n two\tthree") == content_digest("A title", " one two three ")
    assert content_digest("A title", "one two three") != content_digest("A title", "one two four")
    assert content_digest("A title", "body") != content_digest("Another", "body"), "the title counts"


def test_a_small_edit_moves_a_few_bits_and_another_text_about_half() -> None:
    text = some_text(1)
    edited = text.replace(text.split()[300], "changed", 1)
    assert distance(simhash(text), simhash(edited)) <= 3  # type: ignore[arg-type]
    far = [distance(simhash(text), simhash(some_text(seed))) for seed in range(2, 12)]  # type: ignore[arg-type]
    assert min(far) > 12 and 24 < sum(far) / len(far) < 40, far


def test_chinese_text_has_a_simhash_and_short_texts_none() -> None:
    chinese = "".join(f"第{n}节介绍电子表格的公式和函数，以及图表的用法。" for n in range(40))
    assert simhash(chinese) is not None
    assert simhash("too short to say anything") is None


def test_only_the_start_of_a_long_text_is_read() -> None:
    text = some_text(3, 3000)
    assert len(text) > SIMHASH_MAX_CHARS
    assert simhash(text) == simhash(text[:SIMHASH_MAX_CHARS] + " and a different ending " * 50)


@pytest.mark.parametrize("max_distance", [0, 3, 7])
def test_the_near_index_finds_what_a_full_scan_finds(max_distance: int) -> None:
    chooser = random.Random(max_distance)
    index = NearDuplicateIndex(max_distance, capacity=1000)
    values = [chooser.getrandbits(64) for _ in range(1500)]
    for number, value in enumerate(values):
        index.add(value, f"u{number}")
    assert len(index) == 1000, "the oldest 500 forgotten"
    for _ in range(400):
        query = chooser.choice(values)
        for bit in chooser.sample(range(64), chooser.randrange(max_distance + 3)):
            query ^= 1 << bit
        found = [(distance(query, value), number) for number, value in enumerate(values)
                 if number >= 500 and distance(query, value) <= max_distance]
        nearest = index.nearest(query)
        if not found:
            assert nearest is None
        else:
            assert nearest is not None and nearest[1] == min(found)[0]
            assert (nearest[1], int(nearest[0][1:])) in found, "a closest one"


def test_distances_at_the_boundary() -> None:
    index = NearDuplicateIndex(3, capacity=10)
    index.add(0, "zero")
    assert index.nearest(0b111) == ("zero", 3)
    assert index.nearest(0b1111) is None
    assert index.nearest(1 << 63 | 1 << 40 | 1 << 20) == ("zero", 3), "bits spread over three blocks"


def test_the_content_index_tells_copies_and_near_copies() -> None:
    index = ContentIndex(capacity=100, max_distance=3)
    text = some_text(7)
    first = index.check("http://a/guide", content_digest("Guide", text), simhash(text))
    assert first.duplicate_of is None and first.near_duplicate_of is None
    copy = index.check("http://a/guide/index.html", content_digest("Guide", text), simhash(text))
    assert copy.duplicate_of == "http://a/guide"
    again = index.check("http://a/guide", content_digest("Guide", text), simhash(text))
    assert again.duplicate_of is None, "a page fetched again is not its own duplicate"
    edited = text + " footer2"
    near = index.check("http://a/print", content_digest("Guide", edited), simhash(edited))
    assert near.duplicate_of is None and near.near_duplicate_of == "http://a/guide" and near.bits <= 3
    other = some_text(8)
    assert index.check("http://a/other", content_digest("Other", other), simhash(other)).near_duplicate_of is None


def test_near_duplicates_are_not_looked_for_without_a_distance() -> None:
    index = ContentIndex(capacity=100, max_distance=None)
    text = some_text(9)
    index.check("http://a/one", content_digest("One", text), simhash(text))
    assert index.check("http://a/two", content_digest("Two", text), simhash(text)).near_duplicate_of is None
    assert index.near is None


def test_a_bad_distance_is_refused() -> None:
    with pytest.raises(ValueError, match="from 0 to 7, not 16"):
        NearDuplicateIndex(16, 10)


def duplicate_site(root: Path) -> None:
    """The same page under two directories (its relative link resolving apart), the
    home page as / and /index.html, and a printable copy of a news page with a footer."""
    news = some_text(20)
    guide = page_html("Guide", some_text(21), ["page.html"])
    home = page_html("Home", some_text(22), ["/index.html", "/docs/index.html", "/mirror/index.html", "/news.html",
                                             "/print/news.html"])
    write(root / "index.html", home)
    write(root / "docs" / "index.html", guide)
    write(root / "mirror" / "index.html", guide)
    write(root / "docs" / "page.html", page_html("Docs page", some_text(23), []))
    write(root / "mirror" / "page.html", page_html("Mirror page", some_text(24), []))
    write(root / "news.html", page_html("News", news, []))
    write(root / "print" / "news.html", page_html("News", news + " printed from the web site", []))


@pytest.mark.parametrize("backend", ["sqlite", "mysql"])
def test_the_same_text_under_two_urls_is_stored_once(tmp_path, serve, crawl, backend, request) -> None:
    duplicate_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    settings = {"DATABASE_URL": request.getfixturevalue("mysql_url")} if backend == "mysql" else {}

    result = crawl(site.url + "/", depth=3, settings=settings)

    assert result.returncode == 0, result.stderr[-3000:]
    read = (lambda sql: query(settings["DATABASE_URL"], sql)) if settings else result.rows
    paths = {url[len(site.url):]: near for url, near in read("SELECT url, near_duplicate_of FROM pages")}
    aliases = {(url[len(site.url):], of[len(site.url):]) for url, of in read(
        "SELECT url, duplicate_of FROM page_aliases")}
    assert {frozenset(pair) for pair in aliases} == {frozenset({"/", "/index.html"}),
                                                     frozenset({"/docs/index.html", "/mirror/index.html"})}
    assert not {alias for alias, _ in aliases} & set(paths), "an alias is not a page"
    fetched = site.paths()
    assert ("/docs/page.html" in fetched) != ("/mirror/page.html" in fetched), "a duplicate's links are not followed"
    near = {path: of[len(site.url):] for path, of in paths.items() if of}
    assert near in ({"/print/news.html": "/news.html"}, {"/news.html": "/print/news.html"})
    stats = result.stats
    assert stats["duplicates/exact"] == 2 and stats["ledger/dropped/duplicate"] == 2
    assert stats["duplicates/near"] == 1
    assert len(paths) == stats["storage/pages_written"] == 5 and stats["storage/aliases_written"] == 2


def test_duplicates_are_not_looked_for_when_turned_off(tmp_path, serve, crawl) -> None:
    duplicate_site(tmp_path / "site")
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=3, settings={"DUPLICATE_CONTENT": False})
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.pages()) == 8 and result.rows("SELECT COUNT(*) FROM page_aliases") == [(0,)]
    assert result.rows("SELECT COUNT(*) FROM pages WHERE near_duplicate_of IS NOT NULL") == [(0,)]
    assert "duplicates/exact" not in result.stats


def test_short_texts_are_not_compared() -> None:
    """Two "moved" stubs that point to different pages once had one digest, and the
    second one's link was never followed."""
    from topicspider.analysis import Page, PageRules, analyse_page

    stubs = [page_html("Moved", "This page has moved: here", [target]) for target in ("/a.html", "/b.html")]
    results = [analyse_page(Page(f"http://a.cn/{n}", stub.encode(), "utf-8", "a.cn", 1), PageRules())
               for n, stub in enumerate(stubs)]
    assert [result.content_digest for result in results] == [None, None]
    long = page_html("Guide", some_text(30), [])
    assert analyse_page(Page("http://a.cn/g", long.encode(), "utf-8", "a.cn", 1), PageRules()).content_digest


def test_a_copy_follows_its_links_when_the_first_copy_followed_none(tmp_path, serve, crawl) -> None:
    """The first copy read said nofollow (or lay at the depth limit): its links were not
    followed, and the later copy's were lost with it as a duplicate's."""
    root = tmp_path / "site"
    guide = page_html("Guide", some_text(40), ["leaf.html"])
    write(root / "index.html", page_html("Home", some_text(41), ["/first/index.html", "/hub.html"]))
    write(root / "first" / "index.html", guide.replace("<head>", '<head><meta name="robots" content="nofollow">'))
    write(root / "hub.html", page_html("Hub", some_text(42), ["/second/index.html"]))
    write(root / "second" / "index.html", guide)
    for copy in ("first", "second"):
        write(root / copy / "leaf.html", page_html(f"Leaf of {copy}", some_text(43), []))
    site = serve(root)

    result = crawl(site.url + "/", depth=3)

    assert result.returncode == 0, result.stderr[-3000:]
    fetched = site.paths()
    assert "/first/leaf.html" not in fetched, "the nofollow copy's links are not followed"
    assert "/second/leaf.html" in fetched, "the copy that may be followed is"
    assert result.rows("SELECT url, duplicate_of FROM page_aliases") == [
        (site.url + "/second/index.html", site.url + "/first/index.html")]
    assert result.stats["duplicates/exact"] == 1 and result.stats["duplicates/links_followed"] == 1
    # a third copy finds the links followed already
    index = ContentIndex(capacity=10)
    digest = content_digest("Guide", some_text(40))
    assert index.check("http://a/1", digest, None, follows=False).follow_links is False
    assert index.check("http://a/2", digest, None, follows=True).follow_links is True
    assert index.check("http://a/3", digest, None, follows=True).follow_links is False
    assert index.check("http://a/4", digest, None, follows=False).follow_links is False


def test_a_resumed_crawl_remembers_the_pages_stored_before_it_stopped(tmp_path, serve) -> None:
    """A copy met after a pause was stored again as a page of its own: each run of a
    JOBDIR crawl began with no memory of the texts stored."""
    root = tmp_path / "site"
    guide = page_html("Guide", some_text(50), [])
    write(root / "index.html", page_html("Home", some_text(51), ["/first/index.html", "/hub1.html"]))
    write(root / "first" / "index.html", guide)
    write(root / "hub1.html", page_html("Hub one", some_text(52), ["/hub2.html"]))
    write(root / "hub2.html", page_html("Hub two", some_text(53), ["/second/index.html"]))
    write(root / "second" / "index.html", guide)
    site = serve(root)
    workdir = tmp_path / "work"
    workdir.mkdir()
    command = crawl_command(site.url + "/", 3, {"JOBDIR": tmp_path / "job", "DOWNLOAD_DELAY": 0.4})
    assert stop_crawl_when(command, workdir, lambda: "/first/index.html" in site.paths()) == 0
    assert "/second/index.html" not in site.paths(), "the crawl must be stopped before the copy"
    with sqlite3.connect(workdir / "topicspider.db") as db:
        stored_before = db.execute("SELECT COUNT(*) FROM pages").fetchone()[0]

    resumed = run_project(command, workdir)

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "/second/index.html" in site.paths()
    with sqlite3.connect(workdir / "topicspider.db") as db:
        assert db.execute("SELECT url, duplicate_of FROM page_aliases").fetchall() == [
            (site.url + "/second/index.html", site.url + "/first/index.html")]
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone() == (4,)
    assert f"Duplicate content: {stored_before} stored pages remembered from before the crawl was paused" in \
        resumed.stderr


def test_the_content_index_is_saved_and_restored_whole() -> None:
    index = ContentIndex(capacity=3, max_distance=3)
    texts = [some_text(60 + n) for n in range(4)]
    for n, text in enumerate(texts):
        index.check(f"http://a/{n}", content_digest("T", text), simhash(text), follows=n % 2 == 0)
    restored = ContentIndex(capacity=3, max_distance=3)
    restored.restore(index.snapshot())
    assert restored.snapshot() == index.snapshot() and len(restored.exact) == 3
    assert restored.check("http://a/x", content_digest("T", texts[0]), None).duplicate_of is None, "forgotten"
    assert restored.check("http://a/y", content_digest("T", texts[2]), None).duplicate_of == "http://a/2"
    copy = restored.check("http://a/z", content_digest("T", texts[3]), None, follows=True)
    assert copy.duplicate_of == "http://a/3" and copy.follow_links, "whether links were followed is kept"
    edited = texts[2] + " footer"
    assert restored.check("http://a/e", content_digest("T", edited), simhash(edited)).near_duplicate_of == "http://a/2"
    before = restored.snapshot()
    for bad in ({"exact": [(b"x",)], "near": []}, {"exact": [], "near": [(1,)]}, {"near": []}):
        with pytest.raises((KeyError, TypeError, ValueError)):
            restored.restore(bad)
        assert restored.snapshot() == before, "a bad snapshot changes nothing"
    smaller = ContentIndex(capacity=1, max_distance=None)
    smaller.restore(index.snapshot())
    assert len(smaller.exact) == 1 and smaller.near is None, "a lower capacity keeps the most recent"

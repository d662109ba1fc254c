"""The search index: terms, snippets, BM25 ranking on SQLite and MySQL alike, and
``scrapy search`` over a real crawl."""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_project
from tests.services import mysql_connect, query
from topicspider.items import PageItem
from topicspider.runner import scrapy_command
from topicspider.search.fts5 import Fts5Index
from topicspider.search.index import Results, idf, indexes_text, reindex_missing, search, unindex_pages
from topicspider.search.snippet import Piece, as_text, highlight, snippet
from topicspider.search.terms import TITLE_WEIGHT, document_terms, document_text, query_terms
from topicspider.storage import Store, open_store

NOW = "2026-11-30T00:00:00+00:00"


def page(url: str, title: str, text: str, **fields: Any) -> PageItem:
    return PageItem(url=url, title=title, depth=0, http_status=200, fetched_at=NOW, text=text, **fields)


# -- terms ---------------------------------------------------------------------------


def test_a_two_character_word_is_indexed_inside_a_longer_one() -> None:
    terms = document_terms("", "新华网新闻中心报道中华人民共和国")
    assert {"新闻", "新华网", "新华", "人民", "中华人民共和国"} <= set(terms)


def test_title_terms_count_more_than_body_terms() -> None:
    terms = document_terms("Python 新闻", "python 新闻 python")
    assert terms["python"] == 2 + TITLE_WEIGHT
    assert terms["新闻"] == 1 + TITLE_WEIGHT


def test_queries_are_cut_in_precise_mode_lower_case_without_stopwords() -> None:
    assert query_terms("Python 的 新闻 新闻") == ["python", "新闻"]
    assert query_terms("中华人民共和国") == ["中华人民共和国"]
    assert query_terms("的 a") == []


def test_idf_falls_with_document_frequency_and_stays_positive() -> None:
    assert idf(100, 1) > idf(100, 10) > idf(100, 100) > 0


# -- snippets ------------------------------------------------------------------------


def test_highlight_marks_every_occurrence_longest_first_in_any_case() -> None:
    pieces = highlight("Python新闻网 and PYTHON", ["python", "新闻", "新闻网"])
    assert pieces == [Piece("Python", True), Piece("新闻网", True), Piece(" and ", False), Piece("PYTHON", True)]


def test_snippet_shows_the_window_with_most_distinct_terms() -> None:
    text = "新闻 " + "填充 " * 200 + "新闻 python 在这里 " + "填充 " * 200
    pieces = snippet(text, ["新闻", "python"], width=60)
    rendered = as_text(pieces)
    assert "[新闻] [python]" in rendered
    assert rendered.startswith("…") and rendered.endswith("…")
    assert len(rendered.replace("[", "").replace("]", "")) <= 62


def test_snippet_without_a_match_is_the_start_of_the_text() -> None:
    assert as_text(snippet("一二三四五六七八九十", ["新闻"], width=4)) == "一二三四…"
    assert snippet("", ["新闻"]) == []


# -- the index on both backends -------------------------------------------------------


@pytest.fixture(params=["sqlite", "mysql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path}/search.db" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    opened = open_store(url)
    yield opened
    opened.close()


def find(store: Store, words: str, limit: int = 10, offset: int = 0) -> Results:
    return store.transaction(lambda cursor, dialect: search(cursor, dialect, words, limit, offset))


def urls(results: Results) -> list[str]:
    return [hit.url for hit in results.hits]


CORPUS = [
    page("http://a.cn/news", "今日新闻", "新闻联播报道了经济新闻。联系 editor@a.cn", emails=["editor@a.cn"], relevance=0.8),
    page("http://a.cn/site", "新华网", "新华网是一个新闻网站，也报道体育。"),
    page("http://a.cn/python", "Python tutorial", "Learn Python programming. 学习编程语言很有趣。", relevance=0.2),
    page("http://a.cn/sport", "体育", "足球 篮球 比赛 " * 20),
]


def test_two_character_chinese_english_and_mixed_queries(store: Store) -> None:
    store.write_pages(CORPUS)

    news = find(store, "新闻")
    assert news.total == 2
    assert urls(news) == ["http://a.cn/news", "http://a.cn/site"], "in the title and twice in the text ranks first"
    assert news.hits[0].emails == ["editor@a.cn"] and news.hits[0].relevance == pytest.approx(0.8)
    assert Piece("新闻", True) in news.hits[0].title_pieces
    assert "[新闻]联播" in as_text(news.hits[0].snippet)

    assert urls(find(store, "PYTHON")) == ["http://a.cn/python"]
    mixed = find(store, "python 体育")
    assert set(urls(mixed)) == {"http://a.cn/python", "http://a.cn/site", "http://a.cn/sport"}
    assert find(store, "不存在的词语").total == 0


def test_results_page_through_in_rank_order(store: Store) -> None:
    store.write_pages([page(f"http://a.cn/{n}", f"第{n}页", "新闻 " * n + "其他 内容 " * 10) for n in range(1, 8)])

    first, second = find(store, "新闻", limit=4), find(store, "新闻", limit=4, offset=4)

    assert first.total == second.total == 7
    ranked = urls(first) + urls(second)
    assert ranked == [f"http://a.cn/{n}" for n in range(7, 0, -1)], "more occurrences, higher score"
    scores = [hit.score for hit in first.hits + second.hits]
    assert scores == sorted(scores, reverse=True)


def test_the_index_follows_a_page_that_is_stored_again(store: Store) -> None:
    store.write_pages([page("http://a.cn/x", "旧标题", "足球新闻")])
    assert urls(find(store, "足球")) == ["http://a.cn/x"]

    store.write_pages([page("http://a.cn/x", "新标题", "篮球比赛")])

    assert find(store, "足球").total == 0, "the old words left the index"
    assert urls(find(store, "篮球")) == ["http://a.cn/x"]


def test_a_hostile_title_comes_back_as_text(store: Store) -> None:
    title = "<script>alert('新闻')</script> O'Reilly \"引号\"; DROP TABLE pages; --"
    store.write_pages([page("http://a.cn/evil", title, "新闻")])

    hit = find(store, "新闻 DROP").hits[0]

    assert "".join(piece.text for piece in hit.title_pieces) == title
    assert find(store, "'; DROP TABLE search_fts; --").total == 1


def test_pages_stored_before_the_index_are_indexed_by_reindex(store: Store) -> None:
    store.write_pages(CORPUS)

    def forget(cursor: Any, dialect: Any) -> None:
        cursor.execute("SELECT id FROM pages")
        unindex_pages(cursor, dialect, [int(row[0]) for row in cursor.fetchall()])

    store.transaction(forget, write=True)
    assert find(store, "新闻").total == 0

    done = reindex_missing(store.transaction, 3)
    rest = reindex_missing(store.transaction, 3)

    assert (done, rest) == (3, 1)
    assert find(store, "新闻").total == 2


def test_without_search_index_pages_are_stored_unindexed_until_reindex(store: Store, tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path}/search.db" if "sqlite" in request.node.name else request.getfixturevalue("mysql_url")
    unindexed = open_store(url, index=False)
    try:
        unindexed.write_pages(CORPUS)
    finally:
        unindexed.close()

    assert find(store, "新闻").total == 0
    assert reindex_missing(store.transaction, 10) == len(CORPUS)
    assert find(store, "新闻").total == 2


def test_a_failing_read_rolls_back_its_writes(store: Store) -> None:
    store.write_pages(CORPUS)

    def half_done(cursor: Any, dialect: Any) -> None:
        cursor.execute("SELECT id FROM pages")
        unindex_pages(cursor, dialect, [int(row[0]) for row in cursor.fetchall()])
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        store.transaction(half_done, write=True)
    assert find(store, "新闻").total == 2


# -- a real crawl, then ``scrapy search`` ----------------------------------------------


def test_a_crawl_indexes_pages_as_it_stores_them_and_scrapy_search_finds_them(crawl) -> None:
    from topicspider.localsite import spawn

    demo = Path(__file__).resolve().parent.parent / "topicspider" / "demo" / "site"
    process, port = spawn(demo)
    try:
        result = crawl(f"http://127.0.0.1:{port}/", depth=3)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert result.returncode == 0, result.stderr
    database = result.workdir / "topicspider.db"
    with sqlite3.connect(database) as connection:
        pages, indexed = connection.execute(
            "SELECT (SELECT COUNT(*) FROM pages), (SELECT COUNT(*) FROM search_fts)").fetchone()
    assert pages >= 5 and indexed == pages, "every stored page is in the index"

    chinese = run_project(scrapy_command("search", "公式"), result.workdir)
    english = run_project(scrapy_command("search", "spreadsheet", "-n", "1"), result.workdir)
    nothing = run_project(scrapy_command("search", "的"), result.workdir)

    assert chinese.returncode == 0, chinese.stderr
    assert "/guide/formulas.html" in chinese.stdout and "[公式]" in chinese.stdout
    assert english.returncode == 0, english.stderr
    lines = english.stdout.splitlines()
    assert "/guide/english.html" in english.stdout and "[Spreadsheet]" in english.stdout
    assert lines[0].startswith(tuple("123456789")) and lines[0].endswith("1-1:")
    assert "No searchable words" in nothing.stdout


def test_scrapy_search_reports_a_bad_database_in_one_line(tmp_path: Path) -> None:
    done = run_project(scrapy_command("search", "新闻", "-s", "DATABASE_URL=mysql://root:secret@127.0.0.1:1/x"), tmp_path)

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "topicspider: error: cannot connect to MySQL at 127.0.0.1:1: Can't connect to MySQL server on "
        "'127.0.0.1' ([Errno 111] Connection refused) (2003)"]
    assert "secret" not in done.stdout + done.stderr


def test_mysql_and_sqlite_rank_alike(tmp_path: Path, mysql_url: str) -> None:
    stores = [open_store(f"sqlite:///{tmp_path}/alike.db"), open_store(mysql_url)]
    try:
        rankings = []
        for each in stores:
            each.write_pages(CORPUS)
            found = find(each, "新闻 python 体育")
            rankings.append([(hit.url, round(hit.score, 9)) for hit in found.hits])
    finally:
        for each in stores:
            each.close()
    assert rankings[0] == rankings[1]
    assert query(mysql_url, "SELECT COUNT(*) FROM search_index_pages") == [(len(CORPUS),)]


def test_a_query_word_no_page_holds_whole_is_looked_up_by_its_parts(store: Store) -> None:
    store.write_pages([page("http://a.cn/u", "招聘", "北京大学生前来应聘")])

    found = find(store, "北京大学")

    assert urls(found) == ["http://a.cn/u"]
    assert set(found.terms) == {"北京", "大学"}


def test_a_page_twice_in_one_batch_is_indexed_once_as_its_last_copy(store: Store) -> None:
    store.write_pages([page("http://a.cn/x", "一", "足球"), page("http://a.cn/x", "二", "篮球")])

    assert find(store, "足球").total == 0 and urls(find(store, "篮球")) == ["http://a.cn/x"]


def test_a_page_stored_again_without_the_index_leaves_it_until_reindex(store: Store, tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    store.write_pages([page("http://a.cn/x", "旧", "足球")])
    url = f"sqlite:///{tmp_path}/search.db" if "sqlite" in request.node.name else request.getfixturevalue("mysql_url")
    unindexed = open_store(url, index=False)
    try:
        unindexed.write_pages([page("http://a.cn/x", "新", "篮球")])
    finally:
        unindexed.close()

    assert find(store, "足球").total == 0, "no stale postings"
    assert reindex_missing(store.transaction, 10) == 1
    assert urls(find(store, "篮球")) == ["http://a.cn/x"]


def test_reindex_leaves_alone_a_page_a_crawl_indexed_meanwhile(store: Store) -> None:
    store.write_pages([page("http://a.cn/x", "x", "足球")])
    stored = page_id(store, "http://a.cn/x")
    store.transaction(lambda cursor, dialect: unindex_pages(cursor, dialect, [stored]), write=True)
    reads: list[Any] = []

    def crawl_writes_between(work: Any, *, write: bool = False) -> Any:
        if write and reads:  # the crawl stores the page again between reindex's read and write
            store.write_pages([page("http://a.cn/x", "x", "篮球")])
        result = store.transaction(work, write=write)
        reads.append(result)
        return result

    assert reindex_missing(crawl_writes_between, 10) == 1
    assert find(store, "足球").total == 0 and urls(find(store, "篮球")) == ["http://a.cn/x"]


def page_id(store: Store, url: str) -> int:
    def read(cursor: Any, dialect: Any) -> int:
        cursor.execute(dialect.sql("SELECT id FROM pages WHERE url = ?"), (url,))
        return int(cursor.fetchone()[0])

    return store.transaction(read)


def test_query_syntax_in_a_query_is_only_words(store: Store) -> None:
    store.write_pages([page("http://a.cn/t", "教程", "UTF 编码 NEAR 教程"), page("http://a.cn/o", "其他", "其他 内容")])

    assert urls(find(store, 'NEAR("教程" "utf") OR * AND -内容 ^')) == ["http://a.cn/t", "http://a.cn/o"]
    assert find(store, '"').total == 0


def test_an_index_term_with_punctuation_or_spaces_stays_one_term(tmp_path: Path) -> None:
    # The segmenter splits such runs today; a user dictionary's word may still hold them.
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    try:
        store.write_pages([page("http://a.cn/c", "c", "c", search_terms=Counter({"c++": 2, "utf-8": 1, "a b": 1}))])
        frequencies = store.transaction(lambda cursor, dialect: Fts5Index.document_frequencies(
            cursor, ["c++", "utf-8", "a b", "c", "utf", "a"]))
    finally:
        store.close()
    assert frequencies == {"c++": 1, "utf-8": 1, "a b": 1}


def test_terms_given_as_the_fts5_text_rank_as_terms_given_as_counts(store: Store, tmp_path: Path) -> None:
    # The page analysis hands SQLite's index the text it takes (PageRules.index_text), and
    # MySQL's its counts; a text that reaches MySQL's index is counted again from the page.
    as_text = [page(item.url, item.title, item.text, search_terms=document_text(document_terms(item.title, item.text)))
               for item in CORPUS]
    counted = open_store(f"sqlite:///{tmp_path}/counted.db")
    try:
        counted.write_pages(CORPUS)
        store.write_pages(as_text)
        for words in ("新闻", "python", "足球 新闻", "新华网"):
            expected = [(hit.url, round(hit.score, 9)) for hit in find(counted, words).hits]
            assert [(hit.url, round(hit.score, 9)) for hit in find(store, words).hits] == expected, words
    finally:
        counted.close()


def test_only_sqlite_urls_index_text() -> None:
    assert indexes_text("sqlite:///topicspider.db") and indexes_text("SQLite:////tmp/x.db")
    assert not indexes_text("mysql://root@127.0.0.1/test") and not indexes_text("mysql+pymysql://u@h/d")


def test_the_fts5_text_repeats_each_term_its_count_as_one_token() -> None:
    assert document_text({"新闻": 2, "c++": 1, "a b": 1, "none": 0, "": 3}) == "新闻 新闻 c\ue02b\ue02b a\ue020b"
    assert document_text({"中文abc3": 1, "a·b": 2, "x.y": 1}) == "中文abc3 a·b a·b x\ue02ey"
    assert document_text({}) == ""


def test_a_page_that_becomes_an_alias_leaves_the_index(store: Store) -> None:
    store.write_pages([page("http://a.cn/x", "足球", "足球新闻 " * 10), page("http://a.cn/y", "篮球", "篮球新闻 " * 10)])
    store.write_pages([page("http://a.cn/x", "篮球", "篮球新闻 " * 10, duplicate_of="http://a.cn/y")])

    assert find(store, "足球").total == 0
    assert urls(find(store, "篮球")) == ["http://a.cn/y"]


def test_an_index_of_schema_4_is_converted_with_its_ranking(tmp_path: Path) -> None:
    from topicspider.storage.sqlite import MIGRATIONS

    corpus = [*CORPUS, page("http://a.cn/empty", "", "")]  # indexed, with no terms: it counts in N
    fresh = open_store(f"sqlite:///{tmp_path}/fresh.db")
    fresh.write_pages(corpus)
    expected = [(hit.url, round(hit.score, 9)) for hit in find(fresh, "新闻 python 体育").hits]
    fresh.close()
    with sqlite3.connect(tmp_path / "old.db") as old:  # as topicspider wrote it before FTS5
        for version in range(1, 5):
            old.executescript(f"{MIGRATIONS[version]}; PRAGMA user_version = {version};")
        for number, item in enumerate(corpus, 1):
            old.execute("INSERT INTO pages (id, url, title, depth, http_status, fetched_at, relevance, text, "
                        "content_type, encoding, content_length) VALUES (?, ?, ?, 0, 200, ?, ?, ?, '', '', 0)",
                        (number, item.url, item.title, NOW, item.relevance, item.text))
            counts = document_terms(item.title, item.text)
            old.execute("INSERT INTO search_docs VALUES (?, ?)", (number, sum(counts.values())))
            old.executemany("INSERT INTO search_postings VALUES (?, ?, ?)",
                            [(term, number, tf) for term, tf in counts.items()])

    upgraded = open_store(f"sqlite:///{tmp_path}/old.db")
    try:
        converted = [(hit.url, round(hit.score, 9)) for hit in find(upgraded, "新闻 python 体育").hits]
    finally:
        upgraded.close()
    assert converted == expected and len(expected) == len(CORPUS)
    with sqlite3.connect(tmp_path / "old.db") as db:
        assert db.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone() == (len(corpus),)
    with sqlite3.connect(tmp_path / "old.db") as db:
        assert {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'search_%'")
                if not name.startswith("search_fts_")} == {"search_fts", "search_vocab"}


# -- MySQL's segments ------------------------------------------------------------------

SPORTS = ["足球", "篮球", "排球", "网球", "乒乓球", "羽毛球", "棒球"]


def one_page_batches(count: int, prefix: str = "") -> list[list[PageItem]]:
    """``count`` batches of one page each: each is a segment of its own on MySQL."""
    return [[page(f"http://a.cn/{n}", f"{prefix}第{n}页", f"{SPORTS[n % len(SPORTS)]}新闻 " * (1 + n % 4) + "比赛 内容")]
            for n in range(count)]


def ranked(store: Store, words: str) -> list[tuple[str, float]]:
    return [(hit.url, round(hit.score, 9)) for hit in find(store, words, limit=50).hits]


def segment_tiers(mysql_url: str) -> list[int]:
    return [int(tier) for (tier,) in query(mysql_url, "SELECT tier FROM search_segment_info ORDER BY tier")]


def test_mysql_segments_merge_and_rank_as_sqlite(tmp_path: Path, mysql_url: str) -> None:
    batches = one_page_batches(25)
    batches[5].append(page("http://a.cn/extra", "另一页", "足球 比赛"))
    # Page 5 stored again before the merge: its dead and live postings meet in one segment.
    batches.insert(7, [page("http://a.cn/5", "改版5", "游泳 " * 9)])
    # Pages stored again, with other words, once their first segments are merged.
    again = [[page(f"http://a.cn/{n}", f"改版{n}", "游泳 跳水 " * (n + 1))] for n in (0, 3, 11)]
    stores = [open_store(f"sqlite:///{tmp_path}/alike.db"), open_store(mysql_url)]
    try:
        for each in stores:
            for batch in batches + again:
                each.write_pages(batch)
        rankings = [[ranked(each, words) for words in ("新闻", "足球 比赛", "游泳", "改版", "第0页 第5页")]
                    for each in stores]
    finally:
        for each in stores:
            each.close()
    assert rankings[0] == rankings[1]
    assert {url for url, _ in rankings[1][2]} == {"http://a.cn/11", "http://a.cn/5", "http://a.cn/3", "http://a.cn/0"}
    assert rankings[1][4] == [], "a page's old words are dead in the merged segment"
    # 29 segments written: two merges into tier 1 left 9 of tier 0 beside them.
    assert segment_tiers(mysql_url) == [0] * 9 + [1, 1]
    assert query(mysql_url, "SELECT COUNT(*) FROM search_dead") == [(4,)]


def test_merged_blobs_stay_within_half_the_server_packet() -> None:
    from topicspider.search.segments import MAX_MERGED_TIER, POSTING, tier_within_packet

    assert tier_within_packet(16 * 2**20) == tier_within_packet(4 * 2**20) == MAX_MERGED_TIER == 3
    assert tier_within_packet(2**20) == 2 and tier_within_packet(2**20) < tier_within_packet(2**22)
    assert tier_within_packet(POSTING.size * 100 * 2) == 0 and tier_within_packet(1024) == -1


def test_mysql_an_indexed_page_cannot_be_deleted_from_under_the_index(mysql_url: str) -> None:
    import pymysql

    store = open_store(mysql_url)
    try:
        store.write_pages([page("http://a.cn/1", "一", "足球")])
    finally:
        store.close()
    with pytest.raises(pymysql.err.IntegrityError, match="1451"):  # its postings would stay behind
        query(mysql_url, "DELETE FROM pages WHERE url = 'http://a.cn/1'")


def test_mysql_a_segment_whose_pages_are_all_stored_again_is_deleted(mysql_url: str) -> None:
    store = open_store(mysql_url)
    try:
        store.write_pages([page("http://a.cn/1", "一", "足球"), page("http://a.cn/2", "二", "篮球")])
        store.write_pages([page("http://a.cn/1", "一", "排球")])
        assert query(mysql_url, "SELECT COUNT(*) FROM search_dead") == [(1,)]
        store.write_pages([page("http://a.cn/2", "二", "网球")])
        assert urls(find(store, "排球 网球")) and find(store, "足球 篮球").total == 0
    finally:
        store.close()
    assert query(mysql_url, "SELECT pages, live FROM search_segment_info ORDER BY id") == [(1, 1), (1, 1)]
    assert query(mysql_url, "SELECT COUNT(*) FROM search_dead") == [(0,)]
    assert query(mysql_url, "SELECT COUNT(DISTINCT segment) FROM search_segments") == [(2,)]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
def test_mysql_a_merge_cut_short_is_rolled_back_and_logged_once(mysql_url: str, strict: bool, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    from topicspider.search import segments

    monkeypatch.setattr(segments, "GROUP_CONCAT_MAX_LEN", 30)  # under two postings: GROUP_CONCAT cuts
    caplog.set_level(logging.DEBUG, logger="topicspider.storage.mysql")
    store = open_store(mysql_url)
    if not strict:  # a cut blob is then a warning, not an error
        with store._connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute("SET SESSION sql_mode = ''")
    try:
        for batch in one_page_batches(12):
            store.write_pages(batch)
        assert find(store, "新闻").total == 12
    finally:
        store.close()
    assert segment_tiers(mysql_url) == [0] * 12, "nothing merged, nothing lost"
    failures = [record for record in caplog.records if "merging segments failed" in record.getMessage()]
    assert [record.levelname for record in failures] == ["WARNING", "DEBUG", "DEBUG"]


def test_mysql_no_merge_while_another_connection_merges(mysql_url: str, mysql_server: str) -> None:
    from topicspider.search.segments import MERGE_LOCK
    from topicspider.storage.mysql import open_connection

    _, other = open_connection(mysql_url)
    store = open_store(mysql_url)
    try:
        with another_database(mysql_server) as elsewhere, elsewhere.cursor() as cursor:
            cursor.execute(f"SELECT GET_LOCK({MERGE_LOCK}, 0)")  # another crawl's database merges
            for batch in one_page_batches(10):
                store.write_pages(batch)
        assert segment_tiers(mysql_url) == [1], "merged, whatever another database does"
        with other.cursor() as cursor:
            cursor.execute(f"SELECT GET_LOCK({MERGE_LOCK}, 0)")
        for batch in one_page_batches(20)[10:]:
            store.write_pages(batch)
        assert segment_tiers(mysql_url) == [0] * 10 + [1]
        with other.cursor() as cursor:
            cursor.execute(f"SELECT RELEASE_LOCK({MERGE_LOCK})")
        store.write_pages(one_page_batches(21)[20])
        assert segment_tiers(mysql_url) == [0, 1, 1]
        assert find(store, "新闻").total == 21
    finally:
        store.close()
        other.close()


def test_mysql_an_index_of_schema_6_is_converted_with_its_ranking(tmp_path: Path, mysql_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from topicspider.search import segments
    from topicspider.storage.mysql import MIGRATIONS, open_connection

    monkeypatch.setattr(segments, "CONVERTED_IDS", 2)  # pages 1 to 5: three segments

    corpus = [*CORPUS, page("http://a.cn/empty", "", "")]  # indexed, with no terms: it counts in N
    fresh = open_store(f"sqlite:///{tmp_path}/fresh.db")
    fresh.write_pages(corpus)
    expected = ranked(fresh, "新闻 python 体育")
    fresh.close()
    old = mysql_schema_6(mysql_url, corpus)
    with old.cursor() as cursor:  # the migration stopped once, its first segment converted
        cursor.execute("SELECT MAX(version) FROM topicspider_schema")
        assert cursor.fetchone() == (6,)
        for statement in MIGRATIONS[7][:4]:
            cursor.execute(statement)
        segments._convert_range(cursor, 0)
    old.commit()
    old.close()

    _, upgraded_connection = open_connection(mysql_url)
    upgraded_connection.close()
    upgraded = open_store(mysql_url)
    try:
        assert ranked(upgraded, "新闻 python 体育") == expected and len(expected) == len(CORPUS)
        upgraded.write_pages([page("http://a.cn/sport", "体育", "足球 " * 3)])  # stored again: its old postings die
        assert find(upgraded, "篮球").total == 0 and urls(find(upgraded, "足球")) == ["http://a.cn/sport"]
    finally:
        upgraded.close()
    assert query(mysql_url, "SELECT COUNT(*) FROM search_index_pages") == [(len(corpus),)]
    assert query(mysql_url, "SELECT id, pages FROM search_segment_info WHERE id <= 3 ORDER BY id") == [
        (1, 1), (2, 2), (3, 2)]
    tables = {name for (name,) in query(mysql_url, "SELECT table_name FROM information_schema.tables "
                                                   "WHERE table_schema = DATABASE() AND table_name LIKE 'search%%'")}
    assert tables == {"search_segments", "search_segment_info", "search_index_pages", "search_dead"}


def segments_primary_key(mysql_url: str) -> list[str]:
    return [str(name).lower() for (name,) in query(
        mysql_url, "SELECT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() "
                   "AND table_name = 'search_segments' AND index_name = 'PRIMARY' ORDER BY seq_in_index")]


def test_mysql_a_segments_rows_lie_together(mysql_url: str) -> None:
    """Regression: ordered by term, a segment's rows were spread over the whole table,
    so each merge read all of it, and each batch wrote all over it: in a 20,000-page
    crawl on MariaDB's default 128 MB buffer pool, a merge of ten 100-page segments took
    0.3 s at the start and 1.8 s at the end (docs/benchmarks.md)."""
    open_store(mysql_url).close()
    assert segments_primary_key(mysql_url) == ["segment", "term"]


def test_mysql_an_index_of_schema_7_is_ordered_by_segment_with_its_ranking(tmp_path: Path, mysql_url: str) -> None:
    from topicspider.search.segments import order_by_segment
    from topicspider.storage.mysql import SCHEMA_VERSION, apply_migration

    fresh = open_store(f"sqlite:///{tmp_path}/fresh.db")
    fresh.write_pages(CORPUS)
    expected = ranked(fresh, "新闻 python 体育")
    fresh.close()
    old = mysql_schema_6(mysql_url, CORPUS)
    with old.cursor() as cursor:  # schema 7 as topicspider made it: its segments ordered by term
        apply_migration(old, cursor, 7)
    old.commit()
    old.close()
    assert segments_primary_key(mysql_url) == ["term", "segment"]

    upgraded = open_store(mysql_url)
    try:
        assert ranked(upgraded, "新闻 python 体育") == expected and len(expected) == len(CORPUS)
    finally:
        upgraded.close()
    assert segments_primary_key(mysql_url) == ["segment", "term"]
    assert query(mysql_url, "SELECT MAX(version) FROM topicspider_schema") == [(SCHEMA_VERSION,)]
    connection = mysql_connect(mysql_url)
    try:
        order_by_segment(connection)  # an upgrade that stopped before recording its version runs it again
    finally:
        connection.close()
    assert segments_primary_key(mysql_url) == ["segment", "term"]


def test_mysql_two_writers_merging_together_lose_no_page(mysql_url: str) -> None:
    from topicspider.storage import StorageError

    def write(worker: int) -> None:
        store = open_store(mysql_url)
        try:
            for n in range(40):
                batches = [[page(f"http://a.cn/{worker}/{n}/{k}", f"第{n}页", f"{SPORTS[k]}新闻 比赛") for k in range(2)]]
                if n % 3 == 2:  # pages stored again, maybe in a segment the other worker merges now
                    batches.append([page(f"http://a.cn/{worker}/{n - 2}/0", f"第{n - 2}页", f"{SPORTS[0]}新闻 再版")])
                for batch in batches:
                    write_retrying(store, batch)
        finally:
            store.close()

    def write_retrying(store: Store, batch: list[PageItem]) -> None:
        for _ in range(5):
            try:
                store.write_pages(batch)
                return
            except StorageError as exc:  # a deadlock: the storage pipeline writes the batch again
                assert exc.retryable
        raise AssertionError("five deadlocks in a row")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(write, [1, 2]))
    store = open_store(mysql_url)
    try:
        assert find(store, "新闻").total == 160 and find(store, "足球").total == 80
        assert find(store, "再版").total == 26 and find(store, "比赛").total == 160 - 26
    finally:
        store.close()
    assert query(mysql_url, "SELECT SUM(live), COUNT(*) FROM search_segment_info") == [(160, len(segment_tiers(mysql_url)))]
    assert query(mysql_url, "SELECT COUNT(*) FROM search_index_pages") == [(160,)]
    assert len(segment_tiers(mysql_url)) < 20, "merged as they went"


@contextmanager
def another_database(mysql_server: str) -> Iterator[Any]:
    """A connection to a throwaway database of its own on the test server."""
    name = f"topicspider_other_{secrets.token_hex(4)}"
    connection = mysql_connect(mysql_server, database=False)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")
            cursor.execute(f"USE {name}")
        yield connection
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        connection.close()


def test_mysql_a_conversion_cut_short_is_one_line_and_goes_on_when_opened_again(mysql_url: str,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from topicspider.config import ConfigError
    from topicspider.search import segments

    mysql_schema_6(mysql_url, CORPUS).close()
    monkeypatch.setattr(segments, "GROUP_CONCAT_MAX_LEN", 30)  # as a small max_allowed_packet would cut it
    with pytest.raises(ConfigError, match="cannot create or upgrade the schema: .*cut"):
        open_store(mysql_url)
    assert query(mysql_url, "SELECT MAX(version) FROM topicspider_schema") == [(6,)]
    monkeypatch.undo()
    store = open_store(mysql_url)
    try:
        assert urls(find(store, "新闻")) == ["http://a.cn/news", "http://a.cn/site"]
    finally:
        store.close()


def mysql_schema_6(mysql_url: str, corpus: list[PageItem]) -> Any:
    """A database as topicspider wrote it before schema 7: the search index in plain postings."""
    from topicspider.storage.mysql import apply_migration, parse_mysql_url

    connection = parse_mysql_url(mysql_url).connect()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE topicspider_schema (version INT NOT NULL)")
        for version in range(1, 7):
            apply_migration(connection, cursor, version)
        for number, item in enumerate(corpus, 1):
            cursor.execute("INSERT INTO pages (id, url_hash, url, title, depth, http_status, fetched_at, text, "
                           "content_type, encoding, content_length) VALUES (%s, UNHEX(MD5(%s)), %s, %s, 0, 200, NOW(), "
                           "%s, '', '', 0)", (number, item.url, item.url, item.title, item.text))
            counts = document_terms(item.title, item.text)
            cursor.execute("INSERT INTO search_docs VALUES (%s, %s)", (number, sum(counts.values())))
            cursor.executemany("INSERT INTO search_postings VALUES (%s, %s, %s)",
                               [(term, number, tf) for term, tf in counts.items()])
    connection.commit()
    return connection


@pytest.mark.parametrize("sql_mode", ["", "NO_BACKSLASH_ESCAPES"])
@pytest.mark.parametrize("max_stmt_length", [1_024_000, 300, 40])
def test_mysql_a_segment_keeps_any_term_and_every_posting(mysql_url: str, sql_mode: str, max_stmt_length: int) -> None:
    from topicspider.search.segments import POSTING, SegmentIndex
    from topicspider.storage.mysql import open_connection

    # Quotes, backslashes and control characters are escaped in either sql_mode; a
    # short statement limit sends the rows in several statements, one shorter than any
    # row sends each row alone.
    store = open_store(mysql_url)
    try:
        store.write_pages([page("http://a.cn/1", "一", "一"), page("http://a.cn/2", "二", "二")])
        first, second = page_id(store, "http://a.cn/1"), page_id(store, "http://a.cn/2")
    finally:
        store.close()
    pages = {first: {"it's": 2, "c:\\dir": 1, "新闻": 3, "\x00\n\x1a\"": 1}, second: {"新闻": 1, "%s": 4, "'); --": 1}}
    _, connection = open_connection(mysql_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_mode = %s", (sql_mode,))
            cursor.max_stmt_length = max_stmt_length
            SegmentIndex().write(cursor, pages)
            cursor.execute("SELECT term, segment, postings FROM search_segments WHERE segment = "
                           "(SELECT MAX(id) FROM search_segment_info)")
            rows = cursor.fetchall()
        connection.commit()
    finally:
        connection.close()
    found: dict[int, dict[str, int]] = {}
    for term, segment, postings in rows:
        for posted, batch, count, length in POSTING.iter_unpack(postings):
            assert batch == segment and length == sum(pages[posted].values())
            found.setdefault(posted, {})[term] = count
    assert found == pages

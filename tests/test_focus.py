"""Topic-focused crawls: scoring, storing, following, training and bad topics, with
real ``scrapy crawl`` runs against a local site."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_project
from topicspider import settings as defaults
from topicspider.focus import parse_topic_arguments
from topicspider.localsite import page_html

KEYWORDS = "电子表格,公式,单元格"
ON_TOPIC = "在电子表格里，公式引用单元格，单元格的值随公式更新。电子表格还能画图表。"
OFF_TOPIC = "今天的天气晴朗，适合去公园散步。明天多云，气温回升，周末可能下雨。"


def write_site(root: Path, pages: dict[str, tuple[str, str, list[str]]]) -> None:
    """``pages``: path -> (title, body, links)."""
    root.mkdir(parents=True, exist_ok=True)
    for path, (title, body, links) in pages.items():
        (root / path).write_text(page_html(title, body, links), encoding="utf-8")


@pytest.fixture
def mixed_site(tmp_path: Path) -> Path:
    """An off-topic seed linking to an on-topic and an off-topic page, each with a child."""
    root = tmp_path / "site"
    write_site(root, {
        "index.html": ("首页", OFF_TOPIC, ["on.html", "off.html", "notes"]),
        "on.html": ("电子表格教程", ON_TOPIC, ["on-child.html"]),
        "off.html": ("天气预报", OFF_TOPIC, ["off-child.html"]),
        "on-child.html": ("公式与单元格", ON_TOPIC, []),
        "off-child.html": ("电子表格的公式", ON_TOPIC, []),
    })
    # Plain text, on topic, but not an HTML page.
    (root / "notes").write_text(ON_TOPIC, encoding="utf-8")
    (root / "notes.headers").write_text("Content-Type: text/plain; charset=utf-8\n")
    return root


def crawl_log(workdir: Path) -> dict[str, str]:
    """Page path -> the relevance column of its crawl-log line."""
    fields = [line.split("\t") for line in (workdir / "crawl.log").read_text("utf-8").splitlines()]
    return {url.split("/", 3)[3]: score for _, url, _, depth, score, _ in fields if depth != "-"}


def test_focused_crawl_stores_relevant_pages_and_follows_only_their_links(mixed_site, serve, crawl):
    site = serve(mixed_site)
    # No background sample: every request is the crawl's own.
    result = crawl(site.url + "/", depth=3, topic=KEYWORDS, settings={"TOPIC_BACKGROUND_PAGES": 0})

    assert result.returncode == 0, result.stderr
    stored = dict(result.rows("SELECT url, relevance FROM pages"))
    assert set(stored) == {f"{site.url}/on.html", f"{site.url}/on-child.html"}
    assert all(score >= 1.0 for score in stored.values())
    # The off-topic page's child is on topic, but its parent's links were not followed;
    # the off-topic seed was expanded all the same.
    assert "/off-child.html" not in site.paths()
    assert {"/on.html", "/off.html", "/on-child.html"} <= set(site.paths())
    scores = crawl_log(result.workdir)
    assert float(scores["off.html"]) == 0.0 and float(scores[""]) == 0.0
    assert float(scores["on.html"]) == pytest.approx(stored[f"{site.url}/on.html"], abs=1e-4)
    assert float(scores["notes"]) == 0.0  # not HTML: no text to score, 0, no error
    stats = result.stats
    assert stats["topic/scored"] == 5 and stats["topic/relevant"] == 2 and stats["topic/irrelevant"] == 3
    assert stats["topic/dropped_irrelevant"] == 2 and stats["topic/links_not_followed"] == 1
    # In the ledger, pages off the topic (the non-HTML one included) are not kept: dropped.
    assert stats["ledger/dropped/irrelevant"] == 3 and stats["ledger/done"] == 2
    assert "spider_exceptions/count" not in stats
    report = result.report
    assert report["harvest_rate"] == 0.4 and report["pages_relevant"] == 2
    assert sum(report["relevance_histogram"].values()) == 5
    assert report["relevance_histogram"]["0.0"] == 3
    assert "relevance histogram" in result.stdout and "harvest rate" in result.stdout


def test_store_all_and_follow_all(mixed_site, serve, crawl):
    site = serve(mixed_site)
    result = crawl(site.url + "/", depth=3, topic=KEYWORDS, settings={"TOPIC_STORE_ALL": True, "TOPIC_FOLLOW_ALL": True})

    stored = dict(result.rows("SELECT url, relevance FROM pages"))
    assert len(stored) == 5
    assert stored[f"{site.url}/off.html"] == 0.0 and stored[f"{site.url}/off-child.html"] > 1.0
    assert "/off-child.html" in site.paths()


def test_without_a_topic_every_page_is_stored_and_followed(mixed_site, serve, crawl):
    site = serve(mixed_site)
    result = crawl(site.url + "/", depth=3)

    relevances = dict(result.rows("SELECT url, relevance FROM pages"))
    assert len(relevances) == 5 and set(relevances.values()) == {None}
    assert "topic/scored" not in result.stats and "harvest_rate" not in result.report


def test_empty_page_scores_zero(tmp_path, serve, crawl):
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text('<html><body><a href="empty.html">x</a></body></html>')
    (root / "empty.html").write_text("")
    site = serve(root)
    result = crawl(site.url + "/", depth=1, topic=KEYWORDS, settings={"TOPIC_STORE_ALL": True})

    assert result.returncode == 0
    assert dict(result.rows("SELECT url, relevance FROM pages"))[f"{site.url}/empty.html"] == 0.0
    assert "spider_exceptions/count" not in result.stats


def test_topic_file_weights_decide(serve, crawl, tmp_path):
    topic = tmp_path / "topic.txt"
    topic.write_text("# spreadsheets\n电子表格 3\n公式 1\n", encoding="utf-8")
    root = tmp_path / "site"
    write_site(root, {"index.html": ("首页", OFF_TOPIC, ["heavy.html", "light.html"]),
                      "heavy.html": ("电子表格", OFF_TOPIC, []), "light.html": ("公式", OFF_TOPIC, [])})
    site = serve(root)
    # The title is also the page's <h1>, so B = C: 3/√10 for "电子表格" and 1/√10 for
    # "公式", A = 5B = 4.74 and 1.58 (3.54 for both with equal weights).
    result = crawl(site.url + "/", depth=1, topic=f"@{topic}", settings={"TOPIC_THRESHOLD": 2})

    assert set(result.pages()) == {f"{site.url}/heavy.html"}
    scores = dict(result.rows("SELECT url, relevance FROM pages"))
    assert scores[f"{site.url}/heavy.html"] == pytest.approx(5 * 3 / 10**0.5, abs=1e-4)


def test_train_from_urls_and_files_then_crawl(mixed_site, serve, crawl, tmp_path):
    sample = tmp_path / "sample.html"
    sample.write_text(page_html("单元格格式", ON_TOPIC, []), encoding="utf-8")
    site = serve(mixed_site)
    result = crawl(site.url + "/", depth=3, train=f"{site.url}/on-child.html,{sample}")

    assert result.returncode == 0, result.stderr
    assert set(result.pages()) == {f"{site.url}/on.html", f"{site.url}/on-child.html"}
    # The sample was fetched before the seed, through robots.txt.
    paths = site.paths(robots=True)
    assert paths.index("/robots.txt") < paths.index("/on-child.html") < paths.index("/")


def test_topic_train_command_writes_a_topic_file_the_crawl_reuses(mixed_site, serve, tmp_path, crawl):
    site = serve(mixed_site)
    output = tmp_path / "topic.json"
    done = run_project(
        [sys.executable, "-m", "scrapy", "topic-train", "-a", f"train={site.url}/on.html,{site.url}/on-child.html",
         "-o", str(output), "-s", "DOWNLOAD_DELAY=0"],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    saved = json.loads(output.read_text("utf-8"))
    assert (saved["format"], saved["version"], saved["kind"], saved["segmenter"]) == (
        "topicspider-topic", 2, "centroid", "rjieba")
    assert [sample["source"] for sample in saved["samples"]] == [f"{site.url}/on.html", f"{site.url}/on-child.html"]
    assert {"电子表格", "公式", "单元格"} <= {term for term, _ in saved["terms"][:6]}
    # Each page's short blocks (its <h1> here) are kept, for terms of the topic (TOPIC_BLOCK_WEIGHT).
    assert saved["block_weight"] == defaults.TOPIC_BLOCK_WEIGHT and all(sample["blocks"] for sample in saved["samples"])
    # Without seeds, the background is sampled from the samples' site, from its home page on.
    assert len(saved["background"]) == 3 and "/" in site.paths()
    assert not (tmp_path / "topicspider.db").exists()

    result = crawl(site.url + "/", depth=3, topic=f"@{output}")
    assert set(result.pages()) == {f"{site.url}/on.html", f"{site.url}/on-child.html"}
    assert result.report["relevance_threshold"] == pytest.approx(saved["threshold"], abs=1e-6)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"topic": "@missing.txt"}, "cannot read topic file 'missing.txt'"),
        ({"topic": " ，, "}, "no topic keywords given"),
        ({"topic": "a", "train": "b"}, "give -a topic or -a train, not both"),
        ({"train": "nowhere.html"}, "training sample 'nowhere.html' is neither an http(s) URL nor a readable file"),
    ],
)
def test_bad_topics_stop_before_any_request(mixed_site, serve, crawl, arguments, message):
    site = serve(mixed_site)
    result = crawl(site.url + "/", **arguments)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"topicspider: error: {message}")
    assert site.requests() == []


def test_a_file_given_without_its_at_sign_is_refused_with_a_hint(mixed_site, serve, crawl, tmp_path):
    # It was taken as one keyword, "/path/to/topic.txt": every page scored 0, nothing
    # was stored, and the crawl exited 0.
    topic = tmp_path / "topic.txt"
    topic.write_text("电子表格\n公式\n")
    samples = tmp_path / "samples.txt"
    samples.write_text(f"# samples\nhttp://127.0.0.1:1/a.html\n{topic}\n")
    site = serve(mixed_site)
    for arguments, hint in (({"topic": str(topic)}, f"@{topic}"), ({"topic": "公式,words.txt"}, "@words.txt"),
                            ({"train": str(samples)}, f"@{samples}")):
        result = crawl(site.url + "/", **arguments)
        errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
        assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
        assert errors[0].startswith("topicspider: error: ") and errors[0].endswith(f"did you mean {hint}?")
    assert site.requests() == []


def test_a_feed_export_writes_chinese_as_itself(mixed_site, serve, crawl):
    site = serve(mixed_site)
    result = crawl(site.url + "/", depth=1, topic=KEYWORDS,
                   settings={"TOPIC_BACKGROUND_PAGES": 0, "FEEDS": json.dumps({"pages.jsonl": {"format": "jsonlines"}})})

    assert result.returncode == 0, result.stderr[-2000:]
    exported = (result.workdir / "pages.jsonl").read_text("utf-8")
    assert '"title": "电子表格教程"' in exported and "\\u" not in exported
    assert "search_terms" not in exported and exported.startswith('{"url": ')  # FEED_EXPORT_FIELDS


def test_a_plain_text_sample_is_still_a_sample(tmp_path):
    page = tmp_path / "page.txt"
    page.write_text("电子表格里的公式与单元格。\n")
    assert parse_topic_arguments(train=str(page)).samples == [str(page)]


def test_empty_topic_file_is_refused(mixed_site, serve, crawl, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    site = serve(mixed_site)
    result = crawl(site.url + "/", topic=f"@{empty}")

    assert result.returncode == 2 and "holds no terms" in result.stderr
    assert site.requests() == []


@pytest.mark.parametrize(
    ("settings", "arguments", "message"),
    [
        ({"TOPIC_SEGMENTER": "hanlp"}, {"topic": KEYWORDS}, "TOPIC_SEGMENTER must be one of jieba, rjieba"),
        ({"TOPIC_THRESHOLD": "-1.5"}, {"topic": KEYWORDS}, "TOPIC_THRESHOLD must be at least -1.0"),
        ({"TOPIC_THRESHOLD": "5.5"}, {"topic": KEYWORDS}, "TOPIC_THRESHOLD 5.5 is above the highest possible score"),
        ({"TOPIC_TITLE_WEIGHT": "0", "TOPIC_BODY_WEIGHT": "0"}, {"topic": KEYWORDS}, "cannot both be 0"),
        ({"TOPIC_USER_DICT": "/no/such/dict.txt"}, {"topic": KEYWORDS}, "cannot read TOPIC_USER_DICT"),
        ({"TOPIC_BEST_FIRST": "True"}, {}, "TOPIC_BEST_FIRST needs a topic"),
        ({"TOPIC_TRAIN_OUTPUT": "out.txt"}, {"topic": KEYWORDS}, "TOPIC_TRAIN_OUTPUT needs training samples"),
    ],
)
def test_bad_topic_settings_stop_before_any_request(mixed_site, serve, crawl, settings, arguments, message):
    site = serve(mixed_site)
    result = crawl(site.url + "/", settings=settings, **arguments)

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("topicspider: error: ")
    assert message in result.stderr.strip().splitlines()[-1]
    assert site.requests() == []


def test_a_sample_with_no_words_to_learn_from_ends_the_crawl_with_one_error(mixed_site, serve, crawl, tmp_path):
    """Its terms are counted where the topic is learnt, in a page-analysis process: the
    error comes back from there as the crawl's own."""
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("12345 ！？ 67 的 了 the of\n", encoding="utf-8")
    words = tmp_path / "words.txt"
    words.write_text("电子表格里的公式与单元格。\n", encoding="utf-8")
    site = serve(mixed_site)
    result = crawl(site.url + "/", train=f"{words},{numbers}")

    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if "topicspider: error:" in line or "Traceback" in line]
    assert len(errors) == 1, errors
    assert errors[0].endswith(f"topicspider: error: training sample {numbers} holds no words to learn from")
    assert not result.pages(), "no page crawled"


def test_training_samples_must_be_html_or_text_files(mixed_site, serve, crawl, tmp_path):
    sample = tmp_path / "report.pdf"
    sample.write_bytes(b"%PDF-1.4")
    site = serve(mixed_site)
    result = crawl(site.url + "/", train=str(sample))

    assert result.returncode == 2 and "is not an HTML or text file" in result.stderr
    assert site.requests() == []


def test_training_page_that_cannot_be_fetched_ends_the_crawl_before_the_seeds(mixed_site, serve, crawl):
    site = serve(mixed_site)
    result = crawl(site.url + "/", train=f"{site.url}/missing.html")

    assert result.returncode == 2
    assert f"training sample {site.url}/missing.html could not be read: HTTP 404" in result.stderr
    assert "/" not in site.paths() and "/index.html" not in site.paths()
    assert result.report["finish_reason"] == "topic_failed"


def test_best_first_fetches_the_on_topic_link_first(tmp_path, serve, crawl):
    root = tmp_path / "site"
    off = [f"off{i}.html" for i in range(12)]
    pages = {"index.html": ("电子表格", ON_TOPIC, [*off, "on.html"]), "on.html": ("公式", ON_TOPIC, [])}
    pages.update({name: ("天气", OFF_TOPIC, []) for name in off})
    write_site(root, pages)
    # The anchor text is what tells the links apart.
    index = (root / "index.html").read_text("utf-8").replace(">link to on.html<", ">电子表格公式单元格<")
    (root / "index.html").write_text(index, encoding="utf-8")
    site = serve(root)
    # No background sample: the order of requests is the crawl's own.
    settings = {"CONCURRENT_REQUESTS": 1, "TOPIC_FOLLOW_ALL": True, "TOPIC_BACKGROUND_PAGES": 0}

    breadth_first = crawl(site.url + "/", depth=1, topic=KEYWORDS, settings=settings)
    order = [path for path in site.paths() if path.endswith(".html")]
    assert breadth_first.returncode == 0 and len(order) == 13 and order[-1] == "/on.html"
    site.log_path.write_text("")
    best_first = crawl(site.url + "/", depth=1, topic=KEYWORDS, settings={**settings, "TOPIC_BEST_FIRST": True})
    order = [path for path in site.paths() if path.endswith(".html")]
    assert best_first.returncode == 0 and len(order) == 13
    # The first link may leave before the page's other links are queued; the on-topic
    # one, last on the page, goes right after.
    assert order.index("/on.html") <= 1, order


def test_a_resumed_crawl_scores_every_page(tmp_path, serve, crawl):
    # On resume, requests queued in JOBDIR go out while start() builds the topic: they
    # must wait for it, or their pages would be stored unscored and followed.
    root = tmp_path / "site"
    off = [f"off{i}.html" for i in range(20)]
    pages = {"index.html": ("电子表格", ON_TOPIC, [*off, "on.html"]), "on.html": ("公式", ON_TOPIC, [])}
    pages.update({name: ("天气", OFF_TOPIC, ["deeper.html"]) for name in off})
    pages["deeper.html"] = ("公式", ON_TOPIC, [])
    pages["sample.html"] = ("电子表格公式", ON_TOPIC, [])
    write_site(root, pages)
    (root / "sample.html.headers").write_text("Delay: 1\n")  # a slow sample: a long window
    site = serve(root)
    settings = {"JOBDIR": str(tmp_path / "job"), "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    train = f"{site.url}/sample.html"

    first = crawl(site.url + "/", depth=2, train=train, settings={**settings, "CLOSESPIDER_PAGECOUNT": 1})
    assert first.returncode == 0 and first.report["finish_reason"] == "closespider_pagecount"
    scored_first = first.stats.get("topic/scored", 0)  # the resumed run rewrites stats.json
    resumed = crawl(site.url + "/", depth=2, train=train, settings=settings)

    assert resumed.returncode == 0
    assert set(resumed.pages()) == {f"{site.url}/", f"{site.url}/on.html"}
    assert None not in {score for _, score in resumed.rows("SELECT url, relevance FROM pages")}
    # Every HTML page but the sample (21 and the seed), each scored once over the two runs.
    assert scored_first + resumed.stats["topic/scored"] == 22
    # Its parents are off topic: the crawl never asked for it (the background sample may have).
    assert "deeper.html" not in crawl_log(resumed.workdir)


def test_fetch_log_lines_of_pages_the_spider_never_reads(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write_site(root, {"index.html": ("首页", OFF_TOPIC, ["refresh.html", "moved.html"]),
                      "target.html": ("电子表格", ON_TOPIC, [])})
    (root / "refresh.html").write_text('<html><head><meta http-equiv="refresh" content="0; url=target.html">'
                                       "</head><body>电子表格</body></html>", encoding="utf-8")
    (root / "moved.html").write_text("")
    (root / "moved.html.headers").write_text("Status: 301\nLocation: /target.html\n")
    site = serve(root)
    result = crawl(site.url + "/", depth=2, topic=KEYWORDS)

    lines = [line.split("\t") for line in (result.workdir / "crawl.log").read_text("utf-8").splitlines()]
    pages = [(url.split("/", 3)[3], status, score) for _, url, status, depth, score, _ in lines if depth != "-"]
    assert ("refresh.html", "200", "-") in pages and ("moved.html", "301", "-") in pages
    assert [path for path, *_ in pages].count("target.html") == 1
    target = next(index for index, (path, *_) in enumerate(pages) if path == "target.html")
    # The refreshed page's line is written when its successor is scheduled, not at the end.
    assert pages.index(("refresh.html", "200", "-")) < target
    assert float(pages[target][2]) > 0

"""Page analysis (topicspider.analysis) on its own, and in worker processes
(topicspider.pagepool): the same results, and a worker that dies loses only its page."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.utils.project import get_project_settings
from scrapy.utils.reactor import install_reactor, is_reactor_installed
from scrapy.utils.test import get_crawler

from tests.test_focus import KEYWORDS, OFF_TOPIC, ON_TOPIC, mixed_site  # noqa: F401 (fixture)
from topicspider.analysis import Link, Page, PageRules, analyse_page
from topicspider.fingerprint import CanonicalURLFingerprinter, url_fingerprint
from topicspider.localsite import generate_site, page_html
from topicspider.runner import crawl_command, project_env
from topicspider.spiders.topic import TopicSpider
from topicspider.search.terms import document_text
from topicspider.topic.lexicon import keywords_lexicon
from topicspider.topic.score import LexiconTopic as Topic
from topicspider.topic.segment import Segmenter
from topicspider.urls import URLRules, parse_url_filter

SITE = "example.cn"
URL = "http://www.example.cn/a/page.html"


def link(url: str) -> Link:
    """The link to ``url``, with the fingerprint the frontier gives its request."""
    return Link(url, CanonicalURLFingerprinter(strip_trailing_slash=True).fingerprint(Request(url)))


def topic(**options: float) -> Topic:
    return Topic(keywords_lexicon(KEYWORDS.split(",")), Segmenter("rjieba"), **options)


def page(html: str, *, depth: int = 1, encoding: str = "utf-8", headers: tuple[str, ...] = ()) -> Page:
    return Page(URL, html.encode(encoding), encoding, SITE, depth, headers)


def test_a_links_fingerprint_is_the_one_its_request_gets() -> None:
    html = page_html("t", "x", ["中文 页.html", "/q?b=2&a=1", "/dir/", "HTTP://WWW.EXAMPLE.CN/Up", "/a%2fb?x=%E4%B8%AD",
                                "/p;jsessionid=1234?x=1"])
    analysis = analyse_page(page(html), PageRules())
    fingerprinter = CanonicalURLFingerprinter(strip_trailing_slash=True)
    assert len(analysis.links) == 6
    for found in analysis.links:
        assert found.fingerprint == fingerprinter.fingerprint(Request(found.url)), found.url


def test_title_text_emails_and_links_of_a_page() -> None:
    html = page_html("电子表格教程", ON_TOPIC + " 联系 service@example.cn", [
        "b.html", "/c", "b.html#part", "http://news.example.cn/d", "http://other.cn/e", "style.css", "mailto:x@example.cn",
    ])
    analysis = analyse_page(page(html), PageRules())
    assert analysis.title == "电子表格教程"
    assert ON_TOPIC in analysis.text and analysis.emails == ["service@example.cn", "x@example.cn"]
    assert analysis.links == [link("http://www.example.cn/a/b.html"), link("http://www.example.cn/c"),
                              link("http://news.example.cn/d")]
    assert analysis.counts == {"links/insite": 3, "links/offsite": 1, "links/dropped/extension": 1,
                               "links/dropped/scheme": 1}
    assert analysis.relevance is None and analysis.relevant is None and not analysis.noindex


def test_the_links_not_requested_are_listed_once_each_with_their_reason() -> None:
    html = page_html("t", "x", [
        "http://other.cn/e", "http://other.cn/e#again", "report.PDF", "mailto:x@example.cn", "b.html",
        "http://other.cn/f",
    ]).replace('<a href="b.html"', '<a rel="nofollow" href="b.html"')
    analysis = analyse_page(page(html, depth=3), PageRules(max_depth=3))
    reasons = {fingerprint: reason for fingerprint, reason in analysis.dropped}
    assert len(analysis.dropped) == 4  # the mailto: link is no web URL
    assert reasons == {
        url_fingerprint("http://other.cn/e"): "offsite", url_fingerprint("http://other.cn/f"): "offsite",
        url_fingerprint("http://www.example.cn/a/report.PDF"): "not_a_page",
        url_fingerprint("http://www.example.cn/a/b.html"): "nofollow",
    }
    deep = analyse_page(page(page_html("t", "x", ["b.html", "c.html", "b.html"]), depth=3), PageRules(max_depth=3))
    assert deep.links == [] and sorted(reason for _, reason in deep.dropped) == ["too_deep", "too_deep"]
    assert analyse_page(page(page_html("t", "x", ["b.html"]), depth=2), PageRules(max_depth=3)).dropped == []


def test_session_ids_are_stripped_and_traps_left_with_their_reason() -> None:
    html = page_html("t", "x", [
        "b.html?PHPSESSID=1", "b.html?PHPSESSID=2", "b.html;jsessionid=X", "rep/a/a/a/", "c.html?q=" + "y" * 3000,
    ])
    analysis = analyse_page(page(html), PageRules())
    assert analysis.links == [link("http://www.example.cn/a/b.html")]
    assert analysis.dropped == [(url_fingerprint("http://www.example.cn/a/rep/a/a/a/"), "trap")]
    assert analysis.counts["links/session_ids_stripped"] == 3 and analysis.counts["links/dropped/path_repetition"] == 1
    assert analysis.counts["links/dropped/too_long"] == 1
    # A link left as nofollow is known by the URL the crawl would request: no session id.
    nofollow = page_html("t", "x", ["d.html?sid=7"]).replace('<a href=', '<a rel="nofollow" href=')
    assert analyse_page(page(nofollow), PageRules()).dropped == [(url_fingerprint("http://www.example.cn/a/d.html"),
                                                                  "nofollow")]


def test_links_the_users_rules_refuse_are_left_as_filtered() -> None:
    rules = PageRules(url_rules=URLRules(url_filter=parse_url_filter("-/private/\n+.")))
    analysis = analyse_page(page(page_html("t", "x", ["private/b.html", "c.html", "/private/"])), rules)
    assert analysis.links == [link("http://www.example.cn/a/c.html")]
    assert analysis.dropped == [(url_fingerprint("http://www.example.cn/a/private/b.html"), "filter"),
                                (url_fingerprint("http://www.example.cn/private/"), "filter")]
    assert analysis.counts["links/dropped/url_filter"] == 2


def test_a_url_linked_nofollow_then_plainly_on_one_page_is_followed() -> None:
    html = page_html("t", "x", ["b.html", "b.html"]).replace('<a href="b.html"', '<a rel="nofollow" href="b.html"', 1)
    analysis = analyse_page(page(html), PageRules())
    assert analysis.links == [link("http://www.example.cn/a/b.html")]
    assert analysis.counts == {"robots/rel_nofollow": 1, "links/insite": 1}


def test_a_gbk_page_is_read_in_its_encoding() -> None:
    analysis = analyse_page(page(page_html("电子表格", ON_TOPIC, []), encoding="gb18030"), PageRules())
    assert analysis.title == "电子表格" and ON_TOPIC in analysis.text


def test_robots_directives_from_meta_and_header() -> None:
    noindex = page_html("t", "x", ["b.html"]).replace("<head>", '<head><meta name="robots" content="noindex">')
    analysis = analyse_page(page(noindex), PageRules())
    assert analysis.noindex and analysis.links and analysis.counts["robots/meta_noindex"] == 1
    analysis = analyse_page(page(page_html("t", "x", ["b.html"]), headers=("nofollow",)), PageRules())
    assert not analysis.noindex and analysis.links == [] and analysis.counts == {"robots/meta_nofollow": 1}
    obeying_none = PageRules(obey_meta_robots=False)
    assert analyse_page(page(noindex), obeying_none).noindex is False


def test_links_of_irrelevant_pages_are_not_followed_except_from_seeds() -> None:
    html = page_html("天气预报", OFF_TOPIC, ["b.html"])
    rules = PageRules(topic=topic())
    analysis = analyse_page(page(html), rules)
    assert analysis.relevant is False and analysis.links == []
    assert analysis.counts == {"topic/links_not_followed": 1}
    assert analyse_page(page(html, depth=0), rules).links == [link("http://www.example.cn/a/b.html")]
    assert analyse_page(page(html), PageRules(topic=topic(), follow_all=True)).links


def test_scores_and_relevance_follow_the_rules() -> None:
    html = page_html("电子表格教程", ON_TOPIC, [])
    strict = analyse_page(page(html), PageRules(topic=topic(), threshold=4.9))
    lenient = analyse_page(page(html), PageRules(topic=topic(), threshold=0.6))
    assert strict.relevance == lenient.relevance and strict.relevance is not None
    assert 0.6 < strict.relevance.score < 4.9 and strict.relevant is False and lenient.relevant is True
    assert lenient.score_seconds > 0


def test_depth_limit_counts_links_but_follows_none() -> None:
    analysis = analyse_page(page(page_html("t", "x", ["b.html"]), depth=2), PageRules(max_depth=2))
    assert analysis.links == [] and analysis.counts == {"links/insite": 1, "links/too_deep": 1}


def test_best_first_priorities_rank_the_on_topic_anchor_first() -> None:
    html = page_html("电子表格教程", ON_TOPIC, []).replace(
        "</body>", '<a href="on.html">电子表格公式</a><a href="off.html">天气</a></body>')
    links = analyse_page(page(html), PageRules(topic=topic(), best_first=True)).links
    priorities = {link.url.rsplit("/", 1)[1]: link.priority for link in links}
    assert priorities["on.html"] > priorities["off.html"] > 0


def test_a_topic_survives_pickling_with_its_added_words() -> None:
    """What a worker process receives scores exactly as the original."""
    original = Topic(keywords_lexicon(["云原生平台", "电子表格"]), Segmenter("rjieba", keep=["容器编排"]))
    copy = pickle.loads(pickle.dumps(original))
    text = "云原生平台上的容器编排，和电子表格里的公式。" * 3
    assert copy.relevance("云原生平台", [text]) == original.relevance("云原生平台", [text])
    assert copy.segmenter.terms(text) == original.segmenter.terms(text)
    assert "容器编排" in copy.segmenter.terms(text)


def run_pool(mode: str, **environment: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "tests.pagepool_crash", mode], capture_output=True, text=True,
                          timeout=120, env={**project_env(), **environment}, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_pool_is_ready_once_every_worker_has_loaded(tmp_path: Path) -> None:
    """A worker that loaded first took every start call, so the pool said it was ready
    while the second was still loading: its load then took CPU from the crawl's first
    seconds."""
    assert run_pool("ready", PAGEPOOL_CRASH_STARTED=str(tmp_path)) == {"loaded": 2}


def test_a_trained_topic_is_learnt_in_a_worker_and_no_dictionary_loads_in_the_crawler() -> None:
    """Counting the pages' terms loaded the segmenter's dictionary in the crawler's own
    process too: 57 MB kept for the whole crawl, and a fifth of a second of CPU with the
    GIL held before the first sample was asked for."""
    result = run_pool("learn")
    assert result["loaded_here"] == 0, "the crawler's process cut no text"
    assert result["same_threshold"] and result["same_samples"] and result["background"] == 4
    scores = result["scores"]
    assert isinstance(scores, list) and scores[0] > scores[1], "the topic learnt is about spreadsheets"


def test_without_workers_the_dictionaries_load_before_the_crawl_not_at_its_first_page() -> None:
    assert run_pool("inline") == {"loaded_before": 0, "loaded_after": 1, "loaded_on": ["other"], "title": "early 0"}


@pytest.mark.parametrize("mode", ["kill", "hang"])
def test_a_worker_that_dies_or_hangs_loses_only_the_page_that_did_it(mode: str) -> None:
    result = run_pool(mode)
    assert result["lost"] == ["http://www.example.cn/kill.html"]
    assert sorted(result["titles"]) == [f"page {number}" for number in range(6)]  # type: ignore[type-var]
    assert result["stats"] == {"pagepool/restarts": 1, "pagepool/lost": 1}


def test_a_site_whose_pages_always_kill_the_workers_is_quarantined() -> None:
    result = run_pool("always")
    assert result["titles"] == [] and "PagePoolFailed" not in result["failures"]  # type: ignore[operator]
    assert len(result["lost"]) == 3 and len(result["quarantined"]) == 4  # type: ignore[arg-type]
    assert result["stats"]["pagepool/lost"] == 3 and result["stats"]["pagepool/quarantined"] == 4  # type: ignore[index]
    assert result["stats"]["pagepool/sites_quarantined"] == 1  # type: ignore[index]


def test_hostile_sites_cost_their_own_pages_not_the_crawl() -> None:
    """Eight pages of two sites in a row, each killing its worker, once ended the crawl
    (six deaths in a row); now each site loses three and is quarantined, and the next
    site's pages are read."""
    result = run_pool("hostile")
    assert "PagePoolFailed" not in result["failures"], result  # type: ignore[operator]
    assert sorted(result["titles"]) == [f"good {number}" for number in range(4)]  # type: ignore[type-var]
    assert result["lost"] == [f"http://www.hostile-{site}.cn/{site}{number}.html" for site in "ab" for number in range(3)]
    assert result["quarantined"] == ["http://www.hostile-a.cn/a3.html", "http://www.hostile-b.cn/b3.html"]
    assert result["stats"]["pagepool/sites_quarantined"] == 2  # type: ignore[index]


def test_workers_that_cannot_start_end_the_crawl(tmp_path: Path) -> None:
    result = run_pool("nostart", PAGEPOOL_CRASH_NO_START=str(tmp_path / "broken"))
    assert result["titles"] == [] and "PagePoolFailed" in result["failures"]  # type: ignore[operator]
    assert result["lost"] == [] and "pagepool/lost" not in result["stats"], "no page is blamed"  # type: ignore[operator]


def test_the_workers_start_as_the_spider_is_created_before_the_crawl_opens(tmp_path: Path) -> None:
    """They load while Scrapy builds the crawl's components, with no reactor running."""
    settings = get_project_settings().copy_to_dict()
    # Whichever reactor this test process has: the spider's creation needs none running.
    settings.update({"DATABASE_URL": f"sqlite:///{tmp_path / 'crawl.db'}", "TWISTED_REACTOR": None})
    if not is_reactor_installed():
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    crawler = get_crawler(TopicSpider, settings)
    spider = TopicSpider.from_crawler(crawler, seeds="http://127.0.0.1:9/")
    try:
        assert not crawler.crawling and spider.pages.processes == 2
        assert [future.result(timeout=60) for future in spider.pages._starting] == [True, True]
        assert spider.pages.started
    finally:
        spider.pages.close()


def test_a_background_page_is_read_for_the_topic_and_its_links_only(tmp_path: Path) -> None:
    """Its digest and SimHash went unused, at half a millisecond a page."""
    settings = get_project_settings().copy_to_dict()
    settings.update({"DATABASE_URL": f"sqlite:///{tmp_path / 'crawl.db'}", "TWISTED_REACTOR": None, "PAGE_PROCESSES": 0})
    if not is_reactor_installed():
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    crawler = get_crawler(TopicSpider, settings)
    spider = TopicSpider.from_crawler(crawler, seeds="http://127.0.0.1:9/", train="http://127.0.0.1:9/a.html")
    try:
        assert spider.topic_builder is not None
        rules = spider.topic_builder.sampling_rules
        html = page_html("电子表格", "".join(f"第 {line} 行：{ON_TOPIC}" for line in range(40)), ["a.html"])
        sampled, crawled = analyse_page(page(html), rules), analyse_page(page(html), spider.rules)
    finally:
        spider.pages.close()
    assert sampled.content_digest is None and sampled.simhash is None and sampled.search_terms is None
    assert crawled.content_digest is not None and crawled.simhash is not None, "the crawl's own reading has them"
    assert sampled.terms is not None and sampled.blocks and [link.url for link in sampled.links] == [
        link.url for link in crawled.links]


def test_new_rules_reach_every_worker_and_only_pages_sent_after_them() -> None:
    result = run_pool("update")
    assert result["before_blocks"] == [[]] * 8
    assert result["after_blocks"] == [[f"after {number}", "x"] for number in range(16)]
    assert len(result["workers_after"]) == 2, "both workers read pages under the new rules"  # type: ignore[arg-type]


def test_pages_read_in_worker_processes_and_on_the_reactor_alike(mixed_site, serve, crawl) -> None:  # noqa: F811
    site = serve(mixed_site)
    runs = []
    for processes in (0, 2):
        result = crawl(site.url + "/", depth=3, settings={"PAGE_PROCESSES": processes, "TOPIC_STORE_ALL": True},
                       topic=KEYWORDS)
        assert result.returncode == 0, result.stderr
        stats = {key: value for key, value in result.stats.items()
                 if key.startswith(("topic/", "links/", "pages/")) and not key.endswith("_seconds")}
        runs.append((result.rows("SELECT url, title, relevance, text FROM pages ORDER BY url"), stats))
        (result.workdir / "topicspider.db").unlink()
    assert runs[0] == runs[1]
    assert runs[0][1]["topic/scored"] == 5 and runs[0][1]["topic/links_not_followed"] == 1


def test_search_terms_are_worked_out_for_the_pages_that_will_be_stored() -> None:
    html = page_html("电子表格新闻", ON_TOPIC, [])
    irrelevant = page_html("体育", OFF_TOPIC, [])
    noindex = html.replace("<head>", '<head><meta name="robots" content="noindex">')
    strict = PageRules(topic=topic())

    terms = analyse_page(page(html), PageRules()).search_terms
    assert terms is not None and terms["新闻"] >= 4 and "电子表格" in terms, "title terms weigh 4"
    assert analyse_page(page(html), strict).search_terms is not None
    assert analyse_page(page(irrelevant), strict).search_terms is None, "an irrelevant page is not stored"
    assert analyse_page(page(irrelevant), PageRules(topic=topic(), store_all=True)).search_terms is not None
    assert analyse_page(page(noindex), PageRules()).search_terms is None
    assert analyse_page(page(html), PageRules(search_index=False)).search_terms is None
    text = analyse_page(page(html), PageRules(index_text=True)).search_terms
    assert text == document_text(terms), "SQLite's index is handed the text it takes, built here"


def page_analysis_processes(parent: int) -> set[int]:
    """The processes ``parent`` started with multiprocessing's spawn, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat, command = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in command:
            found.add(int(entry.name))
    return found


def running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux's /proc")
def test_page_analysis_processes_end_when_the_crawl_is_killed(tmp_path, serve) -> None:
    """A killed crawl once left its page-analysis processes running for good: they wait
    on a queue whose other end they hold too, so the parent's death never reached them.
    The crawl runs at the defaults, which start two of them (``PAGE_PROCESSES``)."""
    generate_site(tmp_path / "site", pages=200, links_per_page=4, seed=5)
    site = serve(tmp_path / "site")
    workdir = tmp_path / "work"
    workdir.mkdir()
    command = crawl_command(site.url + "/", 10, {"DOWNLOAD_DELAY": 0.05})
    crawler = subprocess.Popen(command, cwd=workdir, env=project_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while (len(site.paths()) < 10 or len(workers := page_analysis_processes(crawler.pid)) < 2) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        crawler.kill()
        crawler.wait(timeout=10)
    try:
        assert len(workers) == 2 and len(site.paths()) >= 10, "the crawl must be under way"
        deadline = time.monotonic() + 10
        while any(running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(running(pid) for pid in workers), "page-analysis processes outlived the crawl"
    finally:
        for pid in filter(running, workers):
            os.kill(pid, signal.SIGKILL)


def test_the_email_search_reads_at_most_its_cap_of_the_text() -> None:
    html = page_html("t", "开头 first@example.cn " + "字" * 5000 + " late@example.cn", [])
    searched = analyse_page(page(html), PageRules(email_max_chars=1000))
    assert searched.emails == ["first@example.cn"] and searched.counts["extract/email_text_truncated"] == 1
    whole = analyse_page(page(html), PageRules())
    assert whole.emails == ["first@example.cn", "late@example.cn"] and not whole.counts["extract/email_text_truncated"]


def test_links_past_the_page_budget_are_counted_not_read() -> None:
    html = page_html("t", "x", [f"p{n}.html" for n in range(30)])
    analysis = analyse_page(page(html), PageRules(max_links=10))
    assert [link.url for link in analysis.links] == [f"http://www.example.cn/a/p{n}.html" for n in range(10)]
    assert analysis.counts["links/dropped/page_budget"] == 20


def test_a_page_analysis_process_reads_pages_without_loading_scrapy_or_twisted() -> None:
    """Importing Scrapy took a third of a second of each worker's start, on a core the
    crawl shares, as the crawl opens."""
    script = f"""
import multiprocessing, pickle
from concurrent.futures import ProcessPoolExecutor
from topicspider.analysis import Page, PageRules, analyse_page
from topicspider.pageworker import analyse_in_worker, init_worker
from topicspider.topic.lexicon import keywords_lexicon
from topicspider.topic.score import LexiconTopic
from topicspider.topic.segment import Segmenter

rules = PageRules(topic=LexiconTopic(keywords_lexicon(["新闻"]), Segmenter("rjieba")))
page = Page({URL!r}, "<title>新闻</title><p>新闻 <a href=/b.html>b</a>".encode(), "utf-8", {SITE!r}, 1, ())
with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker,
                         initargs=(rules, 1, analyse_page, "rjieba")) as pool:
    analysis = pool.submit(analyse_in_worker, page, 1, None).result()
    loaded = pool.submit(eval, "sorted(__import__('sys').modules.keys() & {{'scrapy', 'twisted'}})").result()
print(analysis.title, len(analysis.links), loaded)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=project_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["新闻", "1", "[]"]

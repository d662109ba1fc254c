"""Run by tests/test_analysis.py: six pages and a seventh whose analysis kills its
worker process (``kill``), or hangs it (``hang``), or every page killing its worker
(``always``), read concurrently by a real PagePool; or the pages of two hostile sites
killing their workers, those of a third read (``hostile``); or workers that can no longer
start once a page has killed one (``nostart``); or (``update``) pages read by two
workers before and after the pool's rules change; or (``inline``) a pool without
workers getting ready; or (``ready``) a pool of two workers, one slow to start, getting
ready; or (``learn``) a topic learnt in a worker; prints what came back as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scrapy.utils.reactor import install_reactor

from topicspider.analysis import Page, PageAnalysis, PageRules, analyse_page
from topicspider.localsite import page_html
from topicspider.pagepool import PageLost, PagePool, SiteQuarantined

KILLER = "http://www.example.cn/kill.html"
TIMEOUT = 3.0
# A page-analysis process imports this module as it starts, to unpickle its analysis
# function: what follows runs there too.
IN_A_WORKER = any("spawn_main" in argument for argument in sys.orig_argv)
# Once this file exists, a page-analysis process dies as it starts.
NO_START = os.environ.get("PAGEPOOL_CRASH_NO_START", "")
if NO_START and Path(NO_START).exists() and IN_A_WORKER:
    os._exit(3)
# Each worker that starts writes its pid in this folder once it has loaded; all but the
# first take a second more to load.
STARTED = os.environ.get("PAGEPOOL_CRASH_STARTED", "")
if STARTED and IN_A_WORKER:
    try:
        (Path(STARTED) / "first").open("x").close()
    except FileExistsError:
        time.sleep(1)
    (Path(STARTED) / str(os.getpid())).touch()


def analyse_or_die(page: Page, rules: PageRules) -> PageAnalysis:
    if page.url == KILLER:
        os._exit(3)  # as a segfault or the OOM killer would end it
    return analyse_page(page, rules)


def analyse_or_hang(page: Page, rules: PageRules) -> PageAnalysis:
    if page.url == KILLER:
        time.sleep(3600)  # as a regular expression gone exponential would
    return analyse_page(page, rules)


def always_die(page: Page, rules: PageRules) -> PageAnalysis:
    os._exit(3)


def die_on_hostile_sites(page: Page, rules: PageRules) -> PageAnalysis:
    if page.site.startswith("hostile"):
        os._exit(3)
    return analyse_page(page, rules)


def die_and_break_the_install(page: Page, rules: PageRules) -> PageAnalysis:
    Path(NO_START).touch()
    os._exit(3)


def analyse_telling_worker(page: Page, rules: PageRules) -> PageAnalysis:
    time.sleep(0.05)  # long enough for the other worker to take pages too
    analysis = analyse_page(page, rules)
    analysis.counts[f"worker/{os.getpid()}"] += 1
    return analysis


FUNCTIONS = {"kill": analyse_or_die, "hang": analyse_or_hang, "always": always_die, "update": analyse_telling_worker,
             "hostile": die_on_hostile_sites, "nostart": die_and_break_the_install}


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] += count


def some_pages(name: str, count: int, site: str = "example.cn") -> list[Page]:
    return [Page(f"http://www.{site}/{name}{number}.html", page_html(f"{name} {number}", "x", []).encode(),
                 "utf-8", site, 1) for number in range(count)]


def summary(pages: list[Page], results: list[Any], crawler: Any) -> dict[str, Any]:
    lost = [page.url for page, result in zip(pages, results) if type(result) is PageLost]
    quarantined = [page.url for page, result in zip(pages, results) if isinstance(result, SiteQuarantined)]
    titles = [result.title for result in results if isinstance(result, PageAnalysis)]
    failures = sorted({type(result).__name__ for result in results if isinstance(result, BaseException)})
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, PageLost):
            traceback.print_exception(result)  # for the test's failure message
    return {"lost": lost, "quarantined": quarantined, "titles": titles, "stats": dict(crawler.stats.values),
            "failures": failures}


async def hostile(pool: Any, crawler: Any) -> dict[str, Any]:
    """Eight pages of two hostile sites in a row, each killing its worker, then a good
    site's: six deaths in a row once ended the crawl."""
    pages = [*some_pages("a", 4, "hostile-a.cn"), *some_pages("b", 4, "hostile-b.cn"), *some_pages("good", 4)]
    results = []
    for page in pages:  # in order, so that which pages are lost is known
        try:
            results.append(await pool.analyse(page))
        except PageLost as exc:
            results.append(exc)
    return summary(pages, results, crawler)


async def update(pool: Any) -> dict[str, Any]:
    """Pages sent before an update are read under the old rules, those after under the
    new ones, by every worker."""
    before = [asyncio.ensure_future(pool.analyse(page)) for page in some_pages("before", 8)]
    await pool.update(PageRules(keep_blocks=True))
    after = [asyncio.ensure_future(pool.analyse(page)) for page in some_pages("after", 16)]
    before_results, after_results = await asyncio.gather(asyncio.gather(*before), asyncio.gather(*after))
    return {
        "before_blocks": [result.blocks for result in before_results],
        "after_blocks": [result.blocks for result in after_results],
        "workers_after": sorted({key for result in after_results for key in result.counts if key.startswith("worker/")}),
    }


async def inline() -> dict[str, Any]:
    """With no worker processes, pages are read on the reactor thread: the dictionaries
    they are cut with must be loaded before the crawl, not at its first page (the
    reactor stalled for 0.15-0.7 s, and requests already handed to the downloader left
    that late, too close to the next one on their host)."""
    import threading

    from topicspider.search import terms
    from topicspider.topic.segment import Segmenter

    loaded_on: list[str] = []  # the threads that loaded a dictionary
    load = Segmenter.load

    def load_telling_thread(self: Segmenter) -> None:
        loaded_on.append("reactor" if threading.current_thread() is threading.main_thread() else "other")
        load(self)

    Segmenter.load = load_telling_thread  # type: ignore[method-assign]
    pool = PagePool(SimpleNamespace(stats=Stats()), 0, TIMEOUT)  # type: ignore[arg-type]
    pool.start(PageRules())
    before = terms._segmenter.cache_info().currsize
    # A page before ready(): a distributed worker's or a resumed crawl's first pages come
    # from the queue before the spider's start() has waited for the pool.
    analysed = await pool.analyse(some_pages("early", 1)[0])
    await pool.ready()
    return {"loaded_before": before, "loaded_after": terms._segmenter.cache_info().currsize,
            "loaded_on": loaded_on, "title": analysed.title}


async def ready() -> dict[str, Any]:
    """The workers that had loaded when the pool said it was ready."""
    pool = PagePool(SimpleNamespace(stats=Stats()), 2, TIMEOUT, analyse_or_die)  # type: ignore[arg-type]
    pool.start(PageRules())
    await pool.ready()
    loaded = [path.name for path in Path(STARTED).iterdir() if path.name.isdigit()]
    pool.close()
    return {"loaded": len(loaded)}


async def learn_in_a_worker() -> dict[str, Any]:
    """A trained topic learnt by a worker: this process loads no dictionary, and the
    topic is the one learnt here."""
    from topicspider.topic import segment
    from topicspider.topic.learn import Learning, SampledPage, learn
    from topicspider.topic.template import SiteTemplates

    def sampled(name: str, text: str) -> SampledPage:
        return SampledPage(f"http://www.example.cn/{name}.html", "example.cn", name, [text])

    spreadsheets = "电子表格里，公式引用单元格，单元格的值随公式更新。"
    weather = "明天多云转晴，气温回升，午后有雷阵雨。"
    learning = Learning("centroid", [sampled(f"s{number}", spreadsheets * (number + 1)) for number in range(3)],
                        ["s0", "s1", "s2"], [], [sampled(f"b{number}", weather * (number + 1)) for number in range(4)],
                        [], SiteTemplates(), None, 4.0, 1.0, 20.0, 100, 0.9, 10_000, 5)
    pool = PagePool(SimpleNamespace(stats=Stats()), 1, TIMEOUT)  # type: ignore[arg-type]
    pool.start(PageRules(), segmenter="rjieba")
    await pool.ready()
    try:
        spec, topic = await pool.run(learn, learning, segment.Segmenter("rjieba"))
    finally:
        pool.close()
    loaded_here = segment._backend.cache_info().currsize
    here_spec, here_topic = learn(learning, segment.Segmenter("rjieba"))
    return {"loaded_here": loaded_here, "same_threshold": topic.threshold == here_topic.threshold,
            "same_samples": spec.samples == here_spec.samples, "background": len(spec.background),
            "scores": [round(topic.relevance("", [text]).score, 6) for text in (spreadsheets, weather)]}


async def main(mode: str) -> dict[str, Any]:
    if mode == "inline":
        return await inline()
    if mode == "learn":
        return await learn_in_a_worker()
    if mode == "ready":
        return await ready()
    if mode == "update":
        pool = PagePool(SimpleNamespace(stats=Stats()), 2, TIMEOUT, FUNCTIONS[mode])  # type: ignore[arg-type]
        pool.start(PageRules())
        await pool.ready()
        try:
            return await update(pool)
        finally:
            pool.close()

    crawler = SimpleNamespace(stats=Stats())
    pool = PagePool(crawler, 1, TIMEOUT, FUNCTIONS[mode])  # type: ignore[arg-type]
    pool.start(PageRules())
    await pool.ready()
    if mode == "hostile":
        try:
            return await hostile(pool, crawler)
        finally:
            pool.close()
    pages = [Page(f"http://www.example.cn/{number}.html", page_html(f"page {number}", "x", []).encode(),
                  "utf-8", "example.cn", 1) for number in range(6)]
    pages.insert(2, Page(KILLER, b"<html></html>", "utf-8", "example.cn", 1))
    # The last pages come a second later, queued behind the killer while it runs: they
    # must not time out on its account, nor be cancelled when its pool is stopped.
    first = [asyncio.ensure_future(pool.analyse(page)) for page in pages[:3]]
    await asyncio.sleep(1)
    later = [asyncio.ensure_future(pool.analyse(page)) for page in pages[3:]]
    results = await asyncio.gather(*first, *later, return_exceptions=True)
    pool.close()
    return summary(pages, list(results), crawler)


if __name__ == "__main__":
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    outcome: dict[str, Any] = {}

    async def run() -> None:
        try:
            outcome.update(await main(sys.argv[1]))
        finally:
            reactor.stop()

    reactor.callWhenRunning(lambda: asyncio.ensure_future(run()))
    reactor.run()
    print(json.dumps(outcome))

"""The ``topic`` spider: breadth-first, same-site crawl from seed URLs, focused on a topic.

``scrapy crawl topic -a seeds=URL[,URL...]|@file -a depth=N
[-a topic=WORD[,WORD...]|@file | -a train=URL_OR_PATH[,...]|@file]
[-a negatives=URL_OR_PATH[,...]|@file] [-a labels=database|@file]``. With a topic
(:mod:`topicspider.focus`), every page is scored (:mod:`topicspider.topic.score`) and, by
default, only a seed or a relevant page has its links followed. Each HTML page is read by
:func:`topicspider.analysis.analyse_page`, in a worker process of
:mod:`topicspider.pagepool` (``PAGE_PROCESSES``). Settings it reads: ``URL_STRIP_TRAILING_SLASH``,
``EXTRACT_TEXT_MAX_CHARS``, ``EXTRACT_EMAIL_MAX_CHARS``, ``EXTRACT_MAX_LINKS``, ``ROBOTS_META_OBEY``, ``ROBOTS_REL_NOFOLLOW_OBEY``,
``TOPIC_THRESHOLD``, ``TOPIC_FOLLOW_ALL``, ``TOPIC_BEST_FIRST``, ``TOPIC_TRAIN_OUTPUT``,
``DUPLICATE_CONTENT``, ``DUPLICATE_NEAR_DISTANCE``, ``DUPLICATE_CAPACITY``
(:mod:`topicspider.duplicates`: a page whose text a stored page has is stored as its
alias and its links are not followed; a near duplicate is flagged) and those of
:mod:`topicspider.focus`. Seeds go through the links' normaliser and filters
(:func:`topicspider.config.seeds_under`). Stats: ``topic/scored``, ``topic/relevant``,
``topic/irrelevant``, ``topic/histogram/<lower bound>``, ``topic/threshold``,
``topic/links_not_followed``,
``topic/score_seconds``, ``pages/fetched``, ``pages/not_html``, ``pages/binary``,
``links/insite``, ``links/offsite``, ``links/dropped/<reason>``,
``robots/meta_noindex``, ``robots/meta_nofollow``, ``robots/rel_nofollow``,
``extract/text_truncated``, ``extract/title_truncated``, ``extract/email_text_truncated``,
``fetch/errors/<reason>``,
``fetch/ignored``, ``pagepool/restarts``, ``pagepool/lost``, ``duplicates/exact``,
``duplicates/near``, ``duplicates/near_bits/<bits>``, ``seeds/from_redis``,
``seeds/bad_redis_message``. With ``REDIS_URL`` (distributed mode) the seeds may be left
out: the worker then joins the shared crawl, takes seeds pushed to the Redis start-URL
list (``scrapy push-seeds``), and stops once the cluster has been idle for
``REDIS_IDLE_TIMEOUT`` seconds.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred, DeferredLock
from twisted.python.failure import Failure
from w3lib.encoding import http_content_type_encoding

from topicspider.analysis import Page, PageAnalysis, PageRules
from topicspider.cluster import GIVE_BACK_META, redis_url
from topicspider.config import (
    ConfigError,
    get_bool,
    get_float,
    get_int,
    near_distance_from,
    parse_depth,
    parse_seeds,
    seed_under,
    seeds_under,
    url_rules_from,
)
from topicspider.duplicates import ContentIndex, Verdict
from topicspider.encoding import looks_binary
from topicspider.focus import (
    TopicArguments, TopicBuilder, check_topic_arguments, parse_topic_arguments, threshold_setting,
)
from topicspider.items import PageItem
from topicspider.ledger import DUPLICATE, IRRELEVANT
from topicspider.middlewares.redirect import RedirectLoop
from topicspider.middlewares.robots import RobotsUnreachable
from topicspider.pagepool import QUARANTINED, PageLost, PagePool, PagePoolFailed, SiteQuarantined
from topicspider.reactor_tools import in_thread, sleep, to_thread
from topicspider.robots import token_from_settings
from topicspider.signals import (
    DROPPED_META,
    FETCHED_AT_META,
    RESUME_LATER_META,
    fetch_failed,
    links_dropped,
    page_scored,
    site_quarantined,
)
from topicspider.search.index import indexes_text
from topicspider.topic.score import Relevance, Topic
from topicspider.topic.topicfile import encode_topic
from topicspider.urls import BadURL, canonical_url, has_public_suffix, mask_url, request_url, site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from topicspider.archive import ReplayIndex


HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
HISTOGRAM_BUCKETS = 10  # over the highest possible score: steps of 0.5 from 0 to 5, of 0.1 up to 1
SEED_POLL = 0.5  # seconds between looks at the Redis start-URL list
SEED_MESSAGE_MAX_CHARS = 16_384  # a start-list entry longer than this is no URL
NOT_SCORED = Relevance(0.0)
CLUSTER_CONTENTS_COOLDOWN = 30.0  # seconds texts are compared within the worker after Redis failed
CONTENTS_STATE = "duplicate_contents"  # the content index's key in a JOBDIR crawl's spider state


def is_html(response: Response) -> bool:
    """An HTML response, by its Content-Type; by its body only when it has none."""
    if not isinstance(response, HtmlResponse):
        return False
    header = response.headers.get(b"Content-Type")
    if header is None:
        return True
    return header.split(b";")[0].strip().lower().decode("latin-1") in HTML_TYPES


def is_binary(response: Response) -> bool:
    """A body that is binary data, though labelled as HTML (see :func:`looks_binary`)."""
    header = response.headers.get(b"Content-Type") or b""
    return looks_binary(response.body, http_content_type_encoding(header.decode("latin-1")))


class TopicSpider(scrapy.Spider):
    name = "topic"
    #: Finish reasons that make ``scrapy crawl`` exit non-zero.
    FAILED_REASONS = frozenset({"start_error", "page_analysis_failed", "memusage_exceeded", "replay_failed"})
    #: Finish reasons of bad input (a training sample or negative that cannot be read):
    #: exit status 2, as for a bad argument.
    BAD_INPUT_REASONS = frozenset({"topic_failed"})

    ARGUMENTS = ("seeds", "depth", "topic", "train", "negatives", "labels")

    def __init__(self, seeds: str = "", depth: str | int = 3, topic: str = "", train: str = "", negatives: str = "",
                 labels: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topic_arguments: TopicArguments = parse_topic_arguments(topic, train, negatives, labels)
        # Seeds may be left out to train a topic (``scrapy topic-train``) or to join a
        # distributed crawl (``REDIS_URL``); from_crawler checks which.
        self.seed_urls = parse_seeds(seeds) if seeds.strip() else []
        self.max_depth = parse_depth(depth)
        self.topic: Topic | None = None
        self._topic_settled = not self.topic_arguments.wanted
        self._topic_failed = False
        self._topic_waiters: list[Deferred[None]] = []

    @classmethod
    def check_arguments(
        cls,
        seeds: str = "",
        depth: str | int = 3,
        topic: str = "",
        train: str = "",
        negatives: str = "",
        labels: str = "",
        *,
        need_seeds: bool = True,
        settings: BaseSettings | None = None,
        **others: Any,
    ) -> None:
        """Raise :class:`~topicspider.config.ConfigError` for bad ``-a`` arguments, or for
        ``settings`` that these arguments cannot satisfy."""
        # Names starting with "_" are the job server's (scrapyd passes _job).
        unknown = sorted(name for name in others if not name.startswith("_"))
        if unknown:
            known = ", ".join(cls.ARGUMENTS)
            raise ConfigError(f"unknown spider argument {unknown[0]!r} (known: {known})")
        joining = settings is not None and bool(redis_url(settings))  # a worker may join without seeds
        seed_urls = parse_seeds(seeds) if (need_seeds and not joining) or seeds.strip() else []
        parse_depth(depth)
        arguments = parse_topic_arguments(topic, train, negatives, labels)
        if settings is not None:
            seed_urls = seeds_under(seed_urls, url_rules_from(settings))
            check_topic_arguments(settings, arguments, seed_urls)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TopicSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.rules = PageRules(
            strip_trailing_slash=get_bool(settings, "URL_STRIP_TRAILING_SLASH"),
            url_rules=url_rules_from(settings),
            text_max_chars=get_int(settings, "EXTRACT_TEXT_MAX_CHARS"),
            email_max_chars=get_int(settings, "EXTRACT_EMAIL_MAX_CHARS"),
            max_links=get_int(settings, "EXTRACT_MAX_LINKS") or sys.maxsize,
            obey_meta_robots=get_bool(settings, "ROBOTS_META_OBEY"),
            obey_rel_nofollow=get_bool(settings, "ROBOTS_REL_NOFOLLOW_OBEY"),
            robots_token=token_from_settings(settings),
            max_depth=spider.max_depth,
            follow_all=get_bool(settings, "TOPIC_FOLLOW_ALL"),
            best_first=get_bool(settings, "TOPIC_BEST_FIRST"),
            search_index=get_bool(settings, "SEARCH_INDEX"),
            index_text=indexes_text(settings.get("DATABASE_URL") or ""),
            store_all=get_bool(settings, "TOPIC_STORE_ALL"),
            content_digest=get_bool(settings, "DUPLICATE_CONTENT"),
            simhash=near_distance_from(settings) is not None,
        )
        spider.contents = ContentIndex(get_int(settings, "DUPLICATE_CAPACITY"), near_distance_from(settings))
        spider.contents_restored = False
        spider.contents_lock = DeferredLock()
        spider.logged_cluster_contents = False
        spider.cluster_contents_after = 0.0  # monotonic time before which Redis is not asked
        crawler.signals.connect(spider._save_contents, signal=signals.spider_closed)
        spider.seed_urls = seeds_under(spider.seed_urls, spider.rules.url_rules)
        spider.pages = PagePool.from_crawler(crawler)
        crawler.signals.connect(spider.pages.close, signal=signals.spider_closed)
        spider.train_output = settings.get("TOPIC_TRAIN_OUTPUT") or ""
        check_topic_arguments(settings, spider.topic_arguments, spider.seed_urls)
        spider.threshold_override = threshold_setting(settings)
        spider.cluster = bool(redis_url(settings))
        spider.idle_timeout = get_float(settings, "REDIS_IDLE_TIMEOUT")
        spider.replaying = bool(settings.get("WARC_REPLAY_DIR"))
        if not spider.seed_urls and not spider.train_output and not spider.cluster and not spider.replaying:
            raise ConfigError("no seed URLs given: use -a seeds=URL[,URL...] or -a seeds=@file")
        spider.topic_builder = None
        if spider.topic_arguments.wanted:
            spider.topic_builder = TopicBuilder(crawler, spider.topic_arguments, spider.seed_urls, spider.rules,
                                                spider.pages.analyse_without_waiting, spider.pages.run)
        # Load the Public Suffix List now: loading it at the first e-mail or domain
        # check would stall the reactor for ~70 ms in the middle of the crawl.
        has_public_suffix("example.com")
        # Last, once every argument and setting is checked: the workers load (about a
        # quarter of a second each) while Scrapy builds the crawl's components.
        spider._start_pages()
        return spider

    async def start(self) -> AsyncIterator[Request]:
        replayed = await self._replay_index() if self.replaying else None
        if replayed is not None:
            # The crawl's seeds, for the topic's background sample, answered from the archive too.
            self.seed_urls = replayed.seeds()
            if self.topic_builder is not None:
                self.topic_builder.seeds = self.seed_urls
        if self.topic_builder is not None:
            await self._prepare_topic()
        if self.train_output:
            return
        try:
            await self.pages.ready()
        except PagePoolFailed as exc:
            self.logger.error("topicspider: error: %s", exc)
            raise CloseSpider("page_analysis_failed") from None
        if replayed is not None:
            for url, depth in replayed.pages:
                yield self._request(url, site_of(url), depth=depth)
            return
        for url in self.seed_urls:  # through the links' filters already (from_crawler)
            yield self._seed(url)
        if self.cluster:
            async for request in self._cluster_seeds():
                yield request

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        if redis_url(settings):
            # Distributed mode; an explicit -s SCHEDULER still wins.
            settings.set("SCHEDULER", "topicspider.cluster.scheduler.ClusterScheduler", priority="spider")

    def seed_request(self, url: str) -> Request:
        """A request for ``url`` as a seed: depth 0, its own site; ``url`` goes through the
        links' normaliser and filters (:class:`ConfigError` if they refuse it), as every
        seed does, the console's included."""
        return self._seed(seed_under(url, self.rules.url_rules))

    def _seed(self, url: str) -> Request:
        return self._request(url, site_of(url), depth=0)

    async def _replay_index(self) -> ReplayIndex:
        """The archive ``scrapy reindex`` reads: every page the crawl fetched is a start
        request, at the depth it was crawled at (0 in archives that did not keep it)."""
        from topicspider.middlewares.replay import WarcReplayMiddleware

        replay = self.crawler.get_downloader_middleware(WarcReplayMiddleware)
        if replay is None:
            self.logger.error("topicspider: error: WARC_REPLAY_DIR is set but WarcReplayMiddleware is not enabled")
            raise CloseSpider("replay_failed")
        return await replay.index()

    async def _cluster_seeds(self) -> AsyncIterator[Request]:
        """Seeds pushed to the crawl's start-URL list in Redis, until the whole cluster
        has had nothing to do for ``REDIS_IDLE_TIMEOUT`` seconds. Ending ``start()``
        is what lets this worker close."""
        from topicspider.cluster.scheduler import ClusterScheduler

        assert self.crawler.engine is not None
        scheduler = self.crawler.engine.scheduler
        if not isinstance(scheduler, ClusterScheduler):
            self.logger.warning("REDIS_URL is set but SCHEDULER is %s: not taking seeds from Redis",
                                type(scheduler).__name__)
            return
        idle_since: float | None = None
        while True:
            for message in scheduler.want_seeds():
                url = self._seed_from_message(message)
                if url is not None:
                    self._count("seeds/from_redis")
                    yield self._seed(url)  # through the links' filters already
            await sleep(SEED_POLL)
            if not scheduler.cluster_idle():
                idle_since = None
            elif idle_since is None:
                idle_since = monotonic()
            elif monotonic() - idle_since >= self.idle_timeout:
                self.logger.info("Shared frontier empty for %.0f s: this worker stops", self.idle_timeout)
                return

    def _seed_from_message(self, message: str) -> str | None:
        """A URL from a start-list entry: a URL, or scrapy-redis's JSON ``{"url": ...}``.
        Anyone who can write to Redis writes this list: whatever an entry holds, it is at
        worst counted and skipped."""
        text = message.strip()
        try:
            if len(text) > SEED_MESSAGE_MAX_CHARS:
                raise ValueError(f"{len(text)} characters, more than {SEED_MESSAGE_MAX_CHARS}")
            if "\ufffd" in text:
                raise ValueError("not UTF-8")
            if text.startswith("{"):
                text = str(json.loads(text)["url"])
            return seed_under(request_url(text), self.rules.url_rules)
        except Exception as exc:  # noqa: BLE001 - nested JSON raises RecursionError, and the next entry may be good
            self._count("seeds/bad_redis_message")
            self.logger.error("Ignored a bad entry in the Redis start-URL list: %s (%s)",
                              mask_url(text[:200]), str(exc)[:200])
            return None

    async def _prepare_topic(self) -> None:
        """Build the topic before any seed is requested; a bad one ends the crawl."""
        assert self.topic_builder is not None
        built = False
        try:
            self.topic = await self.topic_builder.build()
            threshold = self.topic.threshold if self.threshold_override is None else self.threshold_override
            self.crawler.stats.set_value("topic/threshold", round(threshold, 6))  # type: ignore[union-attr]
            if self.train_output:
                await to_thread(self._save_topic, self.topic, Path(self.train_output))
            else:
                self.rules = replace(self.rules, topic=self.topic, threshold=threshold)
                await self.pages.update(self.rules)
            built = True
        except (ConfigError, OSError) as exc:
            self.logger.error("topicspider: error: %s", exc)
            raise CloseSpider("topic_failed") from None
        except PagePoolFailed as exc:
            self.logger.error("topicspider: error: %s", exc)
            raise CloseSpider("page_analysis_failed") from None
        finally:
            # Whatever happened, requests waiting for the topic must not wait forever.
            self._settle_topic(failed=not built)

    def _start_pages(self) -> None:
        builder = self.topic_builder
        if builder is None:
            self.pages.start(self.rules)
        else:
            # The workers start while the topic is learnt, reading its background pages,
            # and take the topic once it is built (_prepare_topic).
            self.pages.start(builder.sampling_rules, segmenter=builder.backend)

    async def wait_for_topic(self) -> None:
        """Return once the topic is built; raise IgnoreRequest if it could not be."""
        if self._topic_settled:
            if self._topic_failed:
                raise IgnoreRequest("no topic: it could not be built")
            return
        waiter: Deferred[None] = Deferred()
        self._topic_waiters.append(waiter)
        await maybe_deferred_to_future(waiter)

    def _settle_topic(self, failed: bool) -> None:
        self._topic_settled, self._topic_failed = True, failed
        waiters, self._topic_waiters = self._topic_waiters, []
        for waiter in waiters:
            if failed:
                waiter.errback(IgnoreRequest("no topic: it could not be built"))
            else:
                waiter.callback(None)

    def _save_topic(self, topic: Topic, path: Path) -> None:
        assert self.topic_builder is not None and self.topic_builder.spec is not None
        spec = self.topic_builder.spec
        path.write_text(encode_topic(spec, topic, self.topic_builder.backend), encoding="utf-8")
        self.logger.info("Topic (%s, threshold %.4f, %d samples) written to %s", topic.kind, topic.threshold,
                         len(spec.samples), path)

    def _request(self, url: str, site: str, **meta: Any) -> Request:
        return Request(url, callback=self.parse, errback=self.on_error, meta={"site": site, **meta})

    def _count(self, key: str, count: int = 1) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key, count)

    async def parse(self, response: Response) -> AsyncIterator[Any]:
        self._count("pages/fetched")
        depth: int = response.meta.get("depth", 0)
        site: str = response.meta["site"]
        if depth == 0:
            # A seed that redirects, e.g. to its www. host, defines the site it lands on.
            site = site_of(response.url)
        html = is_html(response)
        binary = html and is_binary(response)
        if binary or not html:
            self._count("pages/not_html")
            if binary:
                self._count("pages/binary")
            # Not text to score: 0 against a topic, counted as any page.
            relevance = NOT_SCORED if self.topic is not None else None
            if relevance is not None:
                self._record(relevance, response)
            self._scored(response, relevance)
            return
        try:
            analysis = await self.pages.analyse(self._page(response, site, depth))
        except PagePoolFailed as exc:
            # Not read: in a distributed crawl another worker should have it, and a
            # resumed JOBDIR reads it again.
            response.meta[GIVE_BACK_META] = True
            response.meta[RESUME_LATER_META] = "page analysis failed"
            self.logger.error("topicspider: error: %s", exc)
            raise CloseSpider("page_analysis_failed") from None
        except PageLost as exc:
            self._page_lost(response, site, exc)
            return
        for key, count in analysis.counts.items():
            self._count(key, count)
        item = self._page_item(response, depth, analysis)
        if analysis.relevance is not None:
            self.crawler.stats.inc_value("topic/score_seconds", analysis.score_seconds)  # type: ignore[union-attr]
            item.relevance = round(analysis.relevance.score, 6)
            item.relevance_terms = analysis.relevance.explain()
            item.relevant = self._record(analysis.relevance, response)
        self._scored(response, analysis.relevance)
        verdict = await self._content_verdict(item, analysis, response)
        if verdict.duplicate_of is not None:
            yield item  # stored as an alias of the page it repeats
            if not verdict.follow_links:
                return  # its links are that page's
        elif not analysis.noindex:
            yield item
        if self.replaying:
            return  # reading the archive again, not crawling: no link is followed
        if analysis.dropped:
            self.crawler.signals.send_catch_log(links_dropped, links=analysis.dropped)
        known_link = self._known_link()
        for link in analysis.links:
            if known_link is not None and known_link(link.fingerprint, link.url):
                continue  # a duplicate, counted: no request to make
            request = self._request(link.url, site)
            if link.priority is not None:
                request.priority = link.priority
            yield request

    def _known_link(self) -> Callable[[bytes, str], bool] | None:
        """The frontier's check of a link to a URL it knows (``known_link`` of
        :class:`~topicspider.scheduler.FrontierScheduler`), or None for a scheduler
        without one: its links all go to it as requests."""
        engine = self.crawler.engine
        return getattr(engine.scheduler, "known_link", None) if engine is not None else None

    async def _content_verdict(self, item: PageItem, analysis: PageAnalysis, response: Response) -> Verdict:
        """Whether the page repeats the text of one stored before, marked on its item and
        response; a near duplicate is flagged on its item."""
        if analysis.content_digest is None:
            return Verdict()
        if not self.contents_restored:
            await self._restore_contents()
        # A replay follows no link, a copy's no more than the first's.
        follows = bool(analysis.links) and not self.replaying
        if self.cluster:
            verdict = await self._cluster_exact_verdict(item.url, analysis.content_digest, follows)
            if verdict.duplicate_of is None:
                verdict = self.contents.near_verdict(item.url, analysis.simhash)
        else:
            verdict = self.contents.check(item.url, analysis.content_digest, analysis.simhash, follows)
        if verdict.near_duplicate_of is not None:
            item.near_duplicate_of = verdict.near_duplicate_of
            self._count("duplicates/near")
            self._count(f"duplicates/near_bits/{verdict.bits}")
        if verdict.duplicate_of is None:
            return verdict
        item.duplicate_of = verdict.duplicate_of
        response.meta[DROPPED_META] = DUPLICATE
        self._count("duplicates/exact")
        if verdict.follow_links:
            # The first copy's links were not followed (nofollow, the depth limit).
            self._count("duplicates/links_followed")
        self.logger.debug("%s repeats the text of %s", item.url, item.duplicate_of)
        return verdict

    async def _cluster_exact_verdict(self, url: str, digest: bytes, follows: bool) -> Verdict:
        """Whether a page any worker stored before has this text, as Redis knows it. This
        worker remembers the texts it read too, and compares with those alone while Redis
        fails and for :data:`CLUSTER_CONTENTS_COOLDOWN` seconds after (a hung server would
        otherwise hold every page for its socket timeout); logged once."""
        from redis.exceptions import RedisError

        from topicspider.cluster.scheduler import ClusterScheduler

        local = self.contents.exact_verdict(url, digest, follows)
        scheduler = self.crawler.engine.scheduler if self.crawler.engine is not None else None
        if not isinstance(scheduler, ClusterScheduler) or monotonic() < self.cluster_contents_after:
            self._count("duplicates/cluster_unchecked")
            return local
        try:
            found = await in_thread(scheduler.pool, scheduler.frontier.claim_content, digest, url, follows)
        except RedisError as exc:
            self.cluster_contents_after = monotonic() + CLUSTER_CONTENTS_COOLDOWN
            self._count("duplicates/cluster_unchecked")
            if not self.logged_cluster_contents:
                self.logged_cluster_contents = True
                self.logger.warning("Duplicate content compared within this worker only while Redis fails: %s "
                                    "(further pages only counted, duplicates/cluster_unchecked)", exc)
            return local
        return Verdict() if found is None else Verdict(duplicate_of=found[0], follow_links=found[1])

    async def _restore_contents(self) -> None:
        """On a resumed JOBDIR crawl, the content index takes what was stored before the
        pause, on a thread (a second for a full index), before any page is compared.
        Scrapy's SpiderState sets ``state`` after this spider's spider_opened handlers
        have run: it is read at the first page."""
        # A Deferred that has not fired cannot be awaited by an asyncio task: as a future.
        await maybe_deferred_to_future(self.contents_lock.acquire())
        try:
            if self.contents_restored:
                return
            saved = getattr(self, "state", {}).get(CONTENTS_STATE)
            if saved:
                try:
                    await to_thread(self.contents.restore, saved)
                except (KeyError, TypeError, ValueError) as exc:
                    self.logger.warning("Duplicate content: the saved index was not read (%r); starting empty", exc)
                else:
                    self.logger.info("Duplicate content: %d stored pages remembered from before the crawl was paused",
                                     len(self.contents.exact))
            self.contents_restored = True
        finally:
            self.contents_lock.release()

    def _save_contents(self) -> None:
        """Kept in ``state``, which Scrapy's SpiderState writes to JOBDIR after this; an
        index never restored (no page compared) keeps what was saved."""
        if hasattr(self, "state") and self.contents_restored:
            self.state[CONTENTS_STATE] = self.contents.snapshot()

    def _page_lost(self, response: Response, site: str, exc: PageLost) -> None:
        if isinstance(exc, SiteQuarantined):
            self.logger.debug("Page not read: %s", exc)  # the quarantine is logged once
            response.meta[RESUME_LATER_META] = QUARANTINED
        else:
            self.logger.error("Page not read: %s", exc)
            response.meta[RESUME_LATER_META] = "page analysis lost"
        if site in self.pages.quarantined:
            self.crawler.signals.send_catch_log(site_quarantined, site=site)

    @staticmethod
    def _page(response: Response, site: str, depth: int) -> Page:
        robots_headers = tuple(value.decode("latin-1") for value in response.headers.getlist(b"X-Robots-Tag"))
        return Page(response.url, response.body, response.encoding, site, depth, robots_headers)  # type: ignore[attr-defined]

    def _record(self, relevance: Relevance, response: Response) -> bool:
        """Count a page's score in the stats; whether it is relevant."""
        relevant = self.rules.relevant(relevance)
        if not relevant and not self.rules.store_all:
            response.meta[DROPPED_META] = IRRELEVANT  # not stored (RelevancePipeline)
        self._count("topic/scored")
        self._count("topic/relevant" if relevant else "topic/irrelevant")
        assert self.topic is not None
        step = self.topic.max_score / HISTOGRAM_BUCKETS
        bucket = math.floor(relevance.score / step) * step
        self._count(f"topic/histogram/{bucket:.1f}")
        return relevant

    def _scored(self, response: Response, relevance: Relevance | None) -> None:
        self.crawler.signals.send_catch_log(page_scored, response=response, relevance=relevance)

    def _page_item(self, response: Response, depth: int, analysis: PageAnalysis) -> PageItem:
        return PageItem(
            url=canonical_url(response.url, self.rules.strip_trailing_slash),
            title=analysis.title,
            depth=depth,
            http_status=response.status,
            # A page read again from an archive: when it was fetched then.
            fetched_at=response.meta.get(FETCHED_AT_META) or _now(),
            text=analysis.text,
            emails=analysis.emails,
            content_type=response.headers.get(b"Content-Type", b"").decode("latin-1"),
            encoding=response.encoding,  # type: ignore[attr-defined]
            content_length=len(response.body),
            search_terms=analysis.search_terms,
        )

    def on_error(self, failure: Failure) -> None:
        request = failure.request  # type: ignore[attr-defined]
        message = failure.getErrorMessage()
        if failure.check(HttpError):
            status = failure.value.response.status
            self._count("pages/fetched")
            self._count(f"fetch/errors/http_{status}")
            self.logger.debug("HTTP %d for %s", status, request.url)
            reason = f"HTTP {status}"
        elif failure.check(IgnoreRequest) and not failure.check(RobotsUnreachable, RedirectLoop):
            # A refusal by policy (robots.txt, a middleware), not a failure.
            self._count("fetch/ignored")
            self.logger.debug("Not fetched %s: %s", request.url, message)
            reason = f"ignored: {message}"
        else:
            name = failure.type.__name__ if failure.type else "unknown"
            self._count(f"fetch/errors/{name}")
            self.logger.warning("Could not fetch %s: %s", request.url, message)
            reason = f"{name}: {message}"
        self.crawler.signals.send_catch_log(fetch_failed, request=request, reason=reason)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

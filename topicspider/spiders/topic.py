"""The ``topic`` spider: breadth-first, same-site crawl from seed URLs, focused on a topic.

``scrapy crawl topic -a seeds=URL[,URL...]|@file -a depth=N
[-a topic=WORD[,WORD...]|@file | -a train=URL_OR_PATH[,...]|@file]``. With a topic,
every page is scored (:mod:`topicspider.topic.score`) and, by default, only a seed or a
relevant page has its links followed. Settings it reads: ``URL_STRIP_TRAILING_SLASH``,
``EXTRACT_TEXT_MAX_CHARS``, ``ROBOTS_META_OBEY``, ``ROBOTS_REL_NOFOLLOW_OBEY``,
``TOPIC_THRESHOLD``, ``TOPIC_FOLLOW_ALL``, ``TOPIC_BEST_FIRST``, ``TOPIC_TRAIN_OUTPUT``
and those of :mod:`topicspider.focus`. Stats: ``topic/scored``, ``topic/relevant``,
``topic/irrelevant``, ``topic/histogram/<lower bound>``, ``topic/links_not_followed``,
``topic/score_seconds``, ``pages/fetched``, ``pages/not_html``,
``links/insite``, ``links/offsite``, ``links/dropped/<reason>``,
``robots/meta_noindex``, ``robots/meta_nofollow``, ``robots/rel_nofollow``,
``extract/text_truncated``, ``extract/title_truncated``, ``fetch/errors/<reason>``,
``fetch/ignored``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

import scrapy
from parsel import Selector
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from topicspider.config import ConfigError, get_bool, get_float, get_int, parse_depth, parse_seeds
from topicspider.extract import base_url, extract_emails, extract_links, extract_text, extract_title, truncate
from topicspider.focus import TopicArguments, TopicBuilder, check_topic_arguments, parse_topic_arguments
from topicspider.items import PageItem
from topicspider.middlewares.robots import RobotsUnreachable
from topicspider.reactor_tools import to_thread
from topicspider.robots import NOFOLLOW, NOINDEX, header_directives, meta_directives, token_from_settings
from topicspider.signals import page_scored
from topicspider.topic.lexicon import format_lexicon
from topicspider.topic.score import Relevance, Topic
from topicspider.urls import BadURL, canonical_url, has_public_suffix, non_page_reason, request_url, site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


TITLE_MAX_CHARS = 1000
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Best-first link priorities run from 0 to this; depth (DEPTH_PRIORITY) only breaks ties.
PRIORITY_SCALE = 1000
HISTOGRAM_STEP = 0.5
NOT_SCORED = Relevance(0.0, 0.0, 0.0)
# Best-first scores the anchor texts of a page's first links only: a page of links
# must not hold the reactor (the rest get their parent's share alone).
ANCHORS_SCORED_PER_PAGE = 500


def is_html(response: Response) -> bool:
    """An HTML response, by its Content-Type; by its body only when it has none."""
    if not isinstance(response, HtmlResponse):
        return False
    header = response.headers.get(b"Content-Type")
    if header is None:
        return True
    return header.split(b";")[0].strip().lower().decode("latin-1") in HTML_TYPES


class TopicSpider(scrapy.Spider):
    name = "topic"
    #: Finish reasons that make ``scrapy crawl`` exit non-zero.
    FAILED_REASONS = frozenset({"topic_failed", "start_error"})

    ARGUMENTS = ("seeds", "depth", "topic", "train")

    def __init__(self, seeds: str = "", depth: str | int = 3, topic: str = "", train: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topic_arguments: TopicArguments = parse_topic_arguments(topic, train)
        # Seeds may be left out only to train a topic (``scrapy topic-train``).
        self.seed_urls = parse_seeds(seeds) if seeds.strip() or not self.topic_arguments.samples else []
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
        if need_seeds or seeds.strip():
            parse_seeds(seeds)
        parse_depth(depth)
        arguments = parse_topic_arguments(topic, train)
        if settings is not None:
            check_topic_arguments(settings, arguments)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TopicSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.strip_trailing_slash = get_bool(settings, "URL_STRIP_TRAILING_SLASH")
        spider.text_max_chars = get_int(settings, "EXTRACT_TEXT_MAX_CHARS")
        spider.obey_meta_robots = get_bool(settings, "ROBOTS_META_OBEY")
        spider.obey_rel_nofollow = get_bool(settings, "ROBOTS_REL_NOFOLLOW_OBEY")
        spider.robots_token = token_from_settings(settings)
        spider.threshold = get_float(settings, "TOPIC_THRESHOLD")
        spider.follow_all = get_bool(settings, "TOPIC_FOLLOW_ALL")
        spider.best_first = get_bool(settings, "TOPIC_BEST_FIRST")
        spider.train_output = settings.get("TOPIC_TRAIN_OUTPUT") or ""
        check_topic_arguments(settings, spider.topic_arguments)
        if not spider.seed_urls and not spider.train_output:
            raise ConfigError("no seed URLs given: use -a seeds=URL[,URL...] or -a seeds=@file")
        spider.topic_builder = TopicBuilder(crawler, spider.topic_arguments) if spider.topic_arguments.wanted else None
        # Load the Public Suffix List now: loading it at the first e-mail or domain
        # check would stall the reactor for ~70 ms in the middle of the crawl.
        has_public_suffix("example.com")
        return spider

    async def start(self) -> AsyncIterator[Request]:
        if self.topic_builder is not None:
            await self._prepare_topic()
        if self.train_output:
            return
        for url in self.seed_urls:
            yield self._request(url, site_of(url), depth=0)

    async def _prepare_topic(self) -> None:
        """Build the topic before any seed is requested; a bad one ends the crawl."""
        assert self.topic_builder is not None
        built = False
        try:
            self.topic = await self.topic_builder.build()
            if self.train_output:
                await to_thread(self._save_lexicon, self.topic, Path(self.train_output))
            built = True
        except (ConfigError, OSError) as exc:
            self.logger.error("topicspider: error: %s", exc)
            raise CloseSpider("topic_failed") from None
        finally:
            # Whatever happened, requests waiting for the topic must not wait forever.
            self._settle_topic(failed=not built)

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

    def _save_lexicon(self, topic: Topic, path: Path) -> None:
        header = [f"topicspider topic, trained from {len(self.topic_arguments.samples)} samples", "term<TAB>weight"]
        path.write_text(format_lexicon(topic.lexicon, header), encoding="utf-8")
        self.logger.info("Topic of %d terms written to %s", len(topic.lexicon), path)

    def _request(self, url: str, site: str, **meta: Any) -> Request:
        return Request(url, callback=self.parse, errback=self.on_error, meta={"site": site, **meta})

    def _count(self, key: str, count: int = 1) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key, count)

    def parse(self, response: Response) -> Iterator[Any]:
        self._count("pages/fetched")
        depth: int = response.meta.get("depth", 0)
        site: str = response.meta["site"]
        if depth == 0:
            # A seed that redirects, e.g. to its www. host, defines the site it lands on.
            site = site_of(response.url)
        if not is_html(response):
            self._count("pages/not_html")
            # Not text to score: 0 against a topic, counted as any page.
            relevance = NOT_SCORED if self.topic is not None else None
            if relevance is not None:
                self._record(relevance)
            self._scored(response, relevance)
            return
        # Not response.selector: it resolves <base href> eagerly and a malformed one
        # ("http://[oops") would raise and lose the page.
        root = Selector(text=response.text, type="html", base_url=response.url).root
        directives = self._robots_directives(response, root)
        item = self._page_item(response, root, depth)
        relevance = self._score(item)
        self._scored(response, relevance)
        if NOINDEX in directives:
            self._count("robots/meta_noindex")
        else:
            yield item
        if NOFOLLOW in directives:
            self._count("robots/meta_nofollow")
            return
        if depth > 0 and not self.follow_all and item.relevant is False:
            self._count("topic/links_not_followed")
            return
        yield from self._follow(response, root, site, depth, relevance)

    def _score(self, item: PageItem) -> Relevance | None:
        """Score the page against the topic, if there is one, and mark the item."""
        if self.topic is None:
            return None
        started = perf_counter()
        relevance = self.topic.relevance(item.title, item.text)
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("topic/score_seconds", perf_counter() - started)
        item.relevance = round(relevance.score, 6)
        item.relevant = self._record(relevance)
        return relevance

    def _record(self, relevance: Relevance) -> bool:
        """Count a page's score in the stats; whether it is relevant."""
        relevant = relevance.score >= self.threshold
        self._count("topic/scored")
        self._count("topic/relevant" if relevant else "topic/irrelevant")
        bucket = math.floor(relevance.score / HISTOGRAM_STEP) * HISTOGRAM_STEP
        self._count(f"topic/histogram/{bucket:.1f}")
        return relevant

    def _scored(self, response: Response, relevance: Relevance | None) -> None:
        self.crawler.signals.send_catch_log(page_scored, response=response, relevance=relevance)

    def _robots_directives(self, response: HtmlResponse, root: Any) -> set[str]:
        """``noindex``/``nofollow`` from the page's robots meta tags and X-Robots-Tag."""
        if not self.obey_meta_robots:
            return set()
        headers = [value.decode("latin-1") for value in response.headers.getlist(b"X-Robots-Tag")]
        return meta_directives(root, self.robots_token) | header_directives(headers, self.robots_token)

    def _page_item(self, response: HtmlResponse, root: Any, depth: int) -> PageItem:
        full_text = extract_text(root)
        text, text_cut = truncate(full_text, self.text_max_chars)
        title, title_cut = truncate(extract_title(root), TITLE_MAX_CHARS)
        if text_cut:
            self._count("extract/text_truncated")
        if title_cut:
            self._count("extract/title_truncated")
        return PageItem(
            url=canonical_url(response.url, self.strip_trailing_slash),
            title=title,
            depth=depth,
            http_status=response.status,
            fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            text=text,
            emails=extract_emails(root, full_text),
            content_type=response.headers.get(b"Content-Type", b"").decode("latin-1"),
            encoding=response.encoding,
            content_length=len(response.body),
        )

    def _follow(self, response: HtmlResponse, root: Any, site: str, depth: int, relevance: Relevance | None) -> Iterator[Request]:
        links, malformed = extract_links(root, base_url(root, response.url))
        counts: Counter[str] = Counter({"links/dropped/malformed": malformed} if malformed else {})
        anchors_left = ANCHORS_SCORED_PER_PAGE
        seen: set[str] = set()
        for link in links:
            reason = non_page_reason(link.url)
            if reason is not None:
                counts[f"links/dropped/{reason}"] += 1
                continue
            if link.nofollow and self.obey_rel_nofollow:
                counts["robots/rel_nofollow"] += 1
                continue
            try:
                url = request_url(link.url)
            except BadURL:
                counts["links/dropped/malformed"] += 1
                continue
            identity = canonical_url(url, self.strip_trailing_slash)
            if identity in seen:
                continue
            seen.add(identity)
            if site_of(url) != site:
                counts["links/offsite"] += 1
                continue
            counts["links/insite"] += 1
            if depth < self.max_depth:
                request = self._request(url, site)
                if self.best_first and self.topic is not None and relevance is not None:
                    request.priority = self._link_priority(relevance, link.text if anchors_left > 0 else "")
                    anchors_left -= 1
                yield request
        # One stats call per key and page, not per link.
        for key, count in counts.items():
            self._count(key, count)

    def _link_priority(self, parent: Relevance, anchor_text: str) -> int:
        """Best-first: half the parent's relevance (as a share of the highest possible),
        half the anchor text's similarity to the topic."""
        assert self.topic is not None
        parent_share = min(parent.score / self.topic.max_score, 1.0)
        anchor = self.topic.similarity(anchor_text)
        return round(PRIORITY_SCALE * (parent_share + anchor) / 2)

    def on_error(self, failure: Failure) -> None:
        request = failure.request  # type: ignore[attr-defined]
        if failure.check(HttpError):
            status = failure.value.response.status
            self._count("pages/fetched")
            self._count(f"fetch/errors/http_{status}")
            self.logger.debug("HTTP %d for %s", status, request.url)
            return
        if failure.check(IgnoreRequest) and not failure.check(RobotsUnreachable):
            # A refusal by policy (robots.txt, a middleware), not a failure.
            self._count("fetch/ignored")
            self.logger.debug("Not fetched %s: %s", request.url, failure.getErrorMessage())
            return
        reason = failure.type.__name__ if failure.type else "unknown"
        self._count(f"fetch/errors/{reason}")
        self.logger.warning("Could not fetch %s: %s", request.url, failure.getErrorMessage())

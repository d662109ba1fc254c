"""The ``topic`` spider: breadth-first, same-site crawl from seed URLs.

``scrapy crawl topic -a seeds=URL[,URL...]|@file -a depth=N``. Settings it reads:
``URL_STRIP_TRAILING_SLASH``, ``EXTRACT_TEXT_MAX_CHARS``, ``ROBOTS_META_OBEY``,
``ROBOTS_REL_NOFOLLOW_OBEY``. Stats: ``pages/fetched``, ``pages/not_html``,
``links/insite``, ``links/offsite``, ``links/dropped/<reason>``,
``robots/meta_noindex``, ``robots/meta_nofollow``, ``robots/rel_nofollow``,
``extract/text_truncated``, ``extract/title_truncated``, ``fetch/errors/<reason>``,
``fetch/ignored``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import scrapy
from parsel import Selector
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from topicspider.config import ConfigError, get_bool, get_int, parse_depth, parse_seeds
from topicspider.extract import base_url, extract_emails, extract_links, extract_text, extract_title, truncate
from topicspider.items import PageItem
from topicspider.middlewares.robots import RobotsUnreachable
from topicspider.robots import NOFOLLOW, NOINDEX, header_directives, meta_directives, token_from_settings
from topicspider.urls import BadURL, canonical_url, has_public_suffix, non_page_reason, request_url, site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


TITLE_MAX_CHARS = 1000
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


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

    def __init__(self, seeds: str = "", depth: str | int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed_urls = parse_seeds(seeds)
        self.max_depth = parse_depth(depth)

    ARGUMENTS = ("seeds", "depth")

    @classmethod
    def check_arguments(cls, seeds: str = "", depth: str | int = 3, **others: Any) -> None:
        """Raise :class:`~topicspider.config.ConfigError` for bad ``-a`` arguments."""
        # Names starting with "_" are the job server's (scrapyd passes _job).
        unknown = sorted(name for name in others if not name.startswith("_"))
        if unknown:
            known = ", ".join(cls.ARGUMENTS)
            raise ConfigError(f"unknown spider argument {unknown[0]!r} (known: {known})")
        parse_seeds(seeds)
        parse_depth(depth)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TopicSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.strip_trailing_slash = get_bool(settings, "URL_STRIP_TRAILING_SLASH")
        spider.text_max_chars = get_int(settings, "EXTRACT_TEXT_MAX_CHARS")
        spider.obey_meta_robots = get_bool(settings, "ROBOTS_META_OBEY")
        spider.obey_rel_nofollow = get_bool(settings, "ROBOTS_REL_NOFOLLOW_OBEY")
        spider.robots_token = token_from_settings(settings)
        # Load the Public Suffix List now: loading it at the first e-mail or domain
        # check would stall the reactor for ~70 ms in the middle of the crawl.
        has_public_suffix("example.com")
        return spider

    async def start(self) -> AsyncIterator[Request]:
        for url in self.seed_urls:
            yield self._request(url, site_of(url), depth=0)

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
            return
        # Not response.selector: it resolves <base href> eagerly and a malformed one
        # ("http://[oops") would raise and lose the page.
        root = Selector(text=response.text, type="html", base_url=response.url).root
        directives = self._robots_directives(response, root)
        if NOINDEX in directives:
            self._count("robots/meta_noindex")
        else:
            yield self._page_item(response, root, depth)
        if NOFOLLOW in directives:
            self._count("robots/meta_nofollow")
            return
        yield from self._follow(response, root, site, depth)

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

    def _follow(self, response: HtmlResponse, root: Any, site: str, depth: int) -> Iterator[Request]:
        links, malformed = extract_links(root, base_url(root, response.url))
        counts: Counter[str] = Counter({"links/dropped/malformed": malformed} if malformed else {})
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
                yield self._request(url, site)
        # One stats call per key and page, not per link.
        for key, count in counts.items():
            self._count(key, count)

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

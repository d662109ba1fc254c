"""robots.txt, per RFC 9309: fetched once per origin, cached with an expiry, parsed by
Protego, and obeyed before a request is sent. Its ``Crawl-delay`` and
``Request-rate`` go to the pacing middleware as a per-host minimum delay.

Enabled by ``ROBOTSTXT_OBEY`` (replaces Scrapy's ``RobotsTxtMiddleware``). Settings:
``ROBOTSTXT_USER_AGENT``, ``ROBOTSTXT_CACHE_TTL``, ``ROBOTSTXT_RETRY_TIMES``,
``ROBOTSTXT_RETRY_DELAY``, ``ROBOTSTXT_UNREACHABLE_TTL``, ``ROBOTSTXT_MAX_SIZE``,
``ROBOTSTXT_MAX_CRAWL_DELAY``, and ``BACKOFF_MAX_DELAY`` for the longest wait between
tries. Stats: ``robots/fetched``, ``robots/status/<code>``,
``robots/errors/<exception>``, ``robots/unreachable``, ``robots/denied``,
``robots/denied_unreachable``, ``robots/crawl_delay_too_long``,
``robots/retry_after_too_long``.

What a robots.txt answer means: 2xx, the rules in it; 4xx other than 429 (404 above
all), no rules; 429, 5xx or no answer, retried, then everything disallowed until
``ROBOTSTXT_UNREACHABLE_TTL`` has passed and robots.txt is asked for again. A
``Retry-After`` longer than ``BACKOFF_MAX_DELAY`` makes it unreachable at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING

from protego import Protego
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from topicspider.config import get_float, get_int
from topicspider.lru import LRU
from topicspider.reactor_tools import sleep
from topicspider.robots import retry_after_seconds, robots_txt_delay, token_from_settings
from topicspider.signals import RESUME_LATER_META, host_delay_requested

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# Origins whose rules are kept; one evicted is asked for again when next needed.
MAX_CACHED_ORIGINS = 10_000


class RobotsUnreachable(IgnoreRequest):
    """robots.txt could not be had: RFC 9309 says to assume everything disallowed."""


@dataclass(frozen=True, slots=True)
class HostRules:
    """What one origin's robots.txt allows, until ``expires`` (monotonic seconds)."""

    parser: Protego | None
    expires: float
    unreachable: bool = False
    too_slow: bool = False

    def allows(self, url: str, token: str) -> bool:
        if self.unreachable or self.too_slow:
            return False
        return self.parser is None or self.parser.can_fetch(url, token)


class RobotsTxtMiddleware:
    # robots.txt goes before any page of its host.
    DOWNLOAD_PRIORITY = 1000

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured("ROBOTSTXT_OBEY is off")
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.token = token_from_settings(settings)
        self.cache_ttl = get_float(settings, "ROBOTSTXT_CACHE_TTL")
        self.unreachable_ttl = get_float(settings, "ROBOTSTXT_UNREACHABLE_TTL")
        self.retry_times = get_int(settings, "ROBOTSTXT_RETRY_TIMES")
        self.retry_delay = get_float(settings, "ROBOTSTXT_RETRY_DELAY")
        self.max_size = get_int(settings, "ROBOTSTXT_MAX_SIZE")
        self.max_crawl_delay = get_float(settings, "ROBOTSTXT_MAX_CRAWL_DELAY")
        self.max_wait = get_float(settings, "BACKOFF_MAX_DELAY")
        self.rules: LRU[str, HostRules] = LRU(MAX_CACHED_ORIGINS)
        self.waiting: dict[str, list[Deferred[HostRules]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsTxtMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if request.meta.get("dont_obey_robotstxt") or not request.url.startswith(("http://", "https://")):
            return
        rules = await self._rules_for(request)
        if rules.allows(request.url, self.token):
            return
        if rules.unreachable:
            self.stats.inc_value("robots/denied_unreachable")
            request.meta[RESUME_LATER_META] = "robots.txt unreachable"
            raise RobotsUnreachable("robots.txt unreachable, host disallowed for now")
        self.stats.inc_value("robots/denied")
        logger.debug("Forbidden by robots.txt: %s", request.url)
        raise IgnoreRequest("Crawl-delay too long" if rules.too_slow else "Forbidden by robots.txt")

    async def _rules_for(self, request: Request) -> HostRules:
        parts = urlparse_cached(request)
        origin = f"{parts.scheme}://{parts.netloc}"
        rules = self.rules.get(origin)
        if rules is not None and rules.expires > monotonic():
            return rules
        waiter: Deferred[HostRules] = Deferred()
        if origin in self.waiting:
            self.waiting[origin].append(waiter)
            return await maybe_deferred_to_future(waiter)
        self.waiting[origin] = []
        try:
            rules = await self._fetch(origin, parts.hostname or "")
        except BaseException:
            # Never leave the requests waiting on this origin hanging.
            for other in self.waiting.pop(origin):
                other.errback()
            raise
        self.rules.put(origin, rules)
        for other in self.waiting.pop(origin):
            other.callback(rules)
        return rules

    async def _fetch(self, origin: str, host: str) -> HostRules:
        wait = min(self.retry_delay, self.max_wait)
        tries = 0
        while tries <= self.retry_times:
            if tries:
                await sleep(wait)
                wait = min(wait * 2, self.max_wait)
            tries += 1
            response = await self._download(origin)
            if response is None or response.status >= 500 or response.status == 429:
                # 429 is "come back later", not "no robots.txt": retried like a 5xx,
                # waiting at least what Retry-After asks, but never past BACKOFF_MAX_DELAY:
                # the wait holds the host's download slots, and the crawl's end with them.
                asked = self._retry_after(response)
                if asked > self.max_wait:
                    self.stats.inc_value("robots/retry_after_too_long")
                    logger.warning("robots.txt of %s asks to come back in %.0f s, more than BACKOFF_MAX_DELAY "
                                   "(%.0f s)", origin, asked, self.max_wait)
                    break
                wait = max(wait, asked)
                continue
            return self._rules_from(response, host)
        self.stats.inc_value("robots/unreachable")
        logger.warning(
            "robots.txt of %s unreachable after %d tries: the pages found on it until now are "
            "errors of this crawl (robots/denied_unreachable), which a resumed JOBDIR tries again; "
            "it is asked again after %.0f s",
            origin, tries, self.unreachable_ttl,
        )
        return HostRules(None, monotonic() + self.unreachable_ttl, unreachable=True)

    @staticmethod
    def _retry_after(response: Response | None) -> float:
        """Seconds the answer's ``Retry-After`` asks to wait; 0 without one."""
        asked = response.headers.get(b"Retry-After") if response is not None else None
        return (retry_after_seconds(asked.decode("latin-1")) or 0.0) if asked else 0.0

    async def _download(self, origin: str) -> Response | None:
        request = Request(
            f"{origin}/robots.txt", priority=self.DOWNLOAD_PRIORITY, callback=NO_CALLBACK,
            meta={"dont_obey_robotstxt": True, "dont_retry": True},
        )
        self.stats.inc_value("robots/fetched")
        try:
            response = await self.crawler.engine.download_async(request)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - any failure is "unreachable" per RFC 9309
            self.stats.inc_value(f"robots/errors/{type(exc).__name__}")
            return None
        self.stats.inc_value(f"robots/status/{response.status}")
        return response

    def _rules_from(self, response: Response, host: str) -> HostRules:
        expires = monotonic() + self.cache_ttl
        if response.status >= 300:
            # 4xx, and redirects beyond the redirect limit: robots.txt is "unavailable",
            # which RFC 9309 reads as no rules at all.
            return HostRules(None, expires)
        text = response.body[: self.max_size].decode("utf-8", errors="replace")
        parser = Protego.parse(text)
        delay = robots_txt_delay(parser, self.token)
        if delay > self.max_crawl_delay:
            # Crawling at the pace asked would take forever; as Nutch does, skip the host.
            self.stats.inc_value("robots/crawl_delay_too_long")
            logger.warning("robots.txt of %s asks for %.0f s between requests, more than "
                           "ROBOTSTXT_MAX_CRAWL_DELAY (%.0f s): its pages are skipped", host, delay,
                           self.max_crawl_delay)
            return HostRules(None, expires, too_slow=True)
        if delay > 0:
            self.crawler.signals.send_catch_log(signal=host_delay_requested, host=host, delay=delay)
        return HostRules(parser, expires)

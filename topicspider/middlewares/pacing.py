"""Per-host pacing: ``DOWNLOAD_DELAY`` as a floor between request starts on one host,
raised by robots.txt, and a per-host back-off on 429 and 503 that honours
``Retry-After``.

Enabled by ``topicspider.middlewares.pacing.PacingMiddleware`` in
``DOWNLOADER_MIDDLEWARES`` (not in distributed mode, ``REDIS_URL``, where
:class:`topicspider.middlewares.clusterpacing.ClusterPacingMiddleware` replaces it). Scrapy's downloader keeps one slot per host name and
waits ``slot.delay`` between starts there, but its jitter (``DOWNLOAD_DELAY_JITTER``)
shortens some gaps to half the delay; this middleware sets each slot's delay itself,
randomised only upwards when a jitter is set: ``delay * (1 + uniform(0, jitter))``. The
default is none, as in Nutch and Heritrix: a random wait only slows each host down. The delay of a host
is the largest of ``DOWNLOAD_DELAY``, the host's ``DOWNLOAD_SLOTS`` delay and what its
robots.txt asks for. Settings: ``DOWNLOAD_DELAY``, ``DOWNLOAD_DELAY_JITTER``,
``BACKOFF_MAX_RETRIES``, ``BACKOFF_DEFAULT_DELAY``, ``BACKOFF_MAX_DELAY``. Stats:
``pacing/robots_delayed_hosts``, ``pacing/max_delay``, ``backoff/count``,
``backoff/seconds``, ``backoff/gave_up``.
"""

from __future__ import annotations

import logging
import random
from time import monotonic
from typing import TYPE_CHECKING

from scrapy.http import Request, Response

from topicspider.cluster import redis_url
from topicspider.config import get_float, get_int, off_by_design
from topicspider.robots import retry_after_seconds
from topicspider.signals import host_delay_requested

if TYPE_CHECKING:
    from scrapy.core.downloader import Downloader
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

BACKOFF_STATUSES = frozenset({429, 503})
# Scrapy measures a host's delay from when a request leaves the host's queue; its bytes
# can reach the wire a little later (a new connection, a busy reactor) and the next
# request's a little sooner. A twentieth of the delay, at most 50 ms, keeps the gap seen by
# the server at or above DOWNLOAD_DELAY.
SEND_MARGIN = 0.05


class PacingMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.base_delay = get_float(settings, "DOWNLOAD_DELAY")
        self.jitter = get_float(settings, "DOWNLOAD_DELAY_JITTER")
        if not settings.getbool("RANDOMIZE_DOWNLOAD_DELAY", True):
            self.jitter = 0.0
        self.max_retries = get_int(settings, "BACKOFF_MAX_RETRIES")
        self.default_backoff = get_float(settings, "BACKOFF_DEFAULT_DELAY")
        self.max_backoff = get_float(settings, "BACKOFF_MAX_DELAY")
        self.slot_delays = {
            host: float(slot["delay"]) for host, slot in settings.getdict("DOWNLOAD_SLOTS").items() if "delay" in slot
        }
        self.robots_delays: dict[str, float] = {}
        self.paused_until: dict[str, float] = {}
        crawler.signals.connect(self.host_delay_requested, signal=host_delay_requested)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PacingMiddleware:
        if redis_url(crawler.settings):
            raise off_by_design(__name__, "distributed mode: ClusterPacingMiddleware paces the hosts")
        return cls(crawler)

    @property
    def downloader(self) -> Downloader:
        assert self.crawler.engine is not None
        return self.crawler.engine.downloader

    def delay_for(self, host: str) -> float:
        """The floor between request starts on ``host``."""
        return max(self.base_delay, self.slot_delays.get(host, 0.0), self.robots_delays.get(host, 0.0))

    def host_delay_requested(self, host: str, delay: float) -> None:
        if delay > self.robots_delays.get(host, 0.0):
            if host not in self.robots_delays:
                self.stats.inc_value("pacing/robots_delayed_hosts")
            self.robots_delays[host] = delay
            self.stats.max_value("pacing/max_delay", self.delay_for(host))
            logger.info("robots.txt of %s asks for %.1f s between requests; waiting %.1f s",
                        host, delay, self.delay_for(host))

    def process_request(self, request: Request) -> None:
        host = self.downloader.get_slot_key(request)
        paused = self.paused_until.get(host)
        if paused is not None:
            if monotonic() < paused:
                return  # the slot keeps its back-off delay until the pause is over
            del self.paused_until[host]
        self._set_slot_delay(host, self.draw_delay(host))

    def draw_delay(self, host: str) -> float:
        """The wait before the next start on ``host``: its delay, jittered upwards, plus
        the send margin."""
        delay = self.delay_for(host)
        if delay:
            if self.jitter:
                delay *= 1 + random.uniform(0, self.jitter)  # noqa: S311 - not cryptographic
            delay += min(SEND_MARGIN, delay * SEND_MARGIN)
        return delay

    def _set_slot_delay(self, host: str, delay: float) -> None:
        slot = self.downloader.slots.get(host)
        if slot is None:
            # Read by the downloader when it creates the host's slot, right after us.
            self.downloader.per_slot_settings.setdefault(host, {}).update(delay=delay, jitter=0)
            return
        slot.delay, slot.jitter = delay, 0
        if not slot.queue and slot.latercall is not None:
            # After each start the downloader arms a timer with the delay of that time;
            # left alone, it would make this request wait for the larger of two draws.
            # With nothing queued the timer has no work: the enqueue that follows us
            # arms a new one with this delay.
            slot.latercall.cancel()
            slot.latercall = None

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if response.status not in BACKOFF_STATUSES or request.meta.get("dont_retry"):
            # dont_retry: the sender retries on its own terms (robots.txt does).
            return response
        retries = request.meta.get("backoff_retries", 0)
        if retries >= self.max_retries:
            self.stats.inc_value("backoff/gave_up")
            request.meta["dont_retry"] = True  # RetryMiddleware must not retry it again
            return response
        host = self.downloader.get_slot_key(request)
        wait = self._backoff(response, retries, host)
        self.pause_host(host, wait)
        slot = self.downloader.slots.get(host)
        if slot is not None:
            # The next start on this host is measured from now, ``wait`` seconds on.
            slot.delay, slot.jitter, slot.lastseen = wait, 0, monotonic()
        self.stats.inc_value("backoff/count")
        self.stats.inc_value("backoff/seconds", wait)
        logger.info("HTTP %d from %s: pausing the host for %.1f s, then retrying %s",
                    response.status, host, wait, request.url)
        retry = request.replace(dont_filter=True)
        retry.meta["backoff_retries"] = retries + 1
        return retry

    def pause_host(self, host: str, wait: float) -> None:
        """No request starts on ``host`` for ``wait`` seconds."""
        self.paused_until[host] = monotonic() + wait

    def _backoff(self, response: Response, retries: int, host: str) -> float:
        header = response.headers.get(b"Retry-After")
        wait = retry_after_seconds(header.decode("latin-1")) if header else None
        if wait is None:
            wait = self.default_backoff * 2**retries
        # BACKOFF_MAX_DELAY caps what a server asks, never below the host's own delay.
        return max(min(wait, self.max_backoff), self.delay_for(host))

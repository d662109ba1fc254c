"""Per-host pacing across every worker of a distributed crawl.

Enabled in distributed mode (``REDIS_URL``), in place of
:class:`topicspider.middlewares.pacing.PacingMiddleware`: the topic spider swaps them
(``NotConfigured`` without ``REDIS_URL``). Each worker draws a host's delay as the
local middleware does (``DOWNLOAD_DELAY``, robots.txt, jitter, the send margin), but
the wait happens in Redis (:mod:`topicspider.cluster.hosts`): a request leaves for a host
only once the host's shared next-start time has passed and fewer than
``CONCURRENT_REQUESTS_PER_DOMAIN`` requests of all workers are in flight there. Back-offs
on 429/503 pause the host for every worker. The local downloader slot's own delay is
set to 0, so a worker never waits twice. Stats: those of ``PacingMiddleware``, plus
``pacing/cluster_waits``, ``pacing/cluster_wait_seconds``, ``pacing/cluster_errors``.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.http import Request, Response
from scrapy.utils.defer import deferred_from_coro
from twisted.python.threadpool import ThreadPool

from topicspider.cluster import connect, redis_url
from topicspider.cluster.hosts import HostTickets
from topicspider.config import get_float, get_int
from topicspider.middlewares.pacing import PacingMiddleware
from topicspider.reactor_tools import in_thread, sleep

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

IN_FLIGHT_POLL = 0.05  # seconds between asks while a host's places are all taken
ERROR_RETRY = 1.0  # seconds before asking a failing Redis again
# A ticket outlives the longest download, so a worker that dies frees its place.
TICKET_MARGIN = 30.0
THREADS = 4


class ClusterPacingMiddleware(PacingMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        if not redis_url(crawler.settings):
            raise NotConfigured("REDIS_URL is not set")
        super().__init__(crawler)
        settings = crawler.settings
        self.limit = get_int(settings, "CONCURRENT_REQUESTS_PER_DOMAIN")
        lifetime = get_float(settings, "DOWNLOAD_TIMEOUT") + TICKET_MARGIN
        self.tickets = HostTickets(connect(settings), lifetime)
        self.pool = ThreadPool(minthreads=1, maxthreads=THREADS, name="topicspider-clusterpacing")
        self.worker = uuid.uuid4().hex[:12]
        self.numbers = itertools.count()
        self.held: dict[Request, tuple[str, str]] = {}  # request -> (host, ticket)
        self.logged_error = False
        crawler.signals.connect(self.pool.start, signal=signals.engine_started)
        crawler.signals.connect(self.pool.stop, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterPacingMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:  # type: ignore[override]
        host = self.downloader.get_slot_key(request)
        delay = self.draw_delay(host)
        self._set_slot_delay(host, 0.0)  # the shared ticket does the waiting
        ticket = f"{self.worker}:{next(self.numbers)}"
        started = monotonic()
        waits = 0
        while (wait := await self._acquire(host, delay, ticket)) is not None:
            waits += 1
            await sleep(IN_FLIGHT_POLL if wait < 0 else wait)
        self.held[request] = (host, ticket)
        if waits:
            self.stats.inc_value("pacing/cluster_waits")
            self.stats.inc_value("pacing/cluster_wait_seconds", monotonic() - started)

    async def _acquire(self, host: str, delay: float, ticket: str) -> float | None:
        try:
            return await in_thread(self.pool, self.tickets.acquire, host, delay, self.limit, ticket)
        except Exception as exc:  # noqa: BLE001 - Redis failed: wait and ask again, never go unpaced
            self._redis_failed("take a place on", host, exc)
            return ERROR_RETRY

    def _redis_failed(self, action: str, host: str, exc: Exception) -> None:
        self.stats.inc_value("pacing/cluster_errors")
        if not self.logged_error:
            logger.warning("Could not %s %s in Redis (%s); retrying (further errors are only counted)",
                           action, host, exc)
            self.logged_error = True

    def process_response(self, request: Request, response: Response) -> Request | Response:
        self._release(request)
        return super().process_response(request, response)

    def process_exception(self, request: Request, exception: Exception) -> None:
        self._release(request)

    def _release(self, request: Request) -> None:
        entry = self.held.pop(request, None)
        if entry is not None:
            self._in_background("free a place on", entry[0], self.tickets.release, *entry)

    def pause_host(self, host: str, wait: float) -> None:
        self._in_background("pause", host, self.tickets.pause, host, wait)

    def _in_background(self, action: str, host: str, function: Any, *args: Any) -> None:
        deferred_from_coro(in_thread(self.pool, function, *args)).addErrback(
            lambda failure: self._redis_failed(action, host, failure.value))

"""Per-host pacing across every worker of a distributed crawl.

Enabled in distributed mode (``REDIS_URL``), in place of
:class:`topicspider.middlewares.pacing.PacingMiddleware`: the topic spider swaps them
(``NotConfigured`` without ``REDIS_URL``). Each worker draws a host's delay as the
local middleware does (``DOWNLOAD_DELAY``, robots.txt, jitter, the send margin, plus
20 ms for the lag between taking a ticket and sending, and 0.25 s more after a worker's
first request to a host, which opens a connection), but the wait happens in Redis
(:mod:`topicspider.cluster.hosts`): a request books the host's next start, first come,
first served among all workers, while fewer than ``CONCURRENT_REQUESTS_PER_DOMAIN``
requests of all workers are in flight or booked there, and leaves when that start has
come. A request whose host another worker has booked more than ``DECLINE_OVER`` ahead
goes back to the scheduler once (its download slot is better spent on another host);
every booking is told to the scheduler (the ``host_booked`` signal). Back-offs on
429/503 pause the host for every worker. The local downloader slot's own delay is set
to 0, so a worker never waits twice. Stats: those of ``PacingMiddleware``, plus
``pacing/cluster_waits``, ``pacing/cluster_wait_seconds``, ``pacing/cluster_errors``,
``pacing/cluster_declined``, ``pacing/cluster_stale_tickets``.
"""

from __future__ import annotations

import itertools
import logging
import math
import uuid
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object

from topicspider.cluster import (
    DECLINED_META,
    GIVE_BACK_META,
    RETURNED_META,
    connect,
    redis_url,
)
from topicspider.cluster.hosts import FOREVER, Booking, HostTickets
from topicspider.cluster.scheduler import ClusterScheduler
from topicspider.config import get_float, get_int, off_by_design
from topicspider.lru import LRU
from topicspider.middlewares.pacing import PacingMiddleware
from topicspider.reactor_tools import in_thread, sleep, thread_pool
from topicspider.signals import host_booked

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# A ticket is taken a little before its request is sent (the thread hand-off, the
# reactor's queue, the downloader slot), and that lag differs from worker to worker and
# moment to moment: a busy worker could send its request late, another one early. The
# next start on a host is pushed this much further on, so that the gap the server sees
# stays at or above the delay (measured: up to 15 ms of lag, 3 workers on 2 CPUs).
HANDOFF_MARGIN = 0.02
# A ticket whose request is this much later than its booked start (a stalled or
# descheduled worker: 60 ms was seen; or a ticket asked again after a lost reply, whose
# start had passed: 66 ms from the next worker's request, through a Redis restart)
# could leave too close to the next one, booked by another worker: it is handed back
# and a new one booked, up to STALE_RETRIES times. Lateness counts from the question to
# Redis (see lateness()), not from the answer, which a busy process may read late.
STALE_TICKET = HANDOFF_MARGIN / 2
STALE_RETRIES = 3
# A worker's first request to a host opens a connection, which takes the reactor a few
# more turns than sending on an open one: on a busy machine it left up to 0.19 s after
# its start (measured in the tests' cluster crawl), so that the server saw the next
# worker's request too soon. The next start after such a request is pushed this much
# further on; the hosts a worker has sent to are remembered up to CONNECTED_HOSTS.
CONNECT_MARGIN = 0.25
CONNECTED_HOSTS = 10_000
# Seconds between asks while a host's places are all taken: doubling up to the maximum.
IN_FLIGHT_POLL = 0.05
IN_FLIGHT_POLL_MAX = 0.8
ERROR_RETRY = 1.0  # seconds before asking a failing Redis again
# A request whose host's next start is further off than this (booked by another worker)
# goes back to the scheduler, which gives this worker's place to another host meanwhile;
# a nearer one is booked and waited for here.
DECLINE_OVER = 0.02
# A ticket outlives the longest download, so a worker that dies frees its place.
TICKET_MARGIN = 30.0
THREADS = 4


def lateness(now: float, asked: float, round_trip: float, wait: float) -> float:
    """How late a request leaving ``now`` is for a start booked ``wait`` seconds after
    Redis answered a question sent at ``asked``. Redis is taken to have answered half the
    quickest round trip after the question (the rest of a slower one is this process's
    delay: a thread that could not read the answer while the reactor held the GIL read
    it late, with the start already nearer, or past)."""
    return now - asked - round_trip / 2 - wait


class ClusterPacingMiddleware(PacingMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        if not redis_url(crawler.settings):
            raise off_by_design(__name__, "REDIS_URL is not set")
        super().__init__(crawler)
        settings = crawler.settings
        self.limit = get_int(settings, "CONCURRENT_REQUESTS_PER_DOMAIN")
        self.download_timeout = get_float(settings, "DOWNLOAD_TIMEOUT")
        self.tickets = HostTickets(connect(settings))
        self.pool = thread_pool("topicspider-clusterpacing", THREADS)
        # Releases and pauses in order, on one thread: a 429's pause must land before
        # its place is freed, or another worker could start on the host in between.
        self.updates = thread_pool("topicspider-clusterpacing-updates")
        self.worker = uuid.uuid4().hex[:12]
        self.numbers = itertools.count()
        self.held: dict[Request, tuple[str, str]] = {}  # request -> (host, ticket)
        self.connected: LRU[str, None] = LRU(CONNECTED_HOSTS)  # hosts sent to
        # Handing a request back needs the cluster scheduler to take it (an explicit
        # -s SCHEDULER may replace it): any other would drop it as seen.
        self.may_decline = issubclass(load_object(settings["SCHEDULER"]), ClusterScheduler)
        self.logged_error = False
        # The quickest round trip to Redis so far (measured by every question before its
        # answer is used; threads racing to lower it lose nothing).
        self.round_trip = math.inf
        for pool in (self.pool, self.updates):
            crawler.signals.connect(pool.start, signal=signals.engine_started)
            crawler.signals.connect(pool.stop, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterPacingMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> Request | None:  # type: ignore[override]
        host = self.downloader.get_slot_key(request)
        delay = self.draw_delay(host)
        if delay:
            delay += HANDOFF_MARGIN + (0.0 if self._connected(host) else CONNECT_MARGIN)
        self._set_slot_delay(host, 0.0)  # the shared ticket does the waiting
        # A ticket outlives the request's longest download, so a worker that dies frees its place.
        lifetime = float(request.meta.get("download_timeout", self.download_timeout)) + TICKET_MARGIN
        place = await self._take_place(request, host, delay, lifetime)
        if place is None:
            self.stats.inc_value("pacing/cluster_declined")
            request.meta[DECLINED_META] = request.meta[RETURNED_META] = True
            return request  # back to the scheduler, which knows now when the host is free
        ticket, waited = place
        self.held[request] = (host, ticket)
        if waited:
            self.stats.inc_value("pacing/cluster_waits")
            self.stats.inc_value("pacing/cluster_wait_seconds", waited)
        return None

    async def _take_place(self, request: Request, host: str, delay: float,
                          lifetime: float) -> tuple[str, float] | None:
        """A ticket on ``host`` whose start has come, and the seconds waited for it; None
        when the host's next start is too far off to hold a place of this worker for it."""
        started = monotonic()
        poll = IN_FLIGHT_POLL
        waited = False
        stale = 0
        may_decline = self.may_decline and not request.meta.get(DECLINED_META)
        ticket = self._new_ticket()  # kept when Redis fails: it may have been taken
        while True:
            reply = await self._acquire(host, delay, ticket, lifetime, DECLINE_OVER if may_decline else FOREVER)
            if reply is None:
                if not self.crawler.crawling:
                    # Closing, and Redis is gone: give the request back rather than wait forever.
                    request.meta[GIVE_BACK_META] = True
                    raise IgnoreRequest(f"no place on {host}: Redis unavailable while closing")
                await sleep(ERROR_RETRY)
                waited = True
                continue
            booking, asked = reply
            if booking.full:
                await sleep(poll)
                poll = min(poll * 2, IN_FLIGHT_POLL_MAX)
                waited = True
                continue
            free_at = monotonic() + booking.wait + (delay if booking.booked else 0.0)
            self.crawler.signals.send_catch_log(host_booked, host=host, until=free_at)
            if not booking.booked:
                return None
            if booking.wait > 0:
                await sleep(booking.wait)
                waited = True
            late = lateness(monotonic(), asked, self.round_trip, booking.wait)
            if delay and late > STALE_TICKET and stale < STALE_RETRIES:
                stale += 1
                self.stats.inc_value("pacing/cluster_stale_tickets")
                self._in_background("hand back a ticket on", host, self.tickets.unbook, host, ticket, booking)
                ticket = self._new_ticket()
                continue
            return ticket, monotonic() - started if waited else 0.0

    def _connected(self, host: str) -> bool:
        """Whether this worker has sent to ``host`` before (and so has a connection to
        it, likely); the host is remembered from now on."""
        if self.connected.touch(host):
            return True
        self.connected.put(host, None)
        return False

    def _new_ticket(self) -> str:
        return f"{self.worker}:{next(self.numbers)}"

    async def _acquire(self, host: str, delay: float, ticket: str, lifetime: float,
                       longest_wait: float) -> tuple[Booking, float] | None:
        """The host's answer, and when it was asked for (monotonic, on the thread that
        asked); None when Redis failed."""
        try:
            return await in_thread(self.pool, self._acquire_now, host, delay, ticket, lifetime, longest_wait)
        except Exception as exc:  # noqa: BLE001 - Redis failed: wait and ask again, never go unpaced
            self._redis_failed("take a place on", host, exc)
            return None

    def _acquire_now(self, host: str, delay: float, ticket: str, lifetime: float,
                     longest_wait: float) -> tuple[Booking, float]:
        # The times are taken here, not on the reactor: the reactor's lag in taking the
        # answer is part of how late the request leaves.
        asked = monotonic()
        booking = self.tickets.acquire(host, delay, self.limit, ticket, lifetime, longest_wait)
        self.round_trip = min(self.round_trip, monotonic() - asked)
        return booking, asked

    def _redis_failed(self, action: str, host: str, exc: Exception) -> None:
        self.stats.inc_value("pacing/cluster_errors")
        if not self.logged_error:
            logger.warning("Could not %s %s in Redis (%s); retrying (further errors are only counted)",
                           action, host, exc)
            self.logged_error = True

    def process_response(self, request: Request, response: Response) -> Request | Response:
        result = super().process_response(request, response)  # a back-off pauses the host first
        self._release(request)
        return result

    def process_exception(self, request: Request, exception: Exception) -> None:
        self._release(request)

    def _release(self, request: Request) -> None:
        entry = self.held.pop(request, None)
        if entry is not None:
            self._in_background("free a place on", entry[0], self.tickets.release, *entry)

    def pause_host(self, host: str, wait: float) -> None:
        self._in_background("pause", host, self.tickets.pause, host, wait)

    def _in_background(self, action: str, host: str, function: Any, *args: Any) -> None:
        deferred_from_coro(in_thread(self.updates, function, *args)).addErrback(
            lambda failure: self._redis_failed(action, host, failure.value))

"""The frontier of a distributed crawl: topicspider's frontier, fed from a queue in Redis
that every worker shares.

Enabled in distributed mode (``REDIS_URL``): the topic spider sets ``SCHEDULER =
"topicspider.cluster.scheduler.ClusterScheduler"``. Settings: ``REDIS_URL``,
``REDIS_PARAMS``, ``REDIS_PREFETCH``, ``REDIS_LEASE``, ``REDIS_MAX_DELIVERIES``, ``SCHEDULER_QUEUE_KEY``,
``SCHEDULER_DUPEFILTER_KEY``, ``REDIS_START_URLS_KEY``, ``SCHEDULER_FLUSH_ON_START``,
and those of :class:`topicspider.scheduler.FrontierScheduler`. Stats:
``scheduler/cluster/pushed``, ``scheduler/cluster/popped``, ``scheduler/cluster/acked``,
``scheduler/cluster/acked_late``, ``scheduler/cluster/given_back``,
``scheduler/cluster/reclaimed``, ``scheduler/cluster/errors``,
``scheduler/cluster/local_only``, ``scheduler/cluster/bad_entries``,
``scheduler/cluster/over_delivered``, ``scheduler/cluster/lost``,
``scheduler/cluster/unacked``, ``scheduler/cluster/stuck_leases``,
``scheduler/cluster/disowned``, ``scheduler/cluster/lost_pages_unacked``.

scrapy-redis's own scheduler makes a synchronous Redis call on the reactor thread for
every request queued and every request asked for, and loses what a killed worker had
popped. Here every Redis call runs on one worker thread, in batches: new requests,
finished ones, lease renewals and the next requests travel in one round trip
(:meth:`topicspider.cluster.frontier.RedisFrontier.exchange`), while the engine takes
requests from a local buffer of up to ``REDIS_PREFETCH`` leased ones.

Whatever can write to Redis reaches every worker, so the queue holds data only: each
request as JSON (:mod:`topicspider.requestcodec`: an http(s) URL, callbacks named among
the spider's public methods, request classes of Scrapy's or topicspider's), never a
pickle, whatever ``SCHEDULER_SERIALIZER`` says. An entry that is not such a request
runs nothing: it is counted (``scheduler/cluster/bad_entries``), acknowledged, and set
aside with its reason in the dead-letter list (``<queue key>:dead_letters``, the
latest ``DEAD_LETTERS_KEPT``).

The local fast path of de-duplication is the dupefilter's LRU; the exact store is the
crawl's Redis set, and a URL is queued only by the worker whose ``SADD`` added it. A
request stays leased to its worker until its callback has finished and the requests it
produced are in the queue, and its page is stored (the storage pipeline's
``pages_durable`` signal); only then is it acknowledged. Its level lets go of it
earlier, once the callback has finished, as in a single-process crawl. A graceful stop (Ctrl-C,
``SIGTERM``, scrapyd's cancel) gives back what it had not started; a killed worker's
leases run out after ``REDIS_LEASE`` seconds and any worker puts them back.

The crawl's ledger is kept in Redis for every worker (see :mod:`topicspider.cluster.frontier`):
each acknowledgement carries its URL's fingerprint and outcome, the links the spider
leaves (``links_dropped``) go with the next round, and at close the whole cluster's
ledger is read into this worker's stats (``ledger/*``).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

from topicspider.cluster import (
    DECLINED_META,
    GIVE_BACK_META,
    RETURNED_META,
    ClusterKeys,
    connect,
    redis_url,
)
from topicspider.cluster.frontier import (
    Ack,
    Exchange,
    ExchangeResult,
    Outgoing,
    RedisFrontier,
    dead_letter,
    entry_url,
    level_field,
    queue_order,
)
from topicspider.config import get_bool, get_float, get_int
from topicspider.discovery import RECENT_CAPACITY
from topicspider.dupefilter import Verdict
from topicspider.fingerprint import identity_digest
from topicspider.ledger import ERROR, WAITING
from topicspider.ledger import PREFIX as LEDGER_PREFIX
from topicspider.lru import LRU
from topicspider.reactor_tools import call_later, in_thread, sleep, thread_pool
from topicspider.requestcodec import UnencodableRequest, decode_request, encode_request, request_meta
from topicspider.scheduler import STORAGE_PIPELINE, FrontierScheduler, finished_outcome, level_of
from topicspider.signals import fetch_failed, host_booked, links_dropped, pages_durable, pages_lost

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

TICK = 0.2  # seconds between rounds when nothing else asks for one
# ... and while requests here wait for other workers to finish their level: the sooner
# this worker sees it done, the sooner they go.
LEVEL_TICK = 0.05
ERROR_RETRY = 1.0
SEEDS_PER_ROUND = 100
CLOSE_WAIT = 30.0
# Seconds with every local request held back, some for their level, and none given out,
# after which a worker leases another batch: what they wait for may sit further down
# the queue, behind what this worker holds.
STUCK_AFTER = 2.0
STUCK_HELD_LIMIT = 4  # ... but never past this many times REDIS_PREFETCH held


class ClusterScheduler(FrontierScheduler):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterScheduler:
        if not redis_url(crawler.settings):
            raise NotConfigured("ClusterScheduler needs REDIS_URL")
        scheduler = super().from_crawler(crawler)
        scheduler._setup_cluster(crawler)
        return scheduler

    def _setup_cluster(self, crawler: Crawler) -> None:
        settings = crawler.settings
        # Redis holds the frontier; a JOBDIR keeps no queue of its own.
        self.dqdir = None
        self.prefetch = get_int(settings, "REDIS_PREFETCH")
        self.lease = get_float(settings, "REDIS_LEASE")
        self.flush_on_start = get_bool(settings, "SCHEDULER_FLUSH_ON_START")
        assert crawler.spidercls is not None
        self.keys = ClusterKeys.from_settings(settings, crawler.spidercls.name)
        # No automatic retries: a pipeline run twice would lease a batch to nobody.
        self.server = connect(settings, retries=False)
        self.pool = thread_pool("topicspider-cluster")
        self.outgoing: list[tuple[Outgoing, bytes, Request]] = []
        self.claiming: set[bytes] = set()  # fingerprints in outgoing
        self.lease_of: dict[Request, bytes] = {}  # leased requests held here -> their queue entry
        self.given: set[Request] = set()  # leased requests handed to the engine, not finished
        self.started: set[Request] = set()  # leased requests ever handed to the engine
        self.disowned: set[Request] = set()  # buffered, but the lease was lost: not to be given out
        self.returning: list[Request] = []  # started but not crawled: back to the queue at close
        self.seed_urls: list[str] = []  # pulled from the start-URL list, for the spider
        self.seeds_wanted = 0
        self.remote_queued = 0  # in the shared queue at the last round
        self.remote_leased = 0
        self.remote_seeds = 0
        # The level barrier across workers: per site, the deepest level asked about and
        # the shallowest depth any worker still has queued or leased below it.
        self.levels_checked: dict[Any, int] = {}
        self.remote_shallowest: dict[Any, int] = {}
        self.pumping = False
        self.pump_again = False
        self.last_renewal = monotonic()
        self.last_given = monotonic()
        self.closing = False
        self.closed = False
        self.error_logged = False
        self.logged_local_only = False
        self.dead_letters: list[bytes] = []  # records of entries set aside, for the next round
        self.logged_set_aside: set[str] = set()
        self.debug = get_bool(settings, "SCHEDULER_DEBUG")
        # Names this worker's leases: unique even for a restarted worker given the same pid.
        self.worker_name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.max_deliveries = get_int(settings, "REDIS_MAX_DELIVERIES")
        self.ticker = LoopingCall(self._kick)
        # A finished request is acknowledged once its page is stored (pages_durable):
        # acknowledged and then lost in a storage buffer, it would never be fetched again.
        self.wait_for_storage = STORAGE_PIPELINE in build_component_list(settings.getwithbase("ITEM_PIPELINES"))
        self.unstored: list[tuple[float, Request]] = []  # finished, page not yet durable
        self.releasing: list[Request] = []  # ... of which the level is still to be told
        self.finish_check_due = False
        # Hosts whose shared next start is still to come (monotonic), from this worker's
        # bookings and, for other workers', from the last round. Given no request meanwhile,
        # so that this worker's slots are not spent waiting for a ticket while other hosts could go.
        self.cooling: dict[str, float] = {}
        self.wake_due = 0.0
        crawler.signals.connect(self._host_booked, signal=host_booked)
        self.stored: list[Request] = []  # finished and durable: to acknowledge
        crawler.signals.connect(self._pages_durable, signal=pages_durable)
        self.lost_pages: set[bytes] = set()  # fingerprints of pages neither stored nor spilled
        crawler.signals.connect(self._pages_lost, signal=pages_lost)
        # The cluster's ledger, in Redis: each finished request's URL and outcome, told
        # with its acknowledgement, and the links this worker will not request.
        self.outcomes: dict[Request, tuple[str, str]] = {}  # finished -> (hex fingerprint, ledger entry)
        self.superseded: set[bytes] = set()  # fingerprints of requests crawled here that a copy replaced
        self.discovered: dict[str, str] = {}  # hex fingerprint -> reason, for the next round
        self.recently_discovered: LRU[bytes, None] = LRU(RECENT_CAPACITY)
        crawler.signals.connect(self._fetch_failed, signal=fetch_failed)
        crawler.signals.connect(self._links_dropped, signal=links_dropped)

    def open(self, spider: Spider) -> Deferred[None] | None:
        result = super().open(spider)
        self.frontier = RedisFrontier(self.server, self.keys, self.lease, self.worker_name, self.max_deliveries)
        self.pool.start()
        return deferred_from_coro(self._open(result))

    async def _open(self, opened: Deferred[None] | None) -> None:
        from scrapy.utils.defer import maybe_deferred_to_future

        if opened is not None:
            await maybe_deferred_to_future(opened)
        if self.flush_on_start:
            removed = await in_thread(self.pool, self.frontier.clear)
            logger.info("SCHEDULER_FLUSH_ON_START: removed the %d Redis keys of %s", removed, self.keys.queue)
        self.ticker.start(TICK, now=True)

    # Requests in

    def _on_its_way(self, fingerprint: bytes) -> bool:
        """Whether a request of ``fingerprint`` was taken in and is being claimed in Redis."""
        return fingerprint in self.claiming

    def enqueue_request(self, request: Request) -> bool:
        if request.meta.pop(RETURNED_META, False):
            self._returned(request)
            return True
        # A redirect or retry of a request handed back once may be handed back once more.
        request.meta.pop(DECLINED_META, None)
        self._forget_download_slot(request)
        fingerprint = self.df.fingerprint(request)
        claim = not (request.dont_filter or self.df.redirect_within_identity(request))
        if claim and (self._on_its_way(fingerprint) or self.df.verdict(fingerprint) is Verdict.SEEN):
            self.df.log(request, self.spider)
            return False
        try:
            data = encode_request(request, self.spider)
        except UnencodableRequest as exc:  # not data: crawl it here, do not share it
            self._keep_local(request, fingerprint if claim else None, exc)
            return True
        host = self.downloader.get_slot_key(request)
        site, depth = level_of(request)
        order = queue_order(request.priority, depth, self.level_sync)
        entry = Outgoing(fingerprint.hex(), host, order, level_field(site, depth), data, claim=claim)
        self.outgoing.append((entry, fingerprint, request))
        if claim:
            self.claiming.add(fingerprint)
        elif any(self.df.fingerprint(crawling) == fingerprint for crawling in self.given):
            # A retry (or a redirect back to its URL) of a request crawled here: that
            # request ends with no outcome of its own, its successor's counts.
            self.superseded.add(fingerprint)
        self._kick()
        return True

    def _returned(self, request: Request) -> None:
        """A request handed out, and handed back by the pacing middleware: its host is
        booked by another worker for a while. It waits here, not in a download slot."""
        self.given.discard(request)
        self.started.discard(request)
        self._push_local(request)
        self._wake_engine()

    def _keep_local(self, request: Request, fingerprint: bytes | None, exc: Exception) -> None:
        self._count("scheduler/cluster/local_only")
        if not self.logged_local_only:
            logger.warning("Request %s cannot be encoded for Redis (%s): crawled by this worker only"
                           " (further ones are only counted)", request, exc)
            self.logged_local_only = True
        if fingerprint is not None:
            self.df.remember_in_lru(fingerprint)
        self._push_local(request)

    def _push_local(self, request: Request) -> None:
        self._mqpush(request)
        self.waiting[level_of(request)] += 1

    # Requests out

    def next_request(self) -> Request | None:
        request = super().next_request()
        while request is not None and request in self.disowned:
            # Its lease ran out (Redis was away too long): the queue has it again.
            self.disowned.discard(request)
            del self.lease_of[request]
            self._count("scheduler/cluster/disowned")
            request = super().next_request()
        if request is not None:
            self.last_given = monotonic()
            if request in self.lease_of:
                self.given.add(request)
                self.started.add(request)
        if self.remote_queued and self._room() > self.prefetch // 2:
            # Not now: the engine marks the request in progress only after this returns.
            call_later(0, self._kick)
        if request is None and self.held:
            self._wake_when_cooled()
        if self.given and not self.finish_check_due:
            # The engine asks after every request it finishes: tell its level at once.
            self.finish_check_due = True
            call_later(0, self._kick_if_finished)
        return request

    def _kick_if_finished(self) -> None:
        self.finish_check_due = False
        in_progress = self._in_progress()
        if any(request not in in_progress for request in self.given):
            self._kick()

    def has_pending_requests(self) -> bool:
        # Work queued in Redis keeps the engine asking; the buffer fills in the background.
        return (super().has_pending_requests() or bool(self.outgoing) or self.pumping
                or self.remote_queued > 0)

    # The round trip

    def _kick(self) -> None:
        if self.closed:
            return  # a kick after the close's last round: the thread pool is going
        if self.pumping:
            self.pump_again = True
            return
        self.pumping = True
        deferred_from_coro(self._pump()).addErrback(
            lambda failure: logger.error("Cluster frontier task failed: %s", failure.getTraceback()))

    async def _pump(self) -> None:
        try:
            while True:
                self.pump_again = False
                work, sent, released, finished = self._next_exchange()
                try:
                    result = await in_thread(self.pool, self.frontier.exchange, work)
                except Exception as exc:  # noqa: BLE001 - Redis failed: keep everything, try again
                    self.dead_letters = work.dead_letters + self.dead_letters
                    self.discovered = {**dict(work.discovered), **self.discovered}
                    self._failed(exc, sent, released, finished)
                    await sleep(ERROR_RETRY)
                    continue
                self._apply(result, sent, finished)
                if not self.pump_again or self.closing:
                    return
        finally:
            self.pumping = False

    def _next_exchange(self) -> tuple[Exchange, list[tuple[Outgoing, bytes, Request]], list[Request],
                                      list[Request]]:
        sent, self.outgoing = self.outgoing, []
        self._collect_finished()
        released, self.releasing = self.releasing, []
        finished, self.stored = self.stored, []
        work = Exchange(outgoing=[entry for entry, _, _ in sent], released=self._with_levels(released),
                        finished=self._acks(finished), dead_letters=self.dead_letters,
                        discovered=list(self.discovered.items()))
        self.dead_letters, self.discovered = [], {}
        if monotonic() - self.last_renewal > self.lease / 4:
            work.renew = list(self.lease_of.values())
            self.last_renewal = monotonic()
        if not self.closing:
            work.wanted = self._wanted()
            work.seeds_wanted, self.seeds_wanted = self.seeds_wanted, 0
            if self.level_sync:
                work.levels = self._level_fields()
            work.hosts = self._buffered_hosts()
        return work, sent, released, finished

    def _buffered_hosts(self) -> list[str]:
        slot_key = self.downloader.get_slot_key
        return sorted({slot_key(request) for request in self.lease_of
                       if request not in self.started and not isinstance(request, _Undecodable)})

    def _busy_hosts(self) -> set[str]:
        now = monotonic()
        return super()._busy_hosts() | {host for host, until in self.cooling.items() if until > now}

    def _host_booked(self, host: str, until: float) -> None:
        self.cooling[host] = max(until, self.cooling.get(host, 0.0))

    def _note_cooling(self, waits: dict[str, float]) -> None:
        now = monotonic()
        self.cooling = {host: until for host, until in self.cooling.items() if until > now}
        for host, wait in waits.items():
            self._host_booked(host, now + wait)
        self._wake_when_cooled()

    def _wake_when_cooled(self) -> None:
        """Ask the engine again when the first held host's next start has come."""
        now = monotonic()
        held_cooling = [self.cooling[host] for host in self.held if self.cooling.get(host, 0.0) > now]
        if held_cooling and (self.wake_due <= now or min(held_cooling) < self.wake_due):
            self.wake_due = min(held_cooling)
            call_later(self.wake_due - now, self._wake_engine)

    def _with_levels(self, requests: list[Request]) -> list[tuple[bytes, str]]:
        return [(self.lease_of[request], level_field(*level_of(request))) for request in requests]

    def _acks(self, requests: list[Request]) -> list[Ack]:
        return [Ack(data, level, *self.outcomes.get(request, ("", "")))
                for request, (data, level) in zip(requests, self._with_levels(requests))]

    def _note_outcome(self, request: Request) -> None:
        """Its callback has ended: what the ledger says of its URL, if it is the last copy."""
        if isinstance(request, _Undecodable):
            self.outcomes[request] = (request.fingerprint, request.outcome)  # type: ignore[assignment]
            return
        fingerprint = self.df.fingerprint(request)
        if fingerprint in self.superseded:
            self.superseded.discard(fingerprint)
            self.outcomes[request] = (fingerprint.hex(), "")
            return
        self.outcomes[request] = (fingerprint.hex(), finished_outcome(request, self.failures.pop(fingerprint, None)))

    def _links_dropped(self, links: list[tuple[bytes, str]]) -> None:
        """Links a page will not request: for the cluster's ledger, once each as far as
        this worker knows (the script counts each URL once across workers)."""
        for fingerprint, reason in links:
            if self.recently_discovered.touch(fingerprint) or self.df.known_in_memory(fingerprint):
                continue
            self.recently_discovered.put(fingerprint, None)
            self.discovered.setdefault(fingerprint.hex(), reason)

    def _wanted(self) -> int:
        """How many requests to lease now: enough to fill the buffer, counting held ones."""
        wanted = self._room()
        if (not wanted and not len(self.mqs) and self.remote_queued
                and self.held_count < STUCK_HELD_LIMIT * self.prefetch
                and monotonic() - self.last_given > STUCK_AFTER and self._held_for_level()):
            self._count("scheduler/cluster/stuck_leases")
            self.last_given = monotonic()  # one more batch per STUCK_AFTER at most
            return self.prefetch
        return wanted

    def _host_delay(self, slot_delay: float) -> float:
        # The slot's own delay is 0 here (the cluster's ticket does the waiting), but a
        # host with a request waiting for its ticket must get no other meanwhile.
        return max(slot_delay, self.default_delay)

    def _room(self) -> int:
        """Free places in the local buffer; held requests count, up to REDIS_PREFETCH."""
        return max(0, self.prefetch - len(self.mqs) - min(self.held_count, self.prefetch))

    def _held_for_level(self) -> bool:
        shallowest = self._shallowest_active()
        return any(not self._level_allows(requests[0], shallowest) for requests in self.held.values())

    def _deepest_held(self) -> dict[Any, int]:
        deepest: dict[Any, int] = {}
        for request in self.lease_of:
            site, depth = level_of(request)
            if site is not None and depth > deepest.get(site, 0):
                deepest[site] = depth
        return deepest

    def _level_fields(self) -> list[str]:
        """The level counts to read: every level above a leased request of this worker."""
        return [level_field(site, depth) for site, deepest in self._deepest_held().items() for depth in range(deepest)]

    def _collect_finished(self) -> None:
        in_progress = self._in_progress()
        finished = [request for request in self.given if request not in in_progress]
        self.given.difference_update(finished)
        if any(request.meta.get(GIVE_BACK_META) for request in finished):
            # Not crawled here (this worker is failing or closing): others may, so no ack.
            self.returning += [request for request in finished if request.meta.get(GIVE_BACK_META)]
            finished = [request for request in finished if not request.meta.get(GIVE_BACK_META)]
        for request in finished:
            self._note_outcome(request)
        if self.wait_for_storage and not self.closing:
            now = monotonic()
            self.unstored += [(now, request) for request in finished]
            self.releasing += finished
        else:
            self.stored += finished

    def _pages_durable(self, before: float) -> None:
        durable = 0
        for finished_at, _ in self.unstored:
            if finished_at >= before:
                break
            durable += 1
        self._settle([request for _, request in self.unstored[:durable]])
        del self.unstored[:durable]
        if durable:
            self._kick()

    def _pages_lost(self, urls: list[str]) -> None:
        # A stored page's URL is canonical: its digest is its request's fingerprint.
        self.lost_pages.update(identity_digest(url) for url in urls)

    def _settle(self, requests: list[Request]) -> None:
        """Finished requests past the storage pipeline: acknowledged, unless the page
        was neither stored nor spilled (``pages_lost``, sent before ``pages_durable``).
        Such a request's lease is left to run out (``REDIS_LEASE``), so that a worker
        fetches it again, up to ``REDIS_MAX_DELIVERIES`` times; at close it is given
        back to the queue at once."""
        for request in requests:
            fingerprint = None if isinstance(request, _Undecodable) or not self.lost_pages \
                else self.df.fingerprint(request)
            if fingerprint is None or fingerprint not in self.lost_pages:
                self.stored.append(request)
                continue
            self.lost_pages.discard(fingerprint)
            self._count("scheduler/cluster/lost_pages_unacked")
            self.outcomes.pop(request, None)
            if self.closing:
                self.returning.append(request)
            else:
                del self.lease_of[request]
                self.started.discard(request)

    def _failed(self, exc: Exception, sent: list[tuple[Outgoing, bytes, Request]],
                released: list[Request], finished: list[Request]) -> None:
        self._count("scheduler/cluster/errors")
        if not self.error_logged:
            logger.warning("Redis frontier unavailable (%s); retrying every %.0f s"
                           " (further errors are only counted)", exc, ERROR_RETRY)
            self.error_logged = True
        self.outgoing = sent + self.outgoing
        self.releasing = released + self.releasing
        self.stored = finished + self.stored
        self.last_renewal = 0.0

    def _apply(self, result: ExchangeResult, sent: list[tuple[Outgoing, bytes, Request]],
               finished: list[Request]) -> None:
        for (entry, fingerprint, request), claimed in zip(sent, result.claimed):
            if entry.claim:
                self.claiming.discard(fingerprint)
            self.df.remember_in_lru(fingerprint)  # a copy not claimed makes its URL seen too
            if claimed:
                self._count("scheduler/cluster/pushed")
                self._count("scheduler/enqueued")
            else:
                self.df.log(request, self.spider)  # another worker queued it first
        for request in finished:
            del self.lease_of[request]
            self.outcomes.pop(request, None)
            self.started.discard(request)
        self._count("scheduler/cluster/acked", len(finished) - result.acked_late)
        self._count("scheduler/cluster/acked_late", result.acked_late)
        self._count("scheduler/cluster/reclaimed", result.reclaimed)
        if result.lost:
            lost = set(result.lost)
            self.disowned.update(request for request, data in self.lease_of.items()
                                 if data in lost and request not in self.started)
        for data in result.popped:
            self._take(data)
        for data, deliveries in result.poisoned:
            self._set_aside(data, f"delivered {deliveries} times, more than REDIS_MAX_DELIVERIES"
                            f" ({self.max_deliveries}): its workers died or lost it each time", "over_delivered",
                            self._fingerprint_of(data))
        self.seed_urls += [raw.decode("utf-8", "replace") for raw in result.seeds]
        self.remote_queued, self.remote_leased, self.remote_seeds = result.queued, result.leased, result.seeds_queued
        self._note_cooling(result.host_waits)
        levels_before = (self.levels_checked, self.remote_shallowest)
        if result.levels:
            self._read_levels(result.levels)
        if self.level_sync and any(depth > self.levels_checked.get(site, 0)
                                   for site, depth in self._deepest_held().items()):
            self.pump_again = True  # new levels to ask about, at once
        if result.popped or (self.levels_checked, self.remote_shallowest) != levels_before:
            self._wake_engine()
        if self.level_sync and self.held_count and not self.pump_again and self._held_for_level():
            call_later(LEVEL_TICK, self._kick)

    def _read_levels(self, counts: dict[str, int]) -> None:
        checked: dict[Any, int] = {}
        shallowest: dict[Any, int] = {}
        for site, deepest in self._deepest_held().items():
            fields = [level_field(site, depth) for depth in range(deepest)]
            if not all(name in counts for name in fields):
                continue  # popped after the question was asked
            checked[site] = deepest
            pending = [depth for depth, name in enumerate(fields) if counts[name] > 0]
            if pending:
                shallowest[site] = pending[0]
        self.levels_checked, self.remote_shallowest = checked, shallowest

    def _shallowest_active(self) -> dict[Any, int]:
        shallowest = super()._shallowest_active()
        for site, depth in self.remote_shallowest.items():
            if depth < shallowest.get(site, depth + 1):
                shallowest[site] = depth
        return shallowest

    def _level_allows(self, request: Request, shallowest: dict[Any, int]) -> bool:  # type: ignore[override]
        site, depth = level_of(request)
        if self.level_sync and depth > self.levels_checked.get(site, 0) and request in self.lease_of:
            return False  # Redis has not yet been asked about the levels above it
        return FrontierScheduler._level_allows(request, shallowest)

    def _take(self, data: bytes) -> None:
        try:
            request = decode_request(data, self.spider)
        except UnencodableRequest as exc:  # runs nothing; a bad entry must not stop the crawl
            self._set_aside(data, str(exc), "bad_entries", self._fingerprint_of(data))
            return
        self._count("scheduler/cluster/popped")
        self.lease_of[request] = data
        try:
            self._push_local(request)
        except Exception as exc:  # noqa: BLE001 - a request the frontier cannot hold is set aside too
            del self.lease_of[request]
            self._set_aside(data, f"not a request this crawl can queue: {exc!r}"[:300], "bad_entries",
                            self.df.fingerprint(request).hex())

    # Seeds and idleness, for the spider

    def want_seeds(self) -> list[str]:
        """Seed URLs pulled from the start-URL list since the last call; asks for more."""
        urls, self.seed_urls = self.seed_urls, []
        self.seeds_wanted = SEEDS_PER_ROUND
        self._kick()
        return urls

    def cluster_idle(self) -> bool:
        """Nothing queued or leased anywhere, no seed waiting, nothing local in flight,
        as of the last round."""
        return not (self.remote_queued or self.remote_leased or self.remote_seeds or self.seed_urls
                    or self.outgoing or self.lease_of or len(self.mqs) or self.held_count)

    # Closing

    async def _close(self, reason: str) -> None:
        self.closing = True
        if self.ticker.running:
            self.ticker.stop()
        deadline = monotonic() + CLOSE_WAIT
        # The pipelines have closed: every finished page is stored, spilled or counted lost.
        self._settle([request for _, request in self.unstored])
        self.unstored.clear()
        while (self.pumping or self.outgoing or self.given or self.stored or self.discovered) and monotonic() < deadline:
            if not self.pumping:
                self._kick()
            await sleep(0.01)
        # That was the last round: one started later (a timer's kick) would queue its Redis
        # call behind the close's own, on the pool stopped below, and might never end.
        self.closed = True
        unstarted = [data for request, data in self.lease_of.items()
                     if (request not in self.started or request in self.returning)
                     and not isinstance(request, _Undecodable)]  # set aside: acknowledged, never back
        self._count("scheduler/cluster/unacked", len(self.lease_of) - len(unstarted))
        try:
            await in_thread(self.pool, self.frontier.give_back, unstarted)
            self._count("scheduler/cluster/given_back", len(unstarted))
        except Exception as exc:  # noqa: BLE001 - their leases run out and others take them
            logger.warning("Could not give %d requests back to Redis (%s); they return when their leases"
                           " run out (REDIS_LEASE)", len(unstarted), exc)
        if self.seed_urls:
            try:
                await in_thread(self.pool, self.frontier.return_seeds, self.seed_urls)
                self.seed_urls = []
            except Exception as exc:  # noqa: BLE001 - logged with their count
                logger.error("Could not return %d seeds to the Redis start list (%s)", len(self.seed_urls), exc)
        if self.outgoing:
            logger.error("%d new requests could not be queued in Redis at close", len(self.outgoing))
            self._count("scheduler/cluster/lost", len(self.outgoing))
        await self._write_cluster_ledger()
        self.lease_of.clear()
        # The local buffer was Redis's; nothing of it goes to a JOBDIR.
        self.held.clear()
        self.held_count = 0
        while self.mqs.pop() is not None:
            pass
        self.pool.stop()
        await super()._close(reason)


    def _fingerprint_of(self, data: bytes) -> str:
        """The hex fingerprint of a queue entry's URL: the request's, else the URL its JSON
        names (an entry a worker queued that this one cannot read, across an upgrade, say),
        or "" when it names none."""
        try:
            return self.df.fingerprint(decode_request(data, self.spider)).hex()
        except UnencodableRequest:
            url = entry_url(data)
        try:
            return self.df.fingerprint(Request(url)).hex() if url else ""
        except ValueError:
            return ""

    async def _write_cluster_ledger(self) -> None:
        """The whole cluster's ledger, as Redis holds it at this worker's close, into this
        worker's stats (``ledger/*``) and so its report."""
        try:
            ledger = await in_thread(self.pool, self.frontier.ledger)
        except Exception as exc:  # noqa: BLE001 - a report without its ledger, said so
            logger.warning("Could not read the cluster's ledger from Redis (%s): this worker's report has none", exc)
            return
        for entry, count in ledger.items():
            self.stats.set_value(LEDGER_PREFIX + entry, count)  # type: ignore[union-attr]
        logger.info("The crawl report's ledger is the whole cluster's, as Redis holds it at this worker's close"
                    " (%d URLs still waiting)", ledger[WAITING])

    def _set_aside(self, data: bytes, reason: str, kind: str, fingerprint: str = "") -> None:
        """A queue entry not to crawl (not a request, or a poison pill): into the
        dead-letter list, then acknowledged (in that order, in the next round), so that no
        worker takes it again. Counted as ``scheduler/cluster/<kind>``; its URL, when it
        has one (``fingerprint``), ends in the ledger as ``error/<kind>``."""
        self._count(f"scheduler/cluster/{kind}")
        if self.debug or kind not in self.logged_set_aside:
            logger.error("Set aside a queue entry, to the dead letters: %s%s", reason,
                         "" if self.debug else f"; further ones are only counted (scheduler/cluster/{kind})")
            self.logged_set_aside.add(kind)
        self.dead_letters.append(dead_letter(data, reason, self.worker_name))
        marker = _Undecodable(request_meta(data), fingerprint, ERROR + kind)
        self.lease_of[marker] = data  # type: ignore[index]
        self.given.add(marker)  # type: ignore[arg-type] # acknowledged with the next round


class _Undecodable:
    """Stands for a queue entry that could not be read, acknowledged like a finished request."""

    def __init__(self, meta: dict[str, Any], fingerprint: str, outcome: str) -> None:
        self.meta = meta
        self.fingerprint = fingerprint  # hex, "" for an entry that is no request
        self.outcome = outcome

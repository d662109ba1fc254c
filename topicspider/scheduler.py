"""The frontier: breadth-first per site, exact under concurrency, and polite per host
without head-of-line blocking.

Enabled by ``SCHEDULER = "topicspider.scheduler.FrontierScheduler"``. Settings:
``SCHEDULER_LEVEL_SYNC``, ``SCHEDULER_MAX_HELD``. Stats: ``scheduler/held/level``, ``scheduler/held/host``,
``scheduler/held/overflow`` (given out unheld because ``SCHEDULER_MAX_HELD`` were held).

Two reasons hold a request back, in a per-host waiting line, while other hosts' requests
go ahead:

* **Level.** With priorities alone (``DEPTH_PRIORITY``), a page of depth d+1 can be
  fetched and parsed while a page of depth d of the same site is still downloading.
  Its links then reach a page first at depth d+2 that is really d+1 links away, and
  the depth limit cuts that page's own links. So a site's depth d+1 requests wait
  until no request of depth <= d of that site is queued, downloading or being parsed
  (``SCHEDULER_LEVEL_SYNC``, on by default; off under ``TOPIC_BEST_FIRST``).
* **Host.** Scrapy's downloader waits out each host's delay with the requests it has
  been given in that host's queue, where they count against ``CONCURRENT_REQUESTS``:
  a slow, delayed or backed-off host would fill the downloader and stall every other
  host. So a host gets a request only when it has a free connection and, if it has a
  delay, no request of its already waiting for its turn.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict, deque
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Downloader
from scrapy.core.scheduler import Scheduler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from topicspider.config import get_bool, get_int
from topicspider.dupefilter import LRUDupeFilter, Verdict
from topicspider.reactor_tools import call_later, sleep

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)
# Seconds before the URL store is asked again after it failed, and the longest wait for
# its answers when the crawl closes.
STORE_RETRY_DELAY = 1.0
CLOSE_STORE_WAIT = 30.0
# Blocked requests popped in one call before giving up until the next call.
POPS_PER_CALL = 64


def level_of(request: Request) -> tuple[Any, int]:
    """A request's (site, depth), the unit of the level barrier."""
    return request.meta.get("site"), request.meta.get("depth", 0)


class FrontierScheduler(Scheduler):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        scheduler = super().from_crawler(crawler)
        # Best-first order crosses levels on purpose: the barrier would undo it.
        scheduler.level_sync = get_bool(crawler.settings, "SCHEDULER_LEVEL_SYNC") and not get_bool(
            crawler.settings, "TOPIC_BEST_FIRST"
        )
        scheduler.default_delay = crawler.settings.getfloat("DOWNLOAD_DELAY")
        scheduler.max_held = get_int(crawler.settings, "SCHEDULER_MAX_HELD")
        scheduler.waiting = Counter()  # (site, depth) -> requests queued or held
        scheduler.held = OrderedDict()  # host -> deque of requests popped, not yet given out
        scheduler.held_count = 0
        scheduler.unresolved = {}  # fingerprint -> request, waiting for the store's answer
        scheduler.resolving = False
        scheduler.retry_pending = False
        if not isinstance(scheduler.df, LRUDupeFilter):
            raise NotConfigured(f"{cls.__name__} needs DUPEFILTER_CLASS = topicspider.dupefilter.LRUDupeFilter")
        return scheduler

    def open(self, spider: Any) -> Deferred[None] | None:
        result = super().open(spider)
        levels = self._levels_file()
        if levels is not None and levels.exists():
            # What was queued on disk, by (site, depth), for the level barrier.
            self.waiting.update({(site, depth): count for site, depth, count in json.loads(levels.read_text())})
        return result

    def _levels_file(self) -> Path | None:
        return Path(self.dqdir) / "levels.json" if self.dqdir else None

    @staticmethod
    def _forget_download_slot(request: Request) -> None:
        if "redirect_urls" in request.meta:
            # The downloader wrote the original host's slot into meta and the redirect
            # copied it; the new URL must be paced as its own host.
            request.meta.pop(Downloader.DOWNLOAD_SLOT, None)

    def enqueue_request(self, request: Request) -> bool:
        self._forget_download_slot(request)
        if request.dont_filter or self.df.redirect_within_identity(request):
            return self._push(request)
        fingerprint = self.df.fingerprint(request)
        verdict = self.df.verdict(fingerprint)
        if verdict is Verdict.SEEN or fingerprint in self.unresolved:
            self.df.log(request, self.spider)
            return False
        if verdict is Verdict.UNKNOWN:
            # Only the store knows; ask it off the reactor thread, with others.
            self.unresolved[fingerprint] = request
            if not self.resolving:
                self.resolving = True
                self._call_soon(self._resolve)
            return True
        self.df.remember(fingerprint, request.url, request.meta.get("depth", 0))
        return self._push(request)

    def _push(self, request: Request) -> bool:
        assert self.stats is not None
        if self._dqpush(request):
            self.stats.inc_value("scheduler/enqueued/disk")
        else:
            self._mqpush(request)
            self.stats.inc_value("scheduler/enqueued/memory")
        self.stats.inc_value("scheduler/enqueued")
        self.waiting[level_of(request)] += 1
        return True

    def _call_soon(self, coroutine_function: Any, delay: float = 0) -> None:
        def run() -> None:
            deferred_from_coro(coroutine_function()).addErrback(
                lambda failure: logger.error("Frontier task failed: %s", failure.getTraceback())
            )

        call_later(delay, run)

    async def _resolve(self) -> None:
        try:
            while self.unresolved:
                batch, self.unresolved = self.unresolved, {}
                try:
                    known = await self.df.check(list(batch))
                except Exception as exc:  # noqa: BLE001 - the store failed: keep the requests, ask again
                    self._count("scheduler/store_check_errors")
                    logger.warning("Could not ask the URL store about %d requests (%s); retrying in %.0f s",
                                   len(batch), exc, STORE_RETRY_DELAY)
                    self.unresolved = {**batch, **self.unresolved}
                    self.retry_pending = True
                    self._call_soon(self._resolve_again, STORE_RETRY_DELAY)
                    return
                for fingerprint, request in batch.items():
                    if fingerprint in known:
                        self.df.log(request, self.spider)
                    elif self.df.verdict(fingerprint) is Verdict.SEEN:
                        self.df.log(request, self.spider)  # remembered while we asked
                    else:
                        self.df.remember(fingerprint, request.url, request.meta.get("depth", 0))
                        self._push(request)
                self._wake_engine()
        finally:
            self.resolving = self.retry_pending

    async def _resolve_again(self) -> None:
        self.retry_pending = False
        self.resolving = True
        await self._resolve()

    def _wake_engine(self) -> None:
        # The engine asks for requests after each download; one that is idle waiting
        # for us would only ask again at its 5 s heartbeat.
        slot = getattr(self.crawler.engine, "_slot", None) if self.crawler is not None else None
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    def queued_by_site(self) -> Counter[Any]:
        """Requests queued or held, per site: the per-host queue the console shows."""
        queued: Counter[Any] = Counter()
        for (site, _), count in self.waiting.items():
            queued[site] += count
        return queued

    def has_pending_requests(self) -> bool:
        return self.held_count > 0 or bool(self.unresolved) or self.resolving or super().has_pending_requests()

    def __len__(self) -> int:
        return super().__len__() + self.held_count + len(self.unresolved)

    @property
    def downloader(self) -> Downloader:
        assert self.crawler is not None and self.crawler.engine is not None
        return self.crawler.engine.downloader

    def next_request(self) -> Request | None:
        shallowest = self._shallowest_active() if self.level_sync else {}
        busy = self._busy_hosts()
        for host, requests in self.held.items():
            # A host's line is kept in order (see _held_order), so its head is the one to try.
            if host not in busy and self._level_allows(requests[0], shallowest):
                request = requests.popleft()
                if not requests:
                    del self.held[host]
                else:
                    self.held.move_to_end(host)  # round robin among hosts
                self.held_count -= 1
                return self._taken(request)
        for _ in range(POPS_PER_CALL):
            request = super().next_request()
            if request is None:
                return None
            host = self.downloader.get_slot_key(request)
            if host in busy:
                reason = "host"
            elif not self._level_allows(request, shallowest):
                reason = "level"
            else:
                return self._taken(request)
            if self.held_count >= self.max_held:
                # Holding more could starve the very request the held ones wait for.
                self._count("scheduler/held/overflow")
                return self._taken(request)
            self._hold(host, request)
            self._count(f"scheduler/held/{reason}")
        return None

    def _hold(self, host: str, request: Request) -> None:
        requests = self.held.setdefault(host, deque())
        key = self._held_order(request)
        index = len(requests)
        while index and self._held_order(requests[index - 1]) > key:
            index -= 1
        requests.insert(index, request)
        self.held_count += 1

    def _held_order(self, request: Request) -> tuple[int, int]:
        """Where a request goes in its host's line: shallowest first under the level
        barrier (a retry's lowered priority must not put it behind deeper requests the
        barrier holds for it), by priority otherwise."""
        if self.level_sync:
            return request.meta.get("depth", 0), -request.priority
        return 0, -request.priority

    def _count(self, key: str, count: int = 1) -> None:
        assert self.stats is not None
        if count:
            self.stats.inc_value(key, count)

    def _taken(self, request: Request) -> Request:
        level = level_of(request)
        self.waiting[level] -= 1
        if self.waiting[level] <= 0:
            del self.waiting[level]
        return request

    def _busy_hosts(self) -> set[str]:
        """Hosts that must get nothing more now: all their connections are taken, or,
        when they have a delay, one request of theirs is already waiting its turn."""
        downloader = self.downloader
        in_downloader = Counter(downloader.get_slot_key(request) for request in downloader.active)
        busy = set()
        for host, count in in_downloader.items():
            slot = downloader.slots.get(host)
            if slot is None:
                concurrency, delay, transferring = downloader.domain_concurrency, self.default_delay, 0
            else:
                concurrency, delay, transferring = slot.concurrency, slot.delay, len(slot.transferring)
            if count >= concurrency or (self._host_delay(delay) > 0 and count > transferring):
                busy.add(host)
        return busy

    def _host_delay(self, slot_delay: float) -> float:
        """A host's delay, as its downloader slot has it."""
        return slot_delay

    def _shallowest_active(self) -> dict[Any, int]:
        """Per site, the smallest depth still queued, held, downloading or parsing."""
        shallowest: dict[Any, int] = {}
        for site, depth in list(self.waiting) + [level_of(r) for r in self._in_progress()]:
            if depth < shallowest.get(site, depth + 1):
                shallowest[site] = depth
        return shallowest

    def _in_progress(self) -> set[Request]:
        # The engine's set of requests from dequeue until their callback has finished.
        # No public accessor exists; tests/test_crawl.py fails if this ever stops working.
        assert self.crawler is not None and self.crawler.engine is not None
        slot = getattr(self.crawler.engine, "_slot", None)
        return getattr(slot, "inprogress", set())

    @staticmethod
    def _level_allows(request: Request, shallowest: dict[Any, int]) -> bool:
        site, depth = level_of(request)
        return depth <= shallowest.get(site, depth)

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        # Requests still waiting for the store's verdict are settled first, then held
        # ones go back to the queues, so a JOBDIR keeps both for the resume.
        deadline = monotonic() + CLOSE_STORE_WAIT
        while (self.unresolved or self.resolving) and monotonic() < deadline:
            if not self.resolving:
                self.resolving = True
                await self._resolve()
            else:
                await sleep(0.01)
        if self.unresolved:
            # The store would not answer: keeping them risks a second fetch, dropping
            # them would lose pages for good.
            logger.warning("URL store unavailable at close: %d requests kept unchecked", len(self.unresolved))
            for request in self.unresolved.values():
                self._push(request)
            self.unresolved = {}
        for requests in self.held.values():
            for request in requests:
                if not self._dqpush(request):
                    self._mqpush(request)
        self.held.clear()
        self.held_count = 0
        levels = self._levels_file()
        if levels is not None:
            levels.write_text(json.dumps([[site, depth, count] for (site, depth), count in self.waiting.items()]))
        result = super().close(reason)
        if result is not None:
            await maybe_deferred_to_future(result)

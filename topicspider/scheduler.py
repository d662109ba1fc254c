"""A scheduler that keeps breadth-first order exact per site under concurrency.

Enabled by ``SCHEDULER = "topicspider.scheduler.LevelScheduler"``; ``SCHEDULER_LEVEL_SYNC``
(default on) switches the level barrier. Stats: ``scheduler/level_held``.

With priorities alone (``DEPTH_PRIORITY``), a page of depth d+1 can be fetched and
parsed while a page of depth d of the same site is still downloading. Its links then
reach a page first at depth d+2 that is really d+1 links away, and the depth limit
cuts that page's own links: pages within ``depth`` links are lost. This scheduler
holds back a site's depth d+1 requests until no request of depth <= d of that site
is queued, downloading or being parsed. Other sites go on meanwhile.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from typing import TYPE_CHECKING, Any

from scrapy.core.scheduler import Scheduler

from topicspider.config import get_bool

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

# Blocked requests popped in one call before giving up until the next call.
POPS_PER_CALL = 64
# Requests held back in memory, at most; past it the scheduler waits instead.
MAX_HELD = 20_000


def _level(request: Request) -> tuple[Any, int]:
    return request.meta.get("site"), request.meta.get("depth", 0)


class LevelScheduler(Scheduler):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LevelScheduler:
        scheduler = super().from_crawler(crawler)
        scheduler.level_sync = get_bool(crawler.settings, "SCHEDULER_LEVEL_SYNC")
        scheduler.waiting = Counter()  # (site, depth) -> requests queued or held
        scheduler.held = defaultdict(deque)  # site -> requests popped but not yet allowed
        scheduler.held_count = 0
        return scheduler

    def enqueue_request(self, request: Request) -> bool:
        accepted = super().enqueue_request(request)
        if accepted:
            self.waiting[_level(request)] += 1
        return accepted

    def has_pending_requests(self) -> bool:
        return self.held_count > 0 or super().has_pending_requests()

    def __len__(self) -> int:
        return super().__len__() + self.held_count

    def next_request(self) -> Request | None:
        if not self.level_sync:
            return self._taken(super().next_request())
        shallowest = self._shallowest_active()
        for site, requests in self.held.items():
            if requests and self._allowed(requests[0], shallowest):
                self.held_count -= 1
                return self._taken(requests.popleft())
        for _ in range(POPS_PER_CALL):
            if self.held_count >= MAX_HELD:
                return None
            request = super().next_request()
            if request is None or self._allowed(request, shallowest):
                return self._taken(request)
            self.held[request.meta.get("site")].append(request)
            self.held_count += 1
            assert self.stats is not None
            self.stats.inc_value("scheduler/level_held")
        return None

    def _taken(self, request: Request | None) -> Request | None:
        if request is not None:
            level = _level(request)
            self.waiting[level] -= 1
            if self.waiting[level] <= 0:
                del self.waiting[level]
        return request

    def _shallowest_active(self) -> dict[Any, int]:
        """Per site, the smallest depth still queued, held, downloading or parsing."""
        shallowest: dict[Any, int] = {}
        for site, depth in list(self.waiting) + [_level(r) for r in self._in_progress()]:
            if depth < shallowest.get(site, depth + 1):
                shallowest[site] = depth
        return shallowest

    def _in_progress(self) -> set[Request]:
        # The engine's set of requests from dequeue until their callback has finished.
        assert self.crawler is not None and self.crawler.engine is not None
        slot = self.crawler.engine._slot  # noqa: SLF001 - no public accessor exists
        return slot.inprogress if slot is not None else set()

    @staticmethod
    def _allowed(request: Request, shallowest: dict[Any, int]) -> bool:
        site, depth = _level(request)
        return depth <= shallowest.get(site, depth)

    def close(self, reason: str) -> Any:
        # Held requests go back to the queues, so a JOBDIR keeps them for the resume.
        for requests in self.held.values():
            while requests:
                request = requests.popleft()
                if not self._dqpush(request):
                    self._mqpush(request)
        self.held_count = 0
        return super().close(reason)

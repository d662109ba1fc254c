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

**The durable frontier.** With a ``JOBDIR``, the URL store (:mod:`topicspider.storage.seen`)
is the frontier's truth, and Scrapy's disk queue only a buffer in front of it, emptied
when the job resumes. A URL's request is written to the store, in the dupefilter's
batches, as it is queued; the URL is marked finished there only once its callback has
ended (so the requests it produced are queued, and written in the same or an earlier
batch), its page is stored (the storage pipeline's ``pages_durable`` signal), and no
other copy of it (a retry) is queued. A resumed job queues every URL still waiting,
at its depth and priority, before it gives out any request. So a crawl killed at any
moment loses no URL, and fetches again only what was being crawled, or read but not
yet stored, at the kill. A request that failed for a reason of the moment
(``RESUME_LATER_META``: robots.txt unreachable, its page lost) is an error of this
run, and its URL stays waiting for the resume. Stats: ``scheduler/restored``,
``scheduler/unencodable`` (requests that are not data, kept in memory and Scrapy's
queue only), ``scheduler/unrestorable``, ``scheduler/resume_later``.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter, OrderedDict, deque
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.core.scheduler import Scheduler
from scrapy.exceptions import NotConfigured
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from topicspider.config import get_bool, get_int
from topicspider.discovery import DiscoveryLedger
from topicspider.dupefilter import LRUDupeFilter, Verdict
from topicspider.fingerprint import identity_digest
from topicspider.ledger import DROPPED, NOT_QUEUED, QUEUED, RESTORED, WAITING, outcome_of
from topicspider.ledger import PREFIX as LEDGER_PREFIX
from topicspider.reactor_tools import call_later, sleep
from topicspider.requestcodec import UnencodableRequest, decode_request, encode_request
from topicspider.signals import (
    DROPPED_META,
    RESUME_LATER_META,
    fetch_failed,
    links_dropped,
    pages_durable,
    pages_lost,
)
from topicspider.storage.seen import SeenURL, mark_durable

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)
# Seconds before the URL store is asked again after it failed, and the longest wait for
# its answers when the crawl closes.
STORE_RETRY_DELAY = 1.0
CLOSE_STORE_WAIT = 30.0
# Blocked requests popped in one call before giving up until the next call.
POPS_PER_CALL = 64
# Waiting requests read back from the store at a time when a job resumes.
RESTORE_BATCH = 1000
STORAGE_PIPELINE = "topicspider.pipelines.storage.StoragePipeline"


class Finished(NamedTuple):
    """A URL whose last queued copy has been crawled: ``noticed`` (monotonic), and
    ``after``, how many requests had been sent to the store for a look-up by then, which
    all must be settled first (they may be its links)."""

    noticed: float
    after: int
    entry: SeenURL


def finished_outcome(request: Request, failure: str | None) -> str:
    """The ledger entry of a URL whose last copy is ``request``, its callback ended:
    ``failure`` is why its fetch failed for good, if it did."""
    if later := request.meta.get(RESUME_LATER_META):
        return outcome_of(f"{later}: for now")
    return outcome_of(failure, request.meta.get(DROPPED_META))


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
        scheduler._setup_durable(crawler)
        return scheduler

    def _setup_durable(self, crawler: Crawler) -> None:
        # Each URL's end is followed (for the ledger, and for the durable frontier),
        # except in distributed mode, where a URL's copies are spread over the workers.
        self.tracking = not self.df.exact_store_in_redis
        self.durable = self.df.durable
        self.ledger: Counter[str] = Counter()
        self.failures: dict[bytes, str] = {}  # fingerprint -> why its fetch failed for good
        self.restoring = False
        self.unresolved_in = self.unresolved_out = 0  # requests sent to / settled by the store's look-up
        self.copies: Counter[bytes] = Counter()  # fingerprint -> copies queued, held or being crawled
        self.crawling: dict[Request, bytes] = {}  # given to the engine, callback not yet ended
        self.awaiting_storage: deque[Finished] = deque()  # ... ended; the page may not be stored yet
        self.to_mark: deque[Finished] = deque()  # ... and stored: to be marked finished
        self.logged_unencodable = False
        self.resume_later: Counter[str] = Counter()  # reason -> URLs failed for now, left waiting
        self.lost_pages: set[bytes] = set()  # fingerprints of pages neither stored nor spilled
        self.wait_for_storage = STORAGE_PIPELINE in build_component_list(crawler.settings.getwithbase("ITEM_PIPELINES"))
        self.discovery: DiscoveryLedger | None = None
        if self.tracking:
            crawler.signals.connect(self._fetch_failed, signal=fetch_failed)
            crawler.signals.connect(self._callback_failed, signal=signals.spider_error)
            assert crawler.stats is not None
            self.discovery = DiscoveryLedger(self.df, crawler.stats)
            crawler.signals.connect(self.discovery.note, signal=links_dropped)
        if self.durable:
            crawler.signals.connect(self._pages_stored, signal=pages_durable)
            crawler.signals.connect(self._pages_lost, signal=pages_lost)

    def open(self, spider: Any) -> Deferred[None] | None:
        if self.durable and self.dqdir and not self.df.legacy_jobdir:
            # The store holds the frontier; what Scrapy's queue kept may be out of date.
            shutil.rmtree(self.dqdir)
            Path(self.dqdir).mkdir()
            mark_durable(self.df.jobdir)
        result = super().open(spider)
        if not self.tracking:
            return result
        self.restoring = self.durable
        return deferred_from_coro(self._open_ledger_and_frontier(result))

    async def _open_ledger_and_frontier(self, opened: Deferred[None] | None) -> None:
        try:
            if opened is not None:
                await maybe_deferred_to_future(opened)
            assert self.discovery is not None
            await self.discovery.open(self.df.jobdir)
            if self.durable:
                await self._restore()
        finally:
            self.restoring = False

    async def _restore(self) -> None:
        if self.df.legacy_jobdir:
            self._adopt_disk_queue()
            # Only once the store has them does the disk queue stop being the truth.
            while self.df.unflushed:
                await self.df.flush()
                if self.df.unflushed:
                    await sleep(STORE_RETRY_DELAY)
            mark_durable(self.df.jobdir)
        else:
            await self._queue_waiting()

    async def _queue_waiting(self) -> None:
        after, restored, unrestorable = b"", 0, 0
        while rows := await self.df.waiting(after, RESTORE_BATCH):
            after = rows[-1][0]
            for fingerprint, data in rows:
                try:
                    if data is None:
                        raise UnencodableRequest("the request was not data")
                    request = decode_request(data, self.spider)
                except UnencodableRequest as exc:
                    logger.debug("Waiting URL %s not queued again: %s", fingerprint.hex(), exc)
                    unrestorable += 1
                    continue
                self._restore_one(request, fingerprint)
                restored += 1
        self.ledger[RESTORED] += restored
        self._count("scheduler/restored", restored)
        if restored:
            logger.info("Resuming: %d waiting requests queued again from the URL store", restored)
        if unrestorable:
            self._count("scheduler/unrestorable", unrestorable)
            logger.warning("%d waiting URLs could not be queued again: their requests were not kept as data",
                           unrestorable)

    def _restore_one(self, request: Request, stored: bytes) -> None:
        fingerprint = self.df.fingerprint(request)
        if fingerprint != stored:
            # Fingerprinting changed since (URL_STRIP_TRAILING_SLASH): the URL waits
            # under its new fingerprint.
            depth = request.meta.get("depth", 0)
            self.df.record(SeenURL(stored, request.url, depth, finished=True))
            self.df.remember(fingerprint, request.url, depth, self._as_data(request))
        self.df.remember_in_lru(fingerprint)
        self._push(request, fingerprint)

    def _adopt_disk_queue(self) -> None:
        """An earlier version's JOBDIR: its queue is Scrapy's disk queue, which goes into
        the store now."""
        adopted = []
        while (request := self._dqpop()) is not None:
            adopted.append(request)
        for request in adopted:
            self._requeue(request, restored=True)
        self._count("scheduler/restored", len(adopted))
        logger.info("Resuming a job of an earlier version: %d queued requests moved into the URL store", len(adopted))

    @staticmethod
    def _forget_download_slot(request: Request) -> None:
        if "redirect_urls" in request.meta:
            # The downloader wrote the original host's slot into meta and the redirect
            # copied it; the new URL must be paced as its own host.
            request.meta.pop(Downloader.DOWNLOAD_SLOT, None)

    def known_link(self, fingerprint: bytes, url: str) -> bool:
        """Whether a page's link (its request's ``fingerprint``) leads to a URL memory
        knows the crawl has met: then it is counted as the dupefilter's duplicate, and
        the spider makes no request of it, which would only cost the spider middlewares,
        the engine and this scheduler their turn to find the same. Links the store alone
        knows go the way of any request."""
        if self.df.verdict(fingerprint) is Verdict.SEEN or self._on_its_way(fingerprint):
            self.df.log(f"<GET {url}>", self.spider)
            self._count("links/known")
            return True
        return False

    def _on_its_way(self, fingerprint: bytes) -> bool:
        """Whether a request of ``fingerprint`` was taken in and not yet settled: waiting
        for the store's word."""
        return fingerprint in self.unresolved

    def enqueue_request(self, request: Request) -> bool:
        self._forget_download_slot(request)
        if request.dont_filter or self.df.redirect_within_identity(request):
            return self._requeue(request)
        fingerprint = self.df.fingerprint(request)
        verdict = self.df.verdict(fingerprint)
        if verdict is Verdict.SEEN or self._on_its_way(fingerprint):
            self.df.log(request, self.spider)
            return False
        if verdict is Verdict.UNKNOWN:
            # Only the store knows; ask it off the reactor thread, with others.
            self.unresolved[fingerprint] = request
            self.unresolved_in += 1
            if not self.resolving:
                self.resolving = True
                self._call_soon(self._resolve)
            return True
        return self._admit(request, fingerprint)

    def _admit(self, request: Request, fingerprint: bytes) -> bool:
        """Queue a URL the crawl has not seen before."""
        self.ledger[QUEUED] += 1
        self.df.remember(fingerprint, request.url, request.meta.get("depth", 0), self._as_data(request))
        return self._push(request, fingerprint)

    def _requeue(self, request: Request, *, restored: bool = False) -> bool:
        """Queue a request without asking whether its URL was seen (a retry, a redirect
        back to its own URL, a request marked ``dont_filter``): it waits again."""
        if not self.tracking:
            return self._push(request)
        fingerprint = self.df.fingerprint(request)
        if fingerprint not in self.copies:  # not a copy of one still queued or crawling
            self.ledger[RESTORED if restored else QUEUED] += 1
        # Known from now on, as any queued URL: a retry's redirect (dont_filter too)
        # brings a URL no link has brought yet, and a later link to it is no new URL.
        self.df.remember(fingerprint, request.url, request.meta.get("depth", 0), self._as_data(request))
        return self._push(request, fingerprint)

    def _as_data(self, request: Request) -> bytes | None:
        """The request as the durable frontier keeps it, or None when there is none."""
        if not self.durable:
            return None
        try:
            return encode_request(request, self.spider)
        except UnencodableRequest as exc:
            self._count("scheduler/unencodable")
            if not self.logged_unencodable:
                logger.warning("A request is not data, so a resumed job will not have it (%s); further ones are"
                               " only counted (scheduler/unencodable)", exc)
                self.logged_unencodable = True
            return None

    def _push(self, request: Request, fingerprint: bytes | None = None) -> bool:
        assert self.stats is not None
        if self._dqpush(request):
            self.stats.inc_value("scheduler/enqueued/disk")
        else:
            self._mqpush(request)
            self.stats.inc_value("scheduler/enqueued/memory")
        self.stats.inc_value("scheduler/enqueued")
        self.waiting[level_of(request)] += 1
        if self.tracking:
            self.copies[fingerprint or self.df.fingerprint(request)] += 1
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
                    merged = {**batch, **self.unresolved}
                    # A link asked for again while its batch was out is one request now:
                    # the other copy counts as settled (a duplicate).
                    self.unresolved_out += len(batch) + len(self.unresolved) - len(merged)
                    self.unresolved = merged
                    self.retry_pending = True
                    self._call_soon(self._resolve_again, STORE_RETRY_DELAY)
                    return
                for fingerprint, request in batch.items():
                    if fingerprint in known:
                        self.df.log(request, self.spider)
                    elif self.df.verdict(fingerprint) is Verdict.SEEN:
                        self.df.log(request, self.spider)  # remembered while we asked
                    else:
                        self._admit(request, fingerprint)
                self.unresolved_out += len(batch)
                if self.durable:
                    self._mark_stored()
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

    def depth_by_site(self) -> dict[Any, int]:
        """Per site, the depth its level has reached: the shallowest still queued, held,
        downloading or parsing (the progress line shows it)."""
        return self._shallowest_active()

    def has_pending_requests(self) -> bool:
        return (self.held_count > 0 or bool(self.unresolved) or self.resolving or self.restoring
                or super().has_pending_requests())

    def __len__(self) -> int:
        return super().__len__() + self.held_count + len(self.unresolved)

    @property
    def downloader(self) -> Downloader:
        assert self.crawler is not None and self.crawler.engine is not None
        return self.crawler.engine.downloader

    def next_request(self) -> Request | None:
        if self.restoring:
            return None  # a level half read back would let deeper requests go first
        if self.tracking and self.crawling:
            self._note_finished()
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
        if self.tracking:
            self.crawling[request] = self.df.fingerprint(request)
        return request

    # The durable frontier: when a URL is finished

    def _fetch_failed(self, request: Request, reason: str) -> None:
        self.failures[self.df.fingerprint(request)] = reason

    def _callback_failed(self, failure: Failure, response: Response) -> None:
        """A page whose callback raised (a bug) was not read: an error, not done."""
        if response.request is not None:
            self._fetch_failed(response.request, f"{failure.type.__name__}: {failure.getErrorMessage()}")

    def _note_finished(self) -> None:
        """Take the requests whose callback has ended off the crawling list. A URL none
        of whose copies is queued or crawling any more has ended: it goes in the ledger,
        and, in a durable frontier, is marked finished once its page is stored."""
        in_progress = self._in_progress()
        now = monotonic()
        for request in [request for request in self.crawling if request not in in_progress]:
            fingerprint = self.crawling.pop(request)
            self.copies[fingerprint] -= 1
            if self.copies[fingerprint] > 0:
                continue
            del self.copies[fingerprint]
            self.ledger[finished_outcome(request, self.failures.pop(fingerprint, None))] += 1
            if later := request.meta.get(RESUME_LATER_META):
                self.resume_later[later] += 1  # stays waiting in the store
                continue
            if self.durable:
                entry = SeenURL(fingerprint, request.url, request.meta.get("depth", 0), finished=True)
                self.awaiting_storage.append(Finished(now, self.unresolved_in, entry))
        if not self.durable:
            return
        if not self.wait_for_storage:
            self.to_mark += self.awaiting_storage
            self.awaiting_storage.clear()
            self._mark_stored()

    def _pages_lost(self, urls: list[str]) -> None:
        # A stored page's URL is canonical: its digest is its request's fingerprint.
        self.lost_pages.update(identity_digest(url) for url in urls)

    def _pages_stored(self, before: float) -> None:
        """Every page that reached the storage pipeline before ``before`` is stored."""
        self._note_finished()
        while self.awaiting_storage and self.awaiting_storage[0].noticed < before:
            self.to_mark.append(self.awaiting_storage.popleft())
        self._mark_stored()

    async def _count_not_queued(self) -> None:
        assert self.discovery is not None
        try:
            not_queued = await self.discovery.close()
        except Exception as exc:  # noqa: BLE001 - the crawl's own ledger is still written
            logger.error("The ledger's discovered links could not be counted: %s", exc)
            return
        self.ledger[NOT_QUEUED] += not_queued.total()
        for reason, count in not_queued.items():
            self.ledger[DROPPED + reason] += count

    def _write_ledger(self) -> None:
        self.ledger[WAITING] = len(self.copies)
        assert self.stats is not None
        for entry, count in self.ledger.items():
            self.stats.set_value(LEDGER_PREFIX + entry, count)

    def _report_resume_later(self) -> None:
        total = sum(self.resume_later.values())
        if total:
            self._count("scheduler/resume_later", total)
            reasons = ", ".join(f"{reason}: {count}" for reason, count in self.resume_later.most_common())
            logger.info("%d URLs left waiting for a resume, failed for now (%s)", total, reasons)

    def _mark_stored(self) -> None:
        """Tell the store which URLs are finished, once the look-ups that were pending
        when each was noticed (its links among them) are settled."""
        marked = False
        while self.to_mark and self.to_mark[0].after <= self.unresolved_out:
            entry = self.to_mark.popleft().entry
            if entry.fingerprint in self.lost_pages:
                self.lost_pages.discard(entry.fingerprint)
                self.resume_later["page not stored"] += 1  # stays waiting in the store
            elif entry.fingerprint not in self.copies:  # not queued again since
                self.df.record(entry)
                marked = True
        if marked:
            self.df.flush_soon()

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
                self._requeue(request)
            self.unresolved_out += len(self.unresolved)
            self.unresolved = {}
        if self.tracking:
            self._note_finished()
            await self._count_not_queued()
            self._write_ledger()
        if self.durable:
            # The storage pipeline has closed: every page that reached it is stored.
            self.to_mark += self.awaiting_storage
            self.awaiting_storage.clear()
            self._mark_stored()
            self._report_resume_later()
        for requests in self.held.values():
            for request in requests:
                if not self._dqpush(request):
                    self._mqpush(request)
        self.held.clear()
        self.held_count = 0
        result = super().close(reason)
        if result is not None:
            await maybe_deferred_to_future(result)

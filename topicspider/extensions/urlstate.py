"""Each URL's state in the MySQL ``urls`` table while the crawl runs, so that its
frontier can be queried with SQL.

Enabled by ``topicspider.extensions.urlstate.URLStateLog`` in ``EXTENSIONS``, when
``DATABASE_URL`` is a MySQL one (``NotConfigured`` otherwise). The dupefilter's store
adds every new URL as ``waiting``; this marks it ``running`` when it reaches the
downloader, then ``done`` (with its HTTP status) or ``error`` (with the reason) once
the outcome is known (a redirect is done with its 3xx status; its target is a URL of its
own). Only page requests count, not robots.txt or training samples. A state only moves
forward, in the order waiting, running, error, done: an error answer that is retried
and then succeeds ends done. Updates are written every second, in batches, on a thread of
their own; a failed write is tried again with the next batch, and at most
:data:`MAX_PENDING` updates wait. Stats: ``urlstate/updates``, ``urlstate/errors``,
``urlstate/dropped``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

from topicspider.config import off_by_design
from topicspider.reactor_tools import in_thread, thread_pool
from topicspider.signals import fetch_failed
from topicspider.storage import StorageError
from topicspider.storage.seen import URLState, job_name

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from topicspider.storage.mysql import MySQLURLTable

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 1.0  # seconds
# About 20 MB of updates: a database gone for a long while costs states, not memory.
MAX_PENDING = 100_000
ERROR_MAX_CHARS = 500  # the urls table's last_error column


class URLStateLog:
    def __init__(self, crawler: Crawler) -> None:
        self.database_url: str = crawler.settings.get("DATABASE_URL") or ""
        if not self.database_url.lower().startswith("mysql"):
            raise off_by_design(__name__, "URL states are kept in MySQL mode only")
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.job = job_name(crawler)
        self.fingerprinter = crawler.request_fingerprinter
        self.pending: list[URLState] = []
        self.pool = thread_pool("topicspider-urlstate")
        self.table: MySQLURLTable | None = None
        self.flusher = LoopingCall(self._timed_flush)
        self.warned = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> URLStateLog:
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(extension.request_reached_downloader, signal=signals.request_reached_downloader)
        # Every download, a redirect's 3xx and a retried 503 included, unlike response_received.
        crawler.signals.connect(extension.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(extension.fetch_failed, signal=fetch_failed)
        return extension

    async def spider_opened(self) -> None:
        from topicspider.storage.mysql import MySQLURLTable

        self.pool.start()
        self.table = await in_thread(self.pool, MySQLURLTable, self.database_url, self.job)
        logger.info("URL states of job %s kept in the urls table", self.job)
        self.flusher.start(FLUSH_INTERVAL, now=False)

    def request_reached_downloader(self, request: Request, **_: Any) -> None:
        self._add(request, "running")

    def response_downloaded(self, response: Response, request: Request, **_: Any) -> None:
        failed = response.status >= 400
        self._add(request, "error" if failed else "done", response.status, f"HTTP {response.status}" if failed else None)

    def fetch_failed(self, request: Request, reason: str) -> None:
        if not reason.startswith("HTTP "):  # response_downloaded had it, with its status
            self._add(request, "error", error=reason)

    def _add(self, request: Request, state: str, status: int | None = None, error: str | None = None) -> None:
        depth = request.meta.get("depth")
        if depth is None:
            return  # not a page request: robots.txt, a training sample
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        error = error[:ERROR_MAX_CHARS] if error else None
        self._append(URLState(self.fingerprinter.fingerprint(request), request.url, depth, state, now, status, error))

    def _append(self, state: URLState) -> None:
        if len(self.pending) >= MAX_PENDING:
            self.stats.inc_value("urlstate/dropped")
            return
        self.pending.append(state)

    def _timed_flush(self) -> Deferred[None]:
        return deferred_from_coro(self.flush())

    async def flush(self) -> None:
        batch, self.pending = self.pending, []
        if not batch or self.table is None:
            self.pending = batch + self.pending
            return
        try:
            await in_thread(self.pool, self.table.set_states, batch)
        except StorageError as exc:
            self.stats.inc_value("urlstate/errors")
            self.pending = batch + self.pending
            if len(self.pending) > MAX_PENDING:
                self.stats.inc_value("urlstate/dropped", len(self.pending) - MAX_PENDING)
                del self.pending[MAX_PENDING:]
            if not self.warned:
                logger.warning("Could not update URL states (%s); trying again every second", exc)
                self.warned = True
            return
        self.stats.inc_value("urlstate/updates", len(batch))

    async def spider_closed(self) -> None:
        if self.flusher.running:
            self.flusher.stop()
        try:
            await self.flush()
            if self.table is not None:
                await in_thread(self.pool, self.table.close)
        finally:
            self.table = None
            self.pool.stop()
        if self.pending:
            self.stats.inc_value("urlstate/dropped", len(self.pending))
            logger.error("%d URL state updates could not be written", len(self.pending))

"""The crawl's archive: every response, with its request, in gzipped WARC files.

Enabled by ``WARC_DIR`` (a directory; empty, the default, turns it off), as
``wget --warc-file`` and Heritrix keep what they fetched: the seeds' "save the pages
locally", in the web archives' own format (ISO 28500), which warcio, pywb and Common
Crawl's tools read. A downloader middleware at the downloader's end of the chain (990),
so it sees each response as it came over the wire: its status, headers and body before
decompression, redirects, retries and robots.txt included. For each response it writes a
``response`` record and a ``request`` record (the request as sent: method, path and
headers, ``WARC-Concurrent-To`` the response), each gzipped on its own, after a
``warcinfo`` record at the head of every file, and says where in the directory's
``index.jsonl`` (:mod:`topicspider.archive`, which ``scrapy search --archived`` and the
console read).

Files are named ``WARC_PREFIX-YYYYmmddHHMMSS-NNNNN-pid~host.warc.gz`` (after Heritrix)
and a new one is started once the current one passes ``WARC_MAX_SIZE`` bytes (1 GB). A
thread of its own does the writing: the reactor only queues the records. Responses
waiting for the thread are bounded by ``WARC_QUEUE_MAX_MB``: past it, a response is not
archived, and counted (``warc/dropped``, logged once), rather than memory growing without
bound behind a slow disk; a write that fails is counted (``warc/errors``, logged once)
and the crawl goes on. Stats: ``warc/records``, ``warc/bytes``, ``warc/files``,
``warc/dropped``, ``warc/errors``, ``warc/reused_unindexed``.

A page the crawl was served from the topic's background sample (already archived, as
the sample's, with no depth) gets an index line of its own pointing at that record,
with the crawl's depth: ``scrapy reindex`` reads the crawl's pages by those.

Transfer-Encoding is taken out of the recorded headers: the body is recorded as it was
received once de-chunked (Twisted de-chunks it), so that the record's length and its
headers agree, as wget does.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals

from topicspider.archive import Archived, Exchange, WarcFiles, append_to_index
from topicspider.config import check_directory, get_bool, get_float, get_int, off_by_design
from topicspider.lru import LRU
from topicspider.reactor_tools import to_thread
from topicspider.signals import CACHED, REPLAYED
from topicspider.urls import BadURL, canonical_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)

_STOP = object()  # tells the writing thread to finish
# Responses archived with no depth (samples, robots.txt) remembered by URL, for a crawl
# request the sample's cache answers: a few hundred samples a crawl.
SAMPLES_REMEMBERED = 10_000


@dataclass(frozen=True)
class Reused:
    """A crawl request answered with a response archived earlier, as a sample."""

    url: str  # for an error's message
    canonical: str
    depth: int
    body: bytes = b""  # nothing to write: counts nothing against the queue's bound


def _headers(headers: Any) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, values in headers.items() for value in values]


def exchange_of(request: Request, response: Response, strip_trailing_slash: bool = True) -> Exchange:
    """What the archive keeps of ``response`` to ``request``, dated now (to the second,
    as WARC/1.0 dates are), not when the writing thread gets to it."""
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request_headers = [("Host", parts.netloc), *_headers(request.headers)]
    response_headers = [(name, value) for name, value in _headers(response.headers)
                        if name.lower() != "transfer-encoding"]
    ip_address = str(response.ip_address) if getattr(response, "ip_address", None) else ""
    canonical = _canonical(request.url, strip_trailing_slash)
    return Exchange(request.url, request.method, target, request_headers, response.protocol or "HTTP/1.1",
                    response.status, response_headers, response.body, ip_address, canonical,
                    datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), request.meta.get("depth"))


def _is_robots(url: str) -> bool:
    return urlsplit(url).path == "/robots.txt"


def _canonical(url: str, strip_trailing_slash: bool) -> str:
    try:
        return canonical_url(url, strip_trailing_slash)
    except BadURL:
        return url


class WarcMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        directory = settings.get("WARC_DIR") or ""
        if not directory:
            raise off_by_design(__name__, "WARC_DIR is not set")
        check_directory("WARC_DIR", directory)  # done at start already, unless run without preflight (scrapyd)
        self.directory = Path(directory)
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.files = WarcFiles(self.directory, settings.get("WARC_PREFIX") or "topicspider",
                               get_int(settings, "WARC_MAX_SIZE"))
        self.queue_limit = int(get_float(settings, "WARC_QUEUE_MAX_MB") * 1024 * 1024)
        self.strip_trailing_slash = get_bool(settings, "URL_STRIP_TRAILING_SLASH")
        self.queued_bytes = 0  # bodies waiting for the thread (read and written under the lock)
        self.lock = threading.Lock()
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._write_all, name="topicspider-warc", daemon=True)
        self.logged = {"dropped": False, "errors": False, "reused_unindexed": False}
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcMiddleware:
        return cls(crawler)

    def spider_opened(self) -> None:
        self.thread.start()
        logger.info("Archiving every response in WARC files under %s", self.directory)

    def process_response(self, request: Request, response: Response) -> Response:
        if CACHED in response.flags:
            # Not over the wire now: archived when it was, its crawl depth said now.
            if "depth" in request.meta and REPLAYED not in response.flags:
                self.queue.put(Reused(request.url, _canonical(request.url, self.strip_trailing_slash),
                                      request.meta["depth"]))
            return response
        exchange = exchange_of(request, response, self.strip_trailing_slash)
        size = len(response.body)
        with self.lock:
            full = self.queued_bytes + size > self.queue_limit
            if not full:
                self.queued_bytes += size
        if full:
            self._count_once("dropped", "WARC writing is behind by %.0f MB: %s not archived (further ones are "
                                        "only counted, warc/dropped)", self.queued_bytes / 1048576, request.url)
        else:
            self.queue.put(exchange)
        return response

    def _write_all(self) -> None:
        from twisted.internet import reactor

        samples: LRU[str, Archived] = LRU(SAMPLES_REMEMBERED)
        while (item := self.queue.get()) is not _STOP:
            try:
                if isinstance(item, Reused):
                    # The sample's cache answers by canonical URL: the sample's own URL stays.
                    sample = samples.get(item.canonical)
                    if sample is None:  # the sample was not archived (warc/dropped), or is long forgotten
                        reactor.callFromThread(self._count_once, "reused_unindexed", "%s was served from the "
                                               "topic's background sample, whose record is not known: it has no index"
                                               " line of its own (further ones are only counted, "
                                               "warc/reused_unindexed)", item.url)
                    else:
                        append_to_index(self.directory, [replace(sample, depth=item.depth)])
                    continue
                archived = self.files.write(item)
                append_to_index(self.directory, [archived])
                if archived.depth is None and 200 <= archived.status < 300 and not _is_robots(archived.url):
                    samples.put(archived.canonical, archived)  # a page of the topic's background sample
            except Exception as exc:  # noqa: BLE001 - a full disk must not stop the crawl
                reactor.callFromThread(self._count_once, "errors", "Could not write %s to a WARC file: %s (further "
                                       "errors are only counted, warc/errors)", item.url, exc)
            else:
                # Stats are the reactor's: counted there, in order, before the close's join returns.
                reactor.callFromThread(self._count_written, self.files.bytes, self.files.files)
            finally:
                with self.lock:
                    self.queued_bytes -= len(item.body)
        self.files.close()

    def _count_written(self, written: int, files: int) -> None:
        self.stats.inc_value("warc/records", 2)
        self.stats.set_value("warc/bytes", written)
        self.stats.set_value("warc/files", files)

    def _count_once(self, what: str, message: str, *args: Any) -> None:
        self.stats.inc_value(f"warc/{what}")
        if not self.logged[what]:
            logger.warning(message, *args)
            self.logged[what] = True

    async def spider_closed(self) -> None:
        if self.thread.is_alive():
            self.queue.put(_STOP)
            await to_thread(self.thread.join)

"""The crawl's archive: every response, with its request, in gzipped WARC files.

Enabled by ``WARC_DIR`` (a directory; empty, the default, turns it off), as
``wget --warc-file`` and Heritrix keep what they fetched: the seeds' "save the pages
locally", in the web archives' own format (ISO 28500), which warcio, pywb and Common
Crawl's tools read. A downloader middleware at the downloader's end of the chain (990),
so it sees each response as it came over the wire: its status, headers and body before
decompression, redirects, retries and robots.txt included. For each response it writes a
``response`` record and a ``request`` record (the request as sent: method, path and
headers, ``WARC-Concurrent-To`` the response), each gzipped on its own, after a
``warcinfo`` record at the head of every file.

Files are named ``WARC_PREFIX-YYYYmmddHHMMSS-NNNNN-host.warc.gz`` (Heritrix's naming)
and a new one is started once the current one passes ``WARC_MAX_SIZE`` bytes (1 GB). A
thread of its own does the writing: the reactor only queues the records. Responses
waiting for the thread are bounded by ``WARC_QUEUE_MAX_MB``: past it, a response is not
archived, and counted (``warc/dropped``, logged once), rather than memory growing without
bound behind a slow disk; a write that fails is counted (``warc/errors``, logged once)
and the crawl goes on. Stats: ``warc/records``, ``warc/bytes``, ``warc/files``,
``warc/dropped``, ``warc/errors``.

Transfer-Encoding is taken out of the recorded headers: the body is recorded as it was
received once de-chunked (Twisted de-chunks it), so that the record's length and its
headers agree, as wget does.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals

from topicspider import __version__
from topicspider.config import check_directory, get_float, get_int, off_by_design
from topicspider.reactor_tools import to_thread

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)

_STOP = object()  # tells the writing thread to finish


@dataclass(frozen=True)
class Exchange:
    """One request and its response, as plain data for the writing thread."""

    url: str
    method: str
    request_target: str
    request_headers: list[tuple[str, str]]
    protocol: str
    status: int
    response_headers: list[tuple[str, str]]
    body: bytes
    ip_address: str


def _headers(headers: Any) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, values in headers.items() for value in values]


def exchange_of(request: Request, response: Response) -> Exchange:
    """What the archive keeps of ``response`` to ``request``."""
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request_headers = [("Host", parts.netloc), *_headers(request.headers)]
    response_headers = [(name, value) for name, value in _headers(response.headers)
                        if name.lower() != "transfer-encoding"]
    ip_address = str(response.ip_address) if getattr(response, "ip_address", None) else ""
    return Exchange(request.url, request.method, target, request_headers, response.protocol or "HTTP/1.1",
                    response.status, response_headers, response.body, ip_address)


class WarcFiles:
    """Rotating gzipped WARC files in ``directory`` (used by one thread)."""

    def __init__(self, directory: Path, prefix: str, max_size: int) -> None:
        self.directory, self.prefix, self.max_size = directory, prefix, max_size
        self.serial = 0
        self.file: Any = None
        self.writer: Any = None
        self.files = 0

    def write(self, exchange: Exchange) -> int:
        """Write the response and request records; the bytes written."""
        from warcio.statusandheaders import StatusAndHeaders

        if self.file is None or self.file.tell() >= self.max_size:
            self._next_file()
        start = self.file.tell()
        try:
            reason = HTTPStatus(exchange.status).phrase
        except ValueError:
            reason = ""
        response_headers = StatusAndHeaders(f"{exchange.status} {reason}".strip(), exchange.response_headers,
                                            protocol=exchange.protocol)
        extra = {"WARC-IP-Address": exchange.ip_address} if exchange.ip_address else None
        response = self.writer.create_warc_record(exchange.url, "response", payload=BytesIO(exchange.body),
                                                  http_headers=response_headers, warc_headers_dict=extra)
        request_headers = StatusAndHeaders(f"{exchange.method} {exchange.request_target} {exchange.protocol}",
                                           exchange.request_headers, is_http_request=True)
        request = self.writer.create_warc_record(exchange.url, "request", payload=BytesIO(b""),
                                                 http_headers=request_headers)
        request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID"))
        self.writer.write_record(response)
        self.writer.write_record(request)
        self.file.flush()
        return int(self.file.tell() - start)

    def _next_file(self) -> None:
        from warcio.warcwriter import WARCWriter

        self.close()
        self.serial += 1
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S")
        name = f"{self.prefix}-{stamp}-{self.serial:05d}-{socket.gethostname()}.warc.gz"
        self.file = (self.directory / name).open("xb")
        self.writer = WARCWriter(self.file, gzip=True)
        self.writer.write_record(self.writer.create_warcinfo_record(name, {
            "software": f"topicspider/{__version__} (warcio)", "format": "WARC File Format 1.0",
            "hostname": socket.gethostname()}))
        self.files += 1

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


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
        self.queued_bytes = 0  # bodies waiting for the thread (read and written under the lock)
        self.lock = threading.Lock()
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._write_all, name="topicspider-warc", daemon=True)
        self.logged = {"dropped": False, "errors": False}
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcMiddleware:
        return cls(crawler)

    def spider_opened(self) -> None:
        self.thread.start()
        logger.info("Archiving every response in WARC files under %s", self.directory)

    def process_response(self, request: Request, response: Response) -> Response:
        size = len(response.body)
        with self.lock:
            full = self.queued_bytes + size > self.queue_limit
            if not full:
                self.queued_bytes += size
        if full:
            self._count_once("dropped", "WARC writing is behind by %.0f MB: %s not archived (further ones are "
                                        "only counted, warc/dropped)", self.queued_bytes / 1048576, request.url)
        else:
            self.queue.put(exchange_of(request, response))
        return response

    def _write_all(self) -> None:
        from twisted.internet import reactor

        while (item := self.queue.get()) is not _STOP:
            try:
                written = self.files.write(item)
            except Exception as exc:  # noqa: BLE001 - a full disk must not stop the crawl
                reactor.callFromThread(self._count_once, "errors", "Could not write %s to a WARC file: %s (further "
                                       "errors are only counted, warc/errors)", item.url, exc)
            else:
                # Stats are the reactor's: counted there, in order, before the close's join returns.
                reactor.callFromThread(self._count_written, written, self.files.files)
            finally:
                with self.lock:
                    self.queued_bytes -= len(item.body)
        self.files.close()

    def _count_written(self, written: int, files: int) -> None:
        self.stats.inc_value("warc/records", 2)
        self.stats.inc_value("warc/bytes", written)
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

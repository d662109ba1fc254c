"""WARC files without Scrapy: writing a request and its response as records, rotating
files, the archive's index of where each response is, and reading one back.

:class:`WarcFiles` writes (on one thread: :mod:`topicspider.middlewares.warc` gives it
its own); next to the files, ``index.jsonl`` holds a line per archived response: its URL
and canonical URL (the stored page's identity), file, offset and length of its record,
status and time. Every process archiving into a directory appends to it with ``O_APPEND``
(on a local file system, appends do not interleave), each line after a newline of its
own, so that a line a crash cut short spoils no other; :func:`find_archived` reads it as
a CDX index is read. File names carry the process id: processes archiving into one
directory never pick the same name.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from topicspider import __version__

INDEX_NAME = "index.jsonl"
# Characters of a URL kept in an index line (Scrapy's URLLENGTH_LIMIT is 2083).
INDEX_URL_MAX = 3000
# Bytes of an archived body read back, decoded (a gzip bomb is archived as it came).
READ_MAX_BYTES = 10 * 1024 * 1024
# Request headers never archived: credentials.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


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
    canonical: str = ""  # the request URL as pages are stored under it
    date: str = ""  # when the response came (WARC-Date), ISO 8601 UTC
    depth: int | None = None  # links from its seed, for a crawl's request


@dataclass(frozen=True)
class Archived:
    """Where the archive holds a response: an ``index.jsonl`` line."""

    url: str
    file: str  # its name in the directory
    offset: int  # of the response record, gzipped
    length: int  # of that gzip member
    status: int
    date: str  # ISO 8601, UTC
    canonical: str = ""  # the URL as pages are stored under it (topicspider.urls.canonical_url)
    depth: int | None = None  # links from its seed; None in archives written before it was kept


@dataclass(frozen=True)
class ArchivedResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # as served, but decoded from its Content-Encoding


@cache
def _wire_headers_class() -> Any:
    from warcio.statusandheaders import StatusAndHeaders

    class WireHeaders(StatusAndHeaders):  # type: ignore[misc]
        def compute_headers_buffer(self, header_filter: Any = None) -> None:
            self.headers_buff = self.to_bytes(header_filter, encoding="latin-1")

    return WireHeaders


def _wire_headers(statusline: str, headers: list[tuple[str, str]], **options: Any) -> Any:
    """warcio's headers, written as their bytes came (they are latin-1 decoded), where
    warcio would %-encode any byte over 127 (a raw UTF-8 Location of a Chinese site)."""
    return _wire_headers_class()(statusline, headers, **options)


class WarcFiles:
    """Rotating gzipped WARC files in ``directory`` (used by one thread)."""

    def __init__(self, directory: Path, prefix: str, max_size: int) -> None:
        self.directory, self.prefix, self.max_size = directory, prefix, max_size
        self.serial = 0
        self.file: Any = None
        self.writer: Any = None
        self.name = ""
        self.files = 0  # started
        self.bytes = 0  # written, in every file, warcinfo records included

    def write(self, exchange: Exchange) -> Archived:
        """Write the response and request records; where the response went."""
        if self.file is None or self.file.tell() >= self.max_size:
            self._next_file()
        start = self.file.tell()
        try:
            return self._write_pair(exchange, start)
        except BaseException:
            # A gzip member cut short would stop every reader of the rest of the file.
            self.file.seek(start)
            self.file.truncate()
            raise

    def _write_pair(self, exchange: Exchange, start: int) -> Archived:
        try:
            reason = HTTPStatus(exchange.status).phrase
        except ValueError:
            reason = ""
        response_headers = _wire_headers(f"{exchange.status} {reason}".strip(), exchange.response_headers,
                                         protocol=exchange.protocol)
        dated = {"WARC-Date": exchange.date} if exchange.date else {}
        extra = {**dated, **({"WARC-IP-Address": exchange.ip_address} if exchange.ip_address else {})}
        response = self.writer.create_warc_record(exchange.url, "response", payload=BytesIO(exchange.body),
                                                  length=len(exchange.body), http_headers=response_headers,
                                                  warc_headers_dict=extra)
        request_headers = _wire_headers(
            f"{exchange.method} {exchange.request_target} {exchange.protocol}",
            [(name, value) for name, value in exchange.request_headers if name.lower() not in SECRET_HEADERS],
            is_http_request=True)
        request = self.writer.create_warc_record(exchange.url, "request", payload=BytesIO(b""), length=0,
                                                 http_headers=request_headers, warc_headers_dict=dated)
        request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID"))
        offset = self.file.tell()
        self.writer.write_record(response)
        length = self.file.tell() - offset
        self.writer.write_record(request)
        self.file.flush()
        self.bytes += self.file.tell() - start
        return Archived(exchange.url, self.name, offset, length, exchange.status,
                        response.rec_headers.get_header("WARC-Date"), exchange.canonical, exchange.depth)

    def _next_file(self) -> None:
        from warcio.warcwriter import WARCWriter

        self.close()
        self.serial += 1
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S")
        self.name = f"{self.prefix}-{stamp}-{self.serial:05d}-{os.getpid()}~{socket.gethostname()}.warc.gz"
        self.file = (self.directory / self.name).open("xb")
        self.writer = WARCWriter(self.file, gzip=True)
        self.writer.write_record(self.writer.create_warcinfo_record(self.name, {
            "software": f"topicspider/{__version__} (warcio)", "format": "WARC File Format 1.0",
            "hostname": socket.gethostname()}))
        self.bytes += self.file.tell()
        self.files += 1

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def append_to_index(directory: Path, entries: list[Archived]) -> None:
    """Add ``entries`` to the directory's index, a whole line each."""
    descriptor = os.open(directory / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for entry in entries:
            fields = {**asdict(entry), "url": entry.url[:INDEX_URL_MAX], "canonical": entry.canonical[:INDEX_URL_MAX]}
            # The newline first: a line a crash left without its end spoils no other.
            line = ("\n" + json.dumps(fields, ensure_ascii=False) + "\n").encode("utf-8")
            while line:  # one write a line, unless the system writes it in parts
                line = line[os.write(descriptor, line):]
    finally:
        os.close(descriptor)


def index_entries(directory: Path) -> Iterator[Archived]:
    """The directory's index lines, in the order they were written; a line that is
    blank or was cut short is skipped. None without an index."""
    try:
        with (directory / INDEX_NAME).open(encoding="utf-8", errors="replace") as index:
            for line in index:
                try:
                    yield Archived(**json.loads(line))
                except (ValueError, TypeError):
                    continue  # a blank line, or one a crash cut short
    except FileNotFoundError:
        return


def find_archived(directory: Path, urls: set[str]) -> dict[str, Archived]:
    """For each of ``urls`` (stored pages' canonical URLs, or URLs as fetched) the index
    holds, its latest archived response: the latest with a 2xx status if any (a page
    stored under the URL it was redirected from has its 3xx archived under it too)."""
    found: dict[str, Archived] = {}
    for entry in index_entries(directory):
        for key in {entry.canonical, entry.url} & urls:
            before = found.get(key)
            if _preferred(entry.status, None if before is None else before.status):
                found[key] = entry
    return found


def _preferred(status: int, before: int | None) -> bool:
    """Whether a response of ``status``, later in the index, stands for its URL rather
    than one of status ``before``: a 2xx over anything, else the latest."""
    return before is None or 200 <= status < 300 or not 200 <= before < 300


class Located(Protocol):
    """Where a response record is: an :class:`Archived` or a :class:`ReplayEntry`."""

    @property
    def file(self) -> str: ...
    @property
    def offset(self) -> int: ...


class ReplayEntry(NamedTuple):
    """An archived response as a replay keeps it: what :func:`read_archived` needs (a
    few dozen bytes and the URL, against an :class:`Archived`'s hundreds)."""

    file: str
    offset: int
    status: int
    date: str


class ReplayIndex:
    """Every URL an archive answered, with its latest response (a 2xx preferred), for
    answering requests from the archive instead of the network, and the crawl's pages
    among them, to read again."""

    def __init__(self, responses: dict[str, ReplayEntry], pages: list[tuple[str, int]]) -> None:
        self.responses = responses  # URL as fetched -> its response
        self.pages = pages  # (URL, depth) of each page the crawl fetched, shallowest first

    @classmethod
    def load(cls, directory: Path) -> ReplayIndex:
        """The directory's index read (a few seconds for millions of lines: on a thread)."""
        responses: dict[str, ReplayEntry] = {}
        depths: dict[str, int] = {}  # the crawl's pages: a sample or robots.txt has no depth
        files: dict[str, str] = {}  # one string a file name, however many entries name it
        for entry in index_entries(directory):
            before = responses.get(entry.url)
            if _preferred(entry.status, None if before is None else before.status):
                file = files.setdefault(entry.file, entry.file)
                responses[entry.url] = ReplayEntry(file, entry.offset, entry.status, entry.date)
            if entry.depth is not None and 200 <= entry.status < 300:
                depths[entry.url] = min(entry.depth, depths.get(entry.url, entry.depth))
        if not depths:
            # An archive written before the index kept depths: every 2xx page but
            # robots.txt, at depth 0.
            depths = {url: 0 for url, entry in responses.items()
                      if 200 <= entry.status < 300 and urlsplit(url).path != "/robots.txt"}
        # A URL with a 2xx response is answered with one (_preferred): these are all pages.
        return cls(responses, sorted(depths.items(), key=lambda page: page[1]))

    def __len__(self) -> int:
        return len(self.responses)

    def seeds(self) -> list[str]:
        """The pages the crawl fetched at depth 0: its seeds, as far as they answered."""
        return [url for url, depth in self.pages if depth == 0]


class ArchiveError(Exception):
    """An archived response that cannot be read back."""


def read_archived(directory: Path, entry: Located, limit: int = READ_MAX_BYTES, *,
                  decoded: bool = True) -> ArchivedResponse:
    """The response ``entry`` locates, read back from its WARC file, its body decoded
    from its Content-Encoding (``decoded``: as warcio can, gzip, deflate and brotli) or
    as it came; :class:`ArchiveError` if it cannot be, or is over ``limit``."""
    from warcio.archiveiterator import ArchiveIterator

    if Path(entry.file).name != entry.file:
        raise ArchiveError(f"{entry.file!r} is not a file name")
    where = f"{entry.file} at byte {entry.offset}"
    try:
        with (directory / entry.file).open("rb") as stream:
            stream.seek(entry.offset)
            record = next(iter(ArchiveIterator(stream)))
            body = (record.content_stream() if decoded else record.raw_stream).read(limit + 1)
            status, headers = int(record.http_headers.get_statuscode()), list(record.http_headers.headers)
    except Exception as exc:  # noqa: BLE001 - warcio's errors are plain Exceptions; any is "cannot read"
        raise ArchiveError(f"cannot read {where}: {exc}") from exc
    if len(body) > limit:
        raise ArchiveError(f"{where}: the archived body is over {limit} bytes{' decoded' if decoded else ''}")
    return ArchivedResponse(status, headers, body)

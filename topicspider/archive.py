"""WARC files without Scrapy: writing a request and its response as records, rotating
files, the archive's index of where each response is, and reading one back.

:class:`WarcFiles` writes (on one thread: :mod:`topicspider.middlewares.warc` gives it
its own); next to the files, ``index.jsonl`` holds a line per archived response: its URL,
file, offset and length of its record, status and time. Every process archiving into a
directory appends whole lines to it (each under ``PIPE_BUF``, so appends do not mix), and
:func:`find_archived` reads the last line for a URL, as a CDX index is read.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import Any

from topicspider import __version__

INDEX_NAME = "index.jsonl"
# Bytes of a URL kept in the index line (a line stays under PIPE_BUF, 4096).
INDEX_URL_MAX = 3000


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


@dataclass(frozen=True)
class Archived:
    """Where the archive holds a response: an ``index.jsonl`` line."""

    url: str
    file: str  # its name in the directory
    offset: int  # of the response record, gzipped
    length: int  # of that gzip member
    status: int
    date: str  # ISO 8601, UTC


@dataclass(frozen=True)
class ArchivedResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # as served, but decoded from its Content-Encoding


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
        offset = self.file.tell()
        self.writer.write_record(response)
        length = self.file.tell() - offset
        self.writer.write_record(request)
        self.file.flush()
        self.bytes += self.file.tell() - start
        return Archived(exchange.url, self.name, offset, length, exchange.status,
                        response.rec_headers.get_header("WARC-Date"))

    def _next_file(self) -> None:
        from warcio.warcwriter import WARCWriter

        self.close()
        self.serial += 1
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S")
        self.name = f"{self.prefix}-{stamp}-{self.serial:05d}-{socket.gethostname()}.warc.gz"
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
    lines = "".join(json.dumps({**asdict(entry), "url": entry.url[:INDEX_URL_MAX]}, ensure_ascii=False) + "\n"
                    for entry in entries)
    descriptor = os.open(directory / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for line in lines.splitlines(keepends=True):  # one write a line: appends of others never cut one
            os.write(descriptor, line.encode("utf-8"))
    finally:
        os.close(descriptor)


def find_archived(directory: Path, urls: set[str]) -> dict[str, Archived]:
    """The latest archived response of each of ``urls`` the index holds."""
    found: dict[str, Archived] = {}
    try:
        with (directory / INDEX_NAME).open(encoding="utf-8") as index:
            for line in index:
                try:
                    entry = Archived(**json.loads(line))
                except (ValueError, TypeError):
                    continue  # a line cut short by a crash
                if entry.url in urls:
                    found[entry.url] = entry
    except FileNotFoundError:
        return {}
    return found


def read_archived(directory: Path, entry: Archived) -> ArchivedResponse:
    """The response ``entry`` locates, read back from its WARC file."""
    from warcio.archiveiterator import ArchiveIterator

    with (directory / entry.file).open("rb") as stream:
        stream.seek(entry.offset)
        record = next(iter(ArchiveIterator(stream)))
        body = record.content_stream().read()
        return ArchivedResponse(int(record.http_headers.get_statuscode()), list(record.http_headers.headers), body)

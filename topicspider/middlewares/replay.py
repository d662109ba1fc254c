"""Answers the crawl's requests from a WARC archive instead of the network: what
``scrapy reindex`` runs on, to read archived pages again (a new topic, a new search
index) without fetching anything.

Enabled by ``topicspider.middlewares.replay.WarcReplayMiddleware`` in
``DOWNLOADER_MIDDLEWARES``, with ``WARC_REPLAY_DIR`` naming a directory that
:mod:`topicspider.middlewares.warc` archived into (``WARC_DIR``). It sits where the
network would be, after every other middleware's request side: a request is answered
with its URL's latest archived response (a 2xx preferred) as it came over the wire,
flagged ``cached`` and ``replayed`` (not archived again), its page dated when it was
fetched; Scrapy's HttpCompressionMiddleware decodes its Content-Encoding as it would
have then. A URL the archive lacks is not fetched: it ends dropped (``not_archived`` in
the ledger), and a record that cannot be read back ends as an error. Stats:
``replay/responses``, ``replay/not_archived``, ``replay/unreadable``.
"""

from __future__ import annotations

import logging
from functools import partial
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes

from topicspider.archive import READ_MAX_BYTES, ArchivedResponse, ArchiveError, ReplayIndex, read_archived
from topicspider.config import ConfigError, get_int, off_by_design
from topicspider.reactor_tools import to_thread
from topicspider.signals import CACHED, FETCHED_AT_META, REPLAYED

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

NOT_ARCHIVED = "not in the WARC archive"  # an IgnoreRequest's message starts so (ledger.REFUSALS)
# The archived body is whole and de-chunked: these would describe other bytes.
WIRE_HEADERS = frozenset({"transfer-encoding", "content-length"})
FLAGS = [CACHED, REPLAYED]


def check_replay_dir(path: str) -> None:
    """Raise :class:`ConfigError` unless ``path`` holds an archive's ``index.jsonl``."""
    index = Path(path) / "index.jsonl"
    if not index.is_file():
        raise ConfigError(f"WARC_REPLAY_DIR {path!r}: no index.jsonl there (a WARC_DIR a crawl archived into)")


class WarcReplayMiddleware:
    def __init__(self, crawler: Crawler, directory: Path) -> None:
        self.crawler = crawler
        self.directory = directory
        maxsize = get_int(crawler.settings, "DOWNLOAD_MAXSIZE")
        self.max_bytes = min(maxsize, READ_MAX_BYTES) if maxsize > 0 else READ_MAX_BYTES
        self._index: ReplayIndex | None = None
        self.logged_unreadable = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcReplayMiddleware:
        directory = crawler.settings.get("WARC_REPLAY_DIR") or ""
        if not directory:
            raise off_by_design(__name__, "WARC_REPLAY_DIR is not set")
        check_replay_dir(directory)  # done at start already, unless run without preflight
        return cls(crawler, Path(directory))

    async def index(self) -> ReplayIndex:
        """The archive's index, read on a thread the first time it is asked for."""
        if self._index is None:
            index = await to_thread(ReplayIndex.load, self.directory)
            if self._index is None:  # two early callers each read it: the first one's stays
                self._index = index
                logger.info("Replaying %d archived responses from %s", len(index), self.directory)
        return self._index

    async def process_request(self, request: Request) -> Response:
        entry = (await self.index()).responses.get(request.url)
        stats = self.crawler.stats
        assert stats is not None
        if entry is None:
            stats.inc_value("replay/not_archived")
            raise IgnoreRequest(f"{NOT_ARCHIVED}: {request.url}")
        try:
            archived = await to_thread(partial(read_archived, decoded=False), self.directory, entry, self.max_bytes)
            response = _response(request, archived)
        except ArchiveError as exc:
            stats.inc_value("replay/unreadable")
            if not self.logged_unreadable:
                self.logged_unreadable = True
                logger.error("An archived response could not be read (further ones are only counted, "
                             "replay/unreadable): %s", exc)
            raise
        request.meta[FETCHED_AT_META] = _fetched_at(entry.date)
        stats.inc_value("replay/responses")
        self.crawler.signals.send_catch_log(signals.response_downloaded, response=response, request=request,
                                            spider=self.crawler.spider)
        return response


def _response(request: Request, archived: ArchivedResponse) -> Response:
    try:
        headers = Headers([(name, value) for name, value in archived.headers if name.lower() not in WIRE_HEADERS])
    except (UnicodeError, ValueError) as exc:
        raise ArchiveError(f"{request.url}: archived headers Scrapy cannot hold: {exc}") from exc
    response_class = responsetypes.from_args(headers=headers, url=request.url, body=archived.body)
    return response_class(url=request.url, status=archived.status, headers=headers, body=archived.body,
                          request=request, flags=list(FLAGS))


def _fetched_at(date: str) -> str | None:
    """A WARC-Date (``2026-12-03T15:10:02Z``) as pages' ``fetched_at`` is written."""
    try:
        return datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).isoformat(timespec="seconds")
    except ValueError:
        return None

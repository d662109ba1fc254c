"""The seeds' fetch log, with the topic score: one line per downloaded URL,
``timestamp<TAB>url<TAB>status<TAB>depth<TAB>relevance<TAB>terms``.

Enabled by ``topicspider.extensions.crawllog.CrawlLog`` in ``EXTENSIONS``; writes to
``CRAWL_LOG`` (appending; an empty value turns it off). Redirect hops and robots.txt
fetches are downloads too and get their own lines; ``depth`` is ``-`` for the latter.
``relevance`` is the page's topic score, ``-`` when nothing was scored (no topic, an
error status, a redirect); ``terms`` the terms that weighed most in it
(``TOPIC_EXPLAIN_TERMS``), as ``term contribution, ...``, or ``-``. A page's line is
written once the spider has read it, so
that irrelevant pages, which are not stored, still show their score here; the line of
a page that never reaches the spider (a meta refresh) is written when the request it
turned into is scheduled, else at the end.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING

from scrapy import signals

from topicspider.config import off_by_design
from topicspider.signals import page_scored

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from topicspider.topic.score import Relevance

# Lines waiting for their page's score beyond this many are written without it.
MAX_PENDING = 10_000


class CrawlLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self.file: IO[str] | None = None
        # The download's request -> (its URL, the fields of its line), waiting for a score.
        self.pending: OrderedDict[Request, tuple[str, str]] = OrderedDict()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlLog:
        path = crawler.settings.get("CRAWL_LOG") or ""
        if not path:
            raise off_by_design(__name__, "CRAWL_LOG is empty")
        extension = cls(path)
        crawler.signals.connect(extension.open, signal=signals.spider_opened)
        crawler.signals.connect(extension.close, signal=signals.spider_closed)
        crawler.signals.connect(extension.log_response, signal=signals.response_downloaded)
        crawler.signals.connect(extension.log_score, signal=page_scored)
        crawler.signals.connect(extension.request_scheduled, signal=signals.request_scheduled)
        return extension

    def open(self) -> None:
        self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def log_response(self, response: Response, request: Request) -> None:
        timestamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        depth = request.meta.get("depth")
        fields = f"{timestamp}\t{response.url}\t{response.status}\t{'-' if depth is None else depth}"
        if depth is not None and 200 <= response.status < 300:
            # A page for the spider: its line waits for its score.
            self._flush_pending(MAX_PENDING - 1)
            self.pending[request] = (response.url, fields)
        else:
            self._write(fields, None)

    def log_score(self, response: Response, relevance: Relevance | None) -> None:
        entry = self.pending.pop(response.request, None) if response.request is not None else None
        if entry is not None:
            self._write(entry[1], relevance)

    def request_scheduled(self, request: Request) -> None:
        redirected = request.meta.get("redirect_urls")
        if not redirected or not self.pending:
            return
        # A 2xx page a middleware turned into a new request (a meta refresh): the spider
        # will never score it.
        for old_request, (url, fields) in list(self.pending.items()):
            if url == redirected[-1]:
                del self.pending[old_request]
                self._write(fields, None)

    def _flush_pending(self, keep: int) -> None:
        while len(self.pending) > keep:
            _, (_, fields) = self.pending.popitem(last=False)
            self._write(fields, None)

    def _write(self, fields: str, relevance: Relevance | None) -> None:
        if self.file is not None:
            score = "-" if relevance is None else f"{relevance.score:.4f}"
            terms = (relevance.explain() if relevance is not None else "") or "-"
            self.file.write(f"{fields}\t{score}\t{' '.join(terms.split())}\n")

    def close(self) -> None:
        self._flush_pending(0)
        if self.file is not None:
            self.file.close()
            self.file = None

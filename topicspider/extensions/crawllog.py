"""The seeds' fetch log: one line per downloaded URL, ``timestamp<TAB>url<TAB>status<TAB>depth``.

Enabled by ``topicspider.extensions.crawllog.CrawlLog`` in ``EXTENSIONS``; writes to
``CRAWL_LOG`` (appending; an empty value turns it off). Redirect hops and robots.txt
fetches are downloads too and get their own lines; ``depth`` is ``-`` for the latter.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class CrawlLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self.file: IO[str] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlLog:
        path = crawler.settings.get("CRAWL_LOG") or ""
        if not path:
            raise NotConfigured("CRAWL_LOG is empty")
        extension = cls(path)
        crawler.signals.connect(extension.open, signal=signals.spider_opened)
        crawler.signals.connect(extension.close, signal=signals.spider_closed)
        crawler.signals.connect(extension.log_response, signal=signals.response_downloaded)
        return extension

    def open(self) -> None:
        self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def log_response(self, response: Response, request: Request) -> None:
        if self.file is None:
            return
        timestamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        depth = request.meta.get("depth", "-")
        self.file.write(f"{timestamp}\t{response.url}\t{response.status}\t{depth}\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

"""Requests to a quarantined site are not fetched: its pages kept killing or hanging the
page-analysis processes (:mod:`topicspider.pagepool`, ``PAGE_SITE_MAX_LOST``), so that
the rest of its queue costs neither downloads nor workers, as Nutch's fetcher gives up
a host's queue after ``fetcher.max.exceptions.per.queue``.

Enabled by ``topicspider.middlewares.quarantine.QuarantineMiddleware`` in
``DOWNLOADER_MIDDLEWARES``, with ``PAGE_SITE_MAX_LOST`` above 0 (the default, 3). A
site is the seed's (``meta["site"]``); its requests end as errors (``site quarantined``
in the ledger); with a ``JOBDIR`` they stay waiting in its durable frontier, for a
resume to try them again. In distributed mode each worker quarantines for itself, and
the site's requests it leases end so for the whole cluster. Stats:
``quarantine/dropped``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest, NotConfigured

from topicspider.config import get_int
from topicspider.pagepool import QUARANTINED
from topicspider.signals import RESUME_LATER_META, site_quarantined

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class QuarantineMiddleware:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.sites: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> QuarantineMiddleware:
        if not get_int(crawler.settings, "PAGE_SITE_MAX_LOST"):
            raise NotConfigured  # off by choice: nothing to say at start
        assert crawler.stats is not None
        middleware = cls(crawler.stats)
        crawler.signals.connect(middleware.quarantine, signal=site_quarantined)
        return middleware

    def quarantine(self, site: str) -> None:
        self.sites.add(site)

    def process_request(self, request: Request) -> None:
        if request.meta.get("site") in self.sites and "depth" in request.meta:
            self.stats.inc_value("quarantine/dropped")
            request.meta[RESUME_LATER_META] = QUARANTINED
            raise IgnoreRequest(f"{QUARANTINED}: {request.meta['site']}")

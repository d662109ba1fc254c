"""A budget of pages per site: once a site's crawl has asked for ``SITE_MAX_PAGES``
URLs, its other requests are dropped, as Nutch's ``generate.max.count`` and Heritrix's
quotas cap a host.

Enabled by ``SITE_MAX_PAGES`` (0, the default, turns it off) with
``topicspider.middlewares.budget.SiteBudgetMiddleware`` in ``DOWNLOADER_MIDDLEWARES``,
before the pages sampled for the background are served, so that those count too. A
site is the seed's (``meta["site"]``); its budget counts distinct URLs asked for (by
fingerprint: a retry is the same URL, a redirect target another), seeds, redirects and
pages that fail to download included; robots.txt, training samples and background
pages are left out, and so are requests refused further on (robots.txt, another site,
a trap), which free their place. A request past the budget ends in the ledger as
dropped ``site_budget``. In distributed mode each worker keeps its own count, and a
resumed ``JOBDIR`` crawl starts counting again. Stats: ``budget/sites_exhausted``,
``budget/dropped``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from topicspider.config import get_int, off_by_design

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)
REFUSAL = "site budget reached"  # what the ledger reads (topicspider.ledger.REFUSALS)


class SiteBudgetMiddleware:
    def __init__(self, crawler: Crawler, budget: int) -> None:
        assert crawler.stats is not None and crawler.request_fingerprinter is not None
        self.stats = crawler.stats
        self.fingerprint = crawler.request_fingerprinter.fingerprint
        self.budget = budget
        self.asked: dict[str, set[bytes]] = {}  # site -> URLs asked for, up to the budget
        self.exhausted: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SiteBudgetMiddleware:
        budget = get_int(crawler.settings, "SITE_MAX_PAGES")
        if not budget:
            raise off_by_design(__name__, "SITE_MAX_PAGES is 0")
        return cls(crawler, budget)

    def process_request(self, request: Request) -> None:
        site = request.meta.get("site")
        if site is None or "depth" not in request.meta:
            return  # robots.txt, a training sample or a background page
        asked = self.asked.setdefault(site, set())
        fingerprint = self.fingerprint(request)
        if fingerprint in asked:
            return
        if len(asked) < self.budget:
            asked.add(fingerprint)
            return
        self.stats.inc_value("budget/dropped")
        if site not in self.exhausted:
            self.exhausted.add(site)
            self.stats.inc_value("budget/sites_exhausted")
            logger.info("Site %s has used its budget of %d pages (SITE_MAX_PAGES): its other URLs are dropped",
                        site, self.budget)
        raise IgnoreRequest(f"{REFUSAL} ({self.budget} pages): {request.url}")

    def process_exception(self, request: Request, exception: Exception) -> None:
        # Refused further on (robots.txt, another site, a trap): not asked for after all.
        if isinstance(exception, IgnoreRequest) and "depth" in request.meta:
            self.asked.get(request.meta.get("site"), set()).discard(self.fingerprint(request))

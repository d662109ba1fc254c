"""Duplicate-request filter on canonical-URL fingerprints.

Enabled by ``DUPEFILTER_CLASS = "topicspider.dupefilter.CanonicalDupeFilter"``, with
``REQUEST_FINGERPRINTER_CLASS`` set to :mod:`topicspider.fingerprint`. Stats:
``dupefilter/filtered`` (Scrapy's).
"""

from __future__ import annotations

from scrapy import Request
from scrapy.dupefilters import RFPDupeFilter


class CanonicalDupeFilter(RFPDupeFilter):
    def request_seen(self, request: Request) -> bool:
        if self._redirect_within_identity(request):
            return False
        return super().request_seen(request)

    def _redirect_within_identity(self, request: Request) -> bool:
        # A server answering /a with a redirect to /a/ hands back the URL we just asked
        # for, under the canonical form; filtering it would lose the page.
        previous = request.meta.get("redirect_urls")
        if not previous:
            return False
        origin = Request(previous[-1], method=request.method, body=request.body)
        return self.fingerprinter.fingerprint(origin) == self.fingerprinter.fingerprint(request)

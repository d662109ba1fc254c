"""Scrapy's ``RedirectMiddleware``, with redirect loops as errors.

Enabled in place of Scrapy's (``DOWNLOADER_MIDDLEWARES``). topicspider's frontier lets
a redirect to the URL just asked for (under its canonical form) past the dupefilter, so
a page redirecting to itself was asked for until ``REDIRECT_MAX_TIMES`` ran out (21
times) and then dropped as ignored, and the dupefilter dropped a return to an earlier
URL of the chain as a duplicate. Here a redirect that goes round, back to a URL the
chain already asked for (by fingerprint), fails the request with :class:`RedirectLoop`,
counted in ``fetch/errors/RedirectLoop``; one redirect to the very URL just asked for (a
server answering ``/a`` with ``/a/``, or setting a cookie) is still followed. The same
check serves meta refreshes (:mod:`topicspider.middlewares.metarefresh`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class RedirectLoop(IgnoreRequest):
    """A redirect back to a URL its chain already asked for: the request is given up, as
    an error, not a refusal by policy (the spider counts it in ``fetch/errors/``)."""


def goes_round(chain: Sequence[bytes], target: bytes) -> bool:
    """Whether a redirect to ``target`` after ``chain`` (the fingerprints of the URLs asked
    for, in order, the last the one redirected) returns to the chain: to any URL of it,
    but once to the very last one."""
    seen = chain.count(target)
    return seen > 1 or (seen == 1 and chain[-1] != target)


class RedirectLoopCheck:
    """For a subclass of Scrapy's ``BaseRedirectMiddleware``: ``_redirect``, through
    which every redirect it follows goes, raises :class:`RedirectLoop` for one that goes
    round."""

    crawler: Crawler

    def _redirect(self, redirected: Request, request: Request, reason: Any) -> Request:
        assert self.crawler.request_fingerprinter is not None
        fingerprint = self.crawler.request_fingerprinter.fingerprint
        urls = [*request.meta.get("redirect_urls", ()), request.url]
        chain = [fingerprint(Request(url, method=request.method, body=request.body)) for url in urls[:-1]]
        if goes_round([*chain, fingerprint(request)], fingerprint(redirected)):
            raise RedirectLoop(f"redirect loop ({' -> '.join([*urls, redirected.url])})")
        return super()._redirect(redirected, request, reason)  # type: ignore[misc,no-any-return]


class LoopSafeRedirectMiddleware(RedirectLoopCheck, RedirectMiddleware):
    pass

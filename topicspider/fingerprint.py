"""Request fingerprints from canonical URLs: the MD5 digest of the URL's identity.

Enabled by ``REQUEST_FINGERPRINTER_CLASS = "topicspider.fingerprint.CanonicalURLFingerprinter"``.
Honours ``URL_STRIP_TRAILING_SLASH``, so ``/a/`` and ``/a`` are one request.
"""

from __future__ import annotations

from hashlib import md5
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from topicspider.config import get_bool
from topicspider.urls import BadURL, canonical_url

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def _identity_md5(identity: str) -> Any:
    return md5(identity.encode("utf-8"), usedforsecurity=False)


def identity_digest(identity: str) -> bytes:
    """The fingerprint of a GET of a URL already in its canonical form (a stored page's URL)."""
    return _identity_md5(identity).digest()


def url_fingerprint(url: str, method: str = "GET", body: bytes = b"", *, strip_trailing_slash: bool = True) -> bytes:
    """The 16-byte MD5 digest of the canonical URL; method and body count unless GET."""
    try:
        identity = canonical_url(url, strip_trailing_slash)
    except BadURL:
        identity = url
    digest = _identity_md5(identity)
    if method != "GET" or body:
        digest.update(b"\0" + method.encode("ascii") + b"\0" + body)
    return digest.digest()


class CanonicalURLFingerprinter:
    def __init__(self, strip_trailing_slash: bool) -> None:
        self.strip_trailing_slash = strip_trailing_slash
        self._cache: WeakKeyDictionary[Request, bytes] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CanonicalURLFingerprinter:
        return cls(get_bool(crawler.settings, "URL_STRIP_TRAILING_SLASH"))

    def fingerprint(self, request: Request) -> bytes:
        cached = self._cache.get(request)
        if cached is None:
            cached = url_fingerprint(
                request.url, request.method, request.body,
                strip_trailing_slash=self.strip_trailing_slash,
            )
            self._cache[request] = cached
        return cached

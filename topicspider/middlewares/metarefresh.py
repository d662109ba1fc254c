"""Scrapy's ``MetaRefreshMiddleware``, made safe against refresh loops.

Enabled in place of Scrapy's (``DOWNLOADER_MIDDLEWARES``). A refresh that goes round
(:func:`topicspider.middlewares.redirect.goes_round`: a page refreshing to itself, after
the one time it is followed) is not followed: the page is kept as it is, counted in
``redirect/refresh_loops``. A malformed ``<base href>`` (``http://[oops``) or refresh
URL no longer loses the page: w3lib 2.6 (``requirements.txt``) ignores such a base, as
browsers do, and reads such a refresh as none.

Most pages hold no refresh, and Scrapy's search for one decodes the whole body and runs
three regular expressions over its start on the reactor thread (38 µs for a page of 8
kB, a fiftieth of all the reactor does for it): a page whose start cannot spell a
refresh (:func:`may_refresh`) skips it.
"""

from __future__ import annotations

import codecs
import logging
import re
from functools import cache
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import HtmlResponse, Request, Response

from topicspider.middlewares.redirect import RedirectLoop, RedirectLoopCheck

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# Scrapy looks for a refresh in the first 4096 characters of a page's text: 16 bytes a
# character is more than any encoding takes but for escapes repeated to no purpose.
REFRESH_WINDOW_BYTES = 4096 * 16
# w3lib replaces character references before it looks, so that &#114;efresh is a
# refresh too: a reference to a letter of the word, in either case (the bytes are
# lower-cased first, hexadecimal digits with them).
_LETTER_REFERENCE = re.compile(rb"&#(?:x0*(?:72|65|66|73|68|52|45|46|53|48)(?![0-9a-f])"
                               rb"|0*(?:114|101|102|115|104|82|69|70|83|72)(?!\d))")
_ASCII_SPELLINGS = "refresh&#0123456789abcdefx;"


def may_refresh(body: bytes, encoding: str) -> bool:
    """Whether the start of ``body`` may hold a meta refresh: False only when it is
    in an encoding that writes ASCII as ASCII and spells the word neither in any case
    nor with a character reference to one of its letters."""
    if not _writes_ascii_as_ascii(encoding):
        return True
    # The search w3lib hands over to skips NUL characters (r\0efresh is a refresh), and
    # so reads a UTF-16 page taken for a single-byte one, or with a BOM that Scrapy
    # decodes it by whatever the encoding says.
    start = body[:REFRESH_WINDOW_BYTES].replace(b"\0", b"").lower()
    return b"refresh" in start or _LETTER_REFERENCE.search(start) is not None


@cache
def _writes_ascii_as_ascii(encoding: str) -> bool:
    try:
        if codecs.lookup(encoding).name == "utf-7":  # which may also write ASCII in base64
            return False
        return _ASCII_SPELLINGS.encode(encoding) == _ASCII_SPELLINGS.encode("ascii")
    except (LookupError, UnicodeError):
        return False


class SafeMetaRefreshMiddleware(RedirectLoopCheck, MetaRefreshMiddleware):
    stats: StatsCollector

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SafeMetaRefreshMiddleware:
        middleware = super().from_crawler(crawler)
        middleware.stats = crawler.stats
        return middleware

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if isinstance(response, HtmlResponse) and not may_refresh(response.body, response.encoding):
            return response
        try:
            return super().process_response(request, response)
        except RedirectLoop as exc:
            self.stats.inc_value("redirect/refresh_loops")
            logger.debug("Meta refresh of %s not followed: %s", response.url, exc)
            return response

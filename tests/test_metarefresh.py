"""SafeMetaRefreshMiddleware in-process, on real responses: the refreshes Scrapy's own
middleware follows are followed, whether or not the cheap look at the body ran."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.test import get_crawler

from topicspider.middlewares.metarefresh import REFRESH_WINDOW_BYTES, SafeMetaRefreshMiddleware, may_refresh

URL = "http://a.cn/p.html"


def respond(head: str, encoding: str = "utf-8", body: str = "正文") -> tuple[Request, Response]:
    request = Request(URL)
    html = f"<html><head>{head}<title>Page</title></head><body>{body}</body></html>"
    return request, HtmlResponse(URL, body=html.encode(encoding), encoding=encoding, request=request)


@pytest.fixture
def middleware() -> SafeMetaRefreshMiddleware:
    return SafeMetaRefreshMiddleware.from_crawler(get_crawler(settings_dict={}))


@pytest.mark.parametrize(("head", "encoding"), [
    ('<meta http-equiv="refresh" content="0; url=/x">', "utf-8"),
    ('<META HTTP-EQUIV="Refresh" CONTENT="0; URL=/x">', "gb18030"),
    ('<meta http-equiv="&#114;efresh" content="0; url=/x">', "utf-8"),  # w3lib reads the reference
    ('<meta http-equiv="re&#x66;resh" content="0; url=/x">', "big5"),
    ('<meta http-equiv="&#82;EFRESH" content="0; url=/x">', "utf-8"),
    ('<meta http-equiv="&#X00052;efresh" content="0; url=/x">', "utf-8"),
    ('<meta http-equiv="&#0114efresh" content="0; url=/x">', "utf-8"),  # no semicolon
    ('<meta http-equiv="refresh" content="0; url=/x">', "utf-16"),  # no ASCII bytes to look for
    ('<meta http-equiv="refresh" content="0; url=/x">', "utf-32"),
])
def test_a_refresh_is_followed_however_it_is_spelt_or_encoded(middleware, head: str, encoding: str) -> None:
    request, response = respond(head, encoding)

    followed = middleware.process_response(request, response)

    assert isinstance(followed, Request) and followed.url == "http://a.cn/x"
    assert may_refresh(response.body, response.encoding)


def test_a_page_without_a_refresh_is_returned_as_it_came(middleware) -> None:
    request, response = respond('<meta charset="utf-8">', body="刷新 it&#x27;s&#160;&#1140; &#x720; " * 100)

    assert middleware.process_response(request, response) is response
    assert not may_refresh(response.body, response.encoding), "no need to decode and search it"


def test_only_the_start_scrapy_reads_is_looked_at() -> None:
    late = b"<html><body>" + b"x" * REFRESH_WINDOW_BYTES + b'<meta http-equiv="refresh" content="0; url=/x">'
    assert not may_refresh(late, "utf-8")
    assert may_refresh(late, "utf-16"), "an encoding that does not write ASCII as ASCII is searched as Scrapy does"


@pytest.mark.parametrize("body", [
    '<html><head><meta http-equiv="r\0efresh" content="0; url=/x"></head></html>'.encode(),
    '<html><head><meta http-equiv="&#11\x004;efresh" content="0; url=/x"></head></html>'.encode(),
    # UTF-16 with no BOM, taken for a single-byte encoding: a NUL after every letter.
    '<html><head><meta http-equiv="refresh" content="0; url=/x"></head></html>'.encode("utf-16-le"),
])
def test_a_refresh_spelt_with_nul_characters_is_followed_as_scrapy_reads_it(middleware, body: bytes) -> None:
    request = Request(URL)
    response = HtmlResponse(URL, body=body, encoding="cp1252", request=request)

    followed = middleware.process_response(request, response)

    assert isinstance(followed, Request) and followed.url == "http://a.cn/x"

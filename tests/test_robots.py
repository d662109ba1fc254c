"""Robots rules as pure functions: tokens, robots.txt delays, directives, Retry-After."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from lxml.html import document_fromstring
from protego import Protego

from topicspider.robots import (
    header_directives,
    meta_directives,
    parse_directives,
    retry_after_seconds,
    robots_token,
    robots_txt_delay,
)


@pytest.mark.parametrize(("user_agent", "token"), [
    ("topicspider/0.1.0 (+https://example.org)", "topicspider"),
    ("MyBot/2.0", "mybot"), ("  plain", "plain"), ("Mozilla/5.0 (compatible; x)", "mozilla"),
])
def test_robots_token(user_agent: str, token: str) -> None:
    assert robots_token(user_agent) == token


@pytest.mark.parametrize(("robots_txt", "delay"), [
    ("User-agent: *\nCrawl-delay: 3\n", 3.0),
    ("User-agent: topicspider\nRequest-rate: 1/5\n", 5.0),
    ("User-agent: topicspider\nRequest-rate: 10/5\nCrawl-delay: 2\n", 2.0),
    ("User-agent: otherbot\nCrawl-delay: 9\n", 0.0),
    ("", 0.0),
    ("User-agent: *\nCrawl-delay: soon\n", 0.0),
])
def test_robots_txt_delay(robots_txt: str, delay: float) -> None:
    assert robots_txt_delay(Protego.parse(robots_txt), "topicspider") == delay


@pytest.mark.parametrize(("content", "directives"), [
    ("noindex", {"noindex"}), ("NOFOLLOW", {"nofollow"}), (" noindex ,  nofollow ", {"noindex", "nofollow"}),
    ("none", {"noindex", "nofollow"}), ("all", set()), ("index, follow", set()), ("noarchive", set()), ("", set()),
])
def test_parse_directives(content: str, directives: set[str]) -> None:
    assert parse_directives(content) == directives


def test_meta_directives_for_us_and_for_all_robots() -> None:
    root = document_fromstring("""<html><head>
        <meta name=" ROBOTS " content="NoIndex"><meta name="TopicSpider" content="nofollow">
        <meta name="googlebot" content="none"><meta content="none"></head><body></body></html>""")
    assert meta_directives(root, "topicspider") == {"noindex", "nofollow"}
    assert meta_directives(root, "otherbot") == {"noindex"}


@pytest.mark.parametrize(("values", "directives"), [
    (["noindex"], {"noindex"}),
    (["noindex, nofollow"], {"noindex", "nofollow"}),
    (["topicspider: nofollow"], {"nofollow"}),
    (["googlebot: noindex", "noarchive"], set()),
    (["TOPICSPIDER: none"], {"noindex", "nofollow"}),
    (["unavailable_after: 25 Jun 2010 15:00:00 PST"], set()),
])
def test_header_directives(values: list[str], directives: set[str]) -> None:
    assert header_directives(values, "topicspider") == directives


def test_retry_after() -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("120", now) == 120
    assert retry_after_seconds("Mon, 30 Nov 2026 12:01:30 GMT", now) == 90
    assert retry_after_seconds("Mon, 30 Nov 2026 11:00:00 GMT", now) == 0
    assert retry_after_seconds("later", now) is None
    assert retry_after_seconds("-5", now) is None


@pytest.mark.parametrize(("values", "directives"), [
    (["max-image-preview:large, noindex"], {"noindex"}),
    (["unavailable_after: 2020-01-01, noindex"], {"noindex"}),
    (["noindex,unavailable_after:2020-01-01"], {"noindex"}),
    (["max-snippet:-1,nofollow"], {"nofollow"}),
])
def test_header_directives_with_parameters(values: list[str], directives: set[str]) -> None:
    assert header_directives(values, "topicspider") == directives

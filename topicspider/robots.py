"""Robots rules with no Scrapy dependency: the crawler's robots token, the delay a
robots.txt asks for, page-level directives (``<meta name="robots">``, ``X-Robots-Tag``)
and ``Retry-After`` values."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from lxml.html import HtmlElement
from protego import Protego

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

NOINDEX, NOFOLLOW = "noindex", "nofollow"
_EXPANSIONS = {"none": {NOINDEX, NOFOLLOW}, NOINDEX: {NOINDEX}, NOFOLLOW: {NOFOLLOW}}
# Directives written "name: value", which a user-agent prefix must not be mistaken for.
PARAMETER_DIRECTIVES = frozenset({"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"})
_PRODUCT = re.compile(r"\s*([A-Za-z0-9._-]+)")


def robots_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched on: ``topicspider`` in
    ``topicspider/0.1 (+https://...)``, lower-cased."""
    match = _PRODUCT.match(user_agent)
    return match.group(1).lower() if match else user_agent.strip().lower()


def robots_txt_delay(parser: Protego, token: str) -> float:
    """The seconds between requests a robots.txt asks of ``token``: the larger of its
    ``Crawl-delay`` and the interval its ``Request-rate`` implies; 0 if neither."""
    delay = parser.crawl_delay(token) or 0.0
    rate = parser.request_rate(token)
    if rate is not None and rate.requests > 0:
        delay = max(delay, rate.seconds / rate.requests)
    return float(delay)


def parse_directives(value: str) -> set[str]:
    """``noindex``/``nofollow`` named by a robots meta ``content``: ``none`` is both,
    unknown words (``all``, ``noarchive``) add nothing. Case and spacing are free."""
    directives: set[str] = set()
    for word in re.split(r"[\s,;:]+", value.lower()):
        directives |= _EXPANSIONS.get(word, set())
    return directives


def meta_directives(root: HtmlElement, token: str) -> set[str]:
    """Directives of ``<meta name="robots">`` and ``<meta name="TOKEN">``, any case."""
    directives: set[str] = set()
    for meta in root.iter("meta"):
        name = (meta.get("name") or "").strip().lower()
        if name in ("robots", token):
            directives |= parse_directives(meta.get("content") or "")
    return directives


def header_directives(values: Iterable[str], token: str) -> set[str]:
    """Directives of ``X-Robots-Tag`` header values. A value may start with a user
    agent (``googlebot: noindex``); those for other agents are ignored."""
    directives: set[str] = set()
    for value in values:
        first = value.split(",", 1)[0]
        agent, sep, rest = first.partition(":")
        agent = agent.strip().lower()
        if sep and agent and " " not in agent and agent not in _EXPANSIONS and agent not in PARAMETER_DIRECTIVES:
            if agent != token:
                continue
            value = value.partition(":")[2]
        directives |= parse_directives(value)
    return directives


def retry_after_seconds(value: str, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date), or
    None when it is neither."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def token_from_settings(settings: BaseSettings) -> str:
    """The robots token of a crawl: ``ROBOTSTXT_USER_AGENT``, else ``USER_AGENT``'s name."""
    return robots_token(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "")

"""The crawl's ledger of URLs: each discovered URL ends in exactly one state, and they add up.

Kept by :class:`topicspider.scheduler.FrontierScheduler` (in distributed mode, for every
worker at once, in Redis: :mod:`topicspider.cluster.frontier`), written to the stats at
close as ``ledger/<entry>``, and printed in the crawl report:

    queued + not queued (this run's) + queued before (a resumed job's waiting URLs)
        = done + error (by reason) + dropped (by reason) + still waiting

*queued*: URLs the crawl requested (seeds, followed links, redirect targets);
*not queued*: the other web URLs found as links, once each
(:mod:`topicspider.discovery`), dropped as ``offsite``, ``too_deep``, ``nofollow``
(``rel="nofollow"``), ``not_a_page`` (a file by its extension), ``trap`` (see
:func:`topicspider.urls.trap_reason`) or ``filter`` (the user's rules, ``URL_FILTER_FILE``);
*done*: fetched and handled (stored, or a redirect, a ``noindex`` page, or, with no
topic, a page that is not HTML);
*error*: failed for good (``http_404``, ``TimeoutError``, ``robots_unreachable``,
``page_analysis_lost``, ``site_quarantined``...);
*dropped*, once queued: refused by policy (``robots``, ``offsite`` for a redirect to
another site, ``filter`` for a blocked pattern), or fetched and not kept
(``irrelevant``: off the topic, a page that is not HTML included when there is a
topic; ``duplicate``: its text an earlier page's, stored as that page's alias). Still
waiting is 0 when the crawl finished. A run killed prints no ledger.
Links of pages whose links are not followed (off the topic, ``nofollow`` pages,
duplicates of a page whose links were followed) are not read, so not discovered; the spider counts those pages
(``topic/links_not_followed``, ``robots/meta_nofollow``, ``duplicates/exact``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PREFIX = "ledger/"
QUEUED, RESTORED, DONE, WAITING = "queued", "restored", "done", "waiting"
NOT_QUEUED = "not_queued"
IRRELEVANT = "irrelevant"  # a fetched page's reason to be dropped (signals.DROPPED_META)
DUPLICATE = "duplicate"  # its text is a page's stored before: it is stored as an alias
ERROR, DROPPED = "error/", "dropped/"
# Policy refusals (IgnoreRequest messages) by what they say first.
REFUSALS = (
    ("Forbidden by robots.txt", "robots"),
    ("Crawl-delay too long", "robots"),
    ("redirect to another site", "offsite"),
    ("redirect to a trap", "trap"),
    ("redirect refused by URL_FILTER_FILE", "filter"),
    ("site budget reached", "site_budget"),
    ("blocked by pattern", "filter"),
    ("not in the WARC archive", "not_archived"),  # middlewares.replay.NOT_ARCHIVED
)
IGNORED_PREFIX = "ignored: "
MAX_REASON_CHARS = 40


def outcome_of(failure: str | None, dropped: str | None = None) -> str:
    """A finished URL's ledger entry, from the reason its fetch failed for good (the
    ``fetch_failed`` signal's ``reason``), or None if it did not, and the reason its page
    was not kept (``DROPPED_META``), or None if it was."""
    if failure is None:
        return DROPPED + dropped if dropped else DONE
    if failure.startswith(IGNORED_PREFIX):
        message = failure[len(IGNORED_PREFIX):]
        reason = next((name for start, name in REFUSALS if message.startswith(start)), "ignored")
        return DROPPED + reason
    name = failure.split(":", 1)[0].strip()
    return ERROR + (_slug(name) or "unknown")


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")[:MAX_REASON_CHARS] if " " in text else text[:MAX_REASON_CHARS]


def ledger_of(stats: Mapping[str, Any]) -> dict[str, int]:
    """The ``ledger/`` stats, without their prefix; empty when no ledger was kept."""
    return {key[len(PREFIX):]: int(value) for key, value in stats.items() if key.startswith(PREFIX)}


def imbalance(ledger: Mapping[str, int]) -> int:
    """Queued URLs not accounted for by a state (0 when the ledger adds up)."""
    queued = ledger.get(QUEUED, 0) + ledger.get(NOT_QUEUED, 0) + ledger.get(RESTORED, 0)
    ended = sum(count for key, count in ledger.items() if key not in (QUEUED, NOT_QUEUED, RESTORED))
    return queued - ended


def ledger_line(ledger: Mapping[str, int]) -> str:
    """``1200 discovered (1000 queued, 200 not) = 990 done + 6 error (http_404 5, TimeoutError 1)
    + 204 dropped (offsite 150, too_deep 50, robots 4) + 0 waiting``."""
    found = ledger.get(QUEUED, 0) + ledger.get(NOT_QUEUED, 0)
    queued = f"{found} discovered ({ledger.get(QUEUED, 0)} queued, {ledger.get(NOT_QUEUED, 0)} not)"
    if ledger.get(RESTORED):
        queued += f" + {ledger[RESTORED]} queued before"
    parts = [f"{ledger.get(DONE, 0)} done"]
    for prefix, label in ((ERROR, "error"), (DROPPED, "dropped")):
        reasons = sorted(((key[len(prefix):], count) for key, count in ledger.items() if key.startswith(prefix)),
                         key=lambda pair: (-pair[1], pair[0]))
        total = sum(count for _, count in reasons)
        detail = f" ({', '.join(f'{reason} {count}' for reason, count in reasons)})" if reasons else ""
        parts.append(f"{total} {label}{detail}")
    parts.append(f"{ledger.get(WAITING, 0)} waiting")
    line = f"{queued} = {' + '.join(parts)}"
    if missing := imbalance(ledger):
        line += f"  (DOES NOT ADD UP: {missing} unaccounted for)"
    return line

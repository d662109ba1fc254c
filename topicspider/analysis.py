"""Everything the spider reads from one HTML page, as one pure function.

:func:`analyse_page` parses the page, extracts its title, text and e-mails, reads its
robots directives, scores it against the topic and lists the links to follow, with no
Scrapy object in or out: its input and output are small picklable values, so it runs
as well in a page-analysis process (:mod:`topicspider.pagepool`) as on the reactor
thread, and can be unit-tested on its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter
from typing import NamedTuple

from w3lib.encoding import html_to_unicode

from topicspider.extract import (
    RawLink, base_url, extract_blocks, extract_emails, extract_links, extract_title, join_blocks, parse_html, truncate,
)
from topicspider.duplicates import DIGEST_MIN_CHARS, content_digest, simhash
from topicspider.fingerprint import identity_digest
from topicspider.robots import NOFOLLOW, NOINDEX, header_directives, meta_directives
from topicspider.search.terms import (
    INDEX_MAX_CHARS,
    SEARCH_SEGMENTER,
    IndexTerms,
    document_terms,
    document_text,
    terms_of_tokens,
)
from topicspider.search.terms import segmenter as search_segmenter
from topicspider.topic.score import PageTerms, PageTokens, Relevance, Topic, count_page_terms
from topicspider.topic.segment import Segmenter
from topicspider.urls import (
    URL_FILTER, BadURL, URLRules, canonical_url, non_page_reason, refusal, request_url, site_of, strip_session_ids,
)

TITLE_MAX_CHARS = 1000
# Best-first link priorities run from 0 to this; depth (DEPTH_PRIORITY) only breaks ties.
PRIORITY_SCALE = 1000
# Best-first scores the anchor texts of a page's first links only: a page of links
# must not hold a worker for long (the rest get their parent's share alone).
ANCHORS_SCORED_PER_PAGE = 500
# Why a page's link is not requested, in the crawl's ledger (topicspider.ledger).
NOT_A_PAGE, NOFOLLOW_LINK, OFFSITE, TOO_DEEP, TRAP = "not_a_page", "nofollow", "offsite", "too_deep", "trap"
FILTERED = "filter"  # refused by the user's rules (URL_FILTER_FILE), as a blocked pattern is
DROPPED_LINK_REASONS = (NOT_A_PAGE, NOFOLLOW_LINK, OFFSITE, TOO_DEEP, TRAP, FILTERED)


@dataclass(frozen=True, slots=True)
class PageRules:
    """What a crawl does with every page: fixed for the crawl, sent once to each worker."""

    strip_trailing_slash: bool = True
    url_rules: URLRules = URLRules()
    text_max_chars: int = 200_000
    email_max_chars: int = 1_000_000  # of the whole text, searched for addresses
    max_links: int = 1000  # links of a page read, in page order
    obey_meta_robots: bool = True
    obey_rel_nofollow: bool = True
    robots_token: str = "topicspider"
    max_depth: int = 3
    topic: Topic | None = None
    threshold: float = 0.6  # the topic's own, unless TOPIC_THRESHOLD says otherwise
    follow_all: bool = False
    best_first: bool = False
    search_index: bool = True  # work out the search index terms of pages that will be stored
    # ... as the one text SQLite's FTS5 index takes (search.index.indexes_text), which
    # then costs the crawler's own process nothing (a fifth of a millisecond a page).
    index_text: bool = False
    content_digest: bool = True  # DUPLICATE_CONTENT: the digest of pages that will be stored
    simhash: bool = True  # and their SimHash (DUPLICATE_NEAR_DISTANCE)
    store_all: bool = False  # TOPIC_STORE_ALL: irrelevant pages are stored too
    keep_blocks: bool = False  # return the page's blocks of text (background sampling)
    # Count the page's terms with it and at most so many characters (background sampling
    # for a trained topic: the counts are ready when the site's template is known).
    count_terms: tuple[Segmenter, int] | None = None

    def relevant(self, relevance: Relevance) -> bool:
        return relevance.score >= self.threshold


@dataclass(frozen=True, slots=True)
class Page:
    """One downloaded HTML page, as the analysis needs it."""

    url: str
    body: bytes
    encoding: str  # the response's, as Scrapy (and EncodingMiddleware) settled it
    site: str  # links to other sites are not followed
    depth: int
    robots_headers: tuple[str, ...] = ()  # X-Robots-Tag values


class Link(NamedTuple):
    """A same-site page link to request; ``priority`` only in best-first mode.
    ``fingerprint`` is its request's (:func:`topicspider.fingerprint.identity_digest` of
    its canonical URL), worked out here, off the reactor thread, so that a link to a URL
    the frontier knows costs the spider no request. A named tuple, not a dataclass: the
    crawler's process unpickles every link of every page, a quarter of the time."""

    url: str
    fingerprint: bytes
    priority: int | None = None


@dataclass(slots=True)
class PageAnalysis:
    title: str
    text: str  # cut at PageRules.text_max_chars
    emails: list[str]
    noindex: bool
    relevance: Relevance | None  # None without a topic
    relevant: bool | None
    links: list[Link]  # empty when the page's links are not followed
    # Stats increments ("links/insite", "extract/text_truncated"...), applied by the caller.
    counts: Counter[str] = field(default_factory=Counter)
    score_seconds: float = 0.0
    search_terms: IndexTerms | None = None  # None when the page will not be stored
    content_digest: bytes | None = None  # of a page that will be stored (duplicates.content_digest)
    simhash: int | None = None  # of a page that will be stored, if its text is long enough
    blocks: list[str] = field(default_factory=list)  # only with PageRules.keep_blocks
    terms: PageTerms | None = None  # only with PageRules.count_terms, for a page not too long
    # The web URLs among the page's links that will not be requested, once each, as
    # (fingerprint, reason) for the crawl's ledger (see DROPPED_LINK_REASONS).
    dropped: list[tuple[bytes, str]] = field(default_factory=list)


def load_dictionaries(rules: PageRules) -> None:
    """Load every dictionary pages are cut with under ``rules`` (about a second of CPU,
    holding the GIL): in a page-analysis process as it starts, or on a thread before the
    crawl when pages are read on the reactor thread."""
    if rules.topic is not None:
        rules.topic.segmenter.load()
    if rules.count_terms is not None:
        rules.count_terms[0].load()
    if rules.search_index:
        search_segmenter()


def analyse_page(page: Page, rules: PageRules) -> PageAnalysis:
    # What Scrapy's TextResponse.text does with the response's encoding.
    text = html_to_unicode(f"charset={page.encoding}", page.body)[1]
    root, too_deep = parse_html(text, page.url)
    counts: Counter[str] = Counter()
    counts["extract/deep_markup"] += too_deep
    directives = _robots_directives(root, page.robots_headers, rules)
    blocks = extract_blocks(root)
    full_text = join_blocks(blocks)
    body_text, text_cut = truncate(full_text, rules.text_max_chars)
    title, title_cut = truncate(extract_title(root), TITLE_MAX_CHARS)
    searched, search_cut = truncate(full_text, rules.email_max_chars)
    counts["extract/text_truncated"] += text_cut
    counts["extract/title_truncated"] += title_cut
    counts["extract/email_text_truncated"] += search_cut
    analysis = PageAnalysis(title, body_text, extract_emails(root, searched), NOINDEX in directives, None, None, [], counts)
    if rules.keep_blocks:
        analysis.blocks = blocks
    if rules.count_terms is not None:
        segmenter, max_chars = rules.count_terms
        analysis.terms = count_page_terms(segmenter, title, blocks, max_chars)
    tokens = None
    if rules.topic is not None:
        started = perf_counter()
        analysis.relevance, tokens = rules.topic.relevance_with_tokens(title, blocks, page.site)
        analysis.score_seconds = perf_counter() - started
        analysis.relevant = rules.relevant(analysis.relevance)
    if _stored(analysis, rules):
        if rules.search_index:
            terms = _index_terms(title, body_text, len(full_text), blocks, page.site, tokens, rules)
            analysis.search_terms = document_text(terms) if rules.index_text else dict(terms)
        if rules.content_digest and len(body_text) >= DIGEST_MIN_CHARS:
            analysis.content_digest = content_digest(title, body_text)
            analysis.simhash = simhash(body_text) if rules.simhash else None
    counts["robots/meta_noindex"] += analysis.noindex
    if NOFOLLOW in directives:
        counts["robots/meta_nofollow"] += 1
    elif page.depth > 0 and not rules.follow_all and analysis.relevant is False:
        counts["topic/links_not_followed"] += 1
    else:
        found = extract_links(root, base_url(root, page.url), rules.max_links)
        counts["links/dropped/malformed"] += found.malformed
        counts["links/dropped/page_budget"] += found.unread
        analysis.links = _links_to_follow(found.links, page, rules, analysis.relevance, counts, analysis.dropped)
    analysis.counts = +counts  # the zeros dropped
    return analysis


def _index_terms(title: str, text: str, full_length: int, blocks: list[str], site: str, tokens: PageTokens | None,
                 rules: PageRules) -> Counter[str]:
    """The page's search index terms (``text`` is what the store keeps of it): counted
    from the tokens the topic cut, and the site template's blocks it left out, when the
    topic read the page's title and content whole, with the index's dictionary, and the
    index reads the whole text; else from a cut of their own."""
    topic = rules.topic
    if (tokens is None or topic is None or not tokens.whole or topic.segmenter.backend != SEARCH_SEGMENTER
            or full_length > min(rules.text_max_chars, INDEX_MAX_CHARS)):
        return document_terms(title, text)
    return terms_of_tokens(tokens.title, tokens.body, topic.templates.template_blocks(site, blocks))


def _stored(analysis: PageAnalysis, rules: PageRules) -> bool:
    return not analysis.noindex and (analysis.relevant is not False or rules.store_all)


def _robots_directives(root: object, headers: tuple[str, ...], rules: PageRules) -> set[str]:
    """``noindex``/``nofollow`` from the page's robots meta tags and X-Robots-Tag."""
    if not rules.obey_meta_robots:
        return set()
    return meta_directives(root, rules.robots_token) | header_directives(headers, rules.robots_token)


def _links_to_follow(
    links: list[RawLink], page: Page, rules: PageRules, relevance: Relevance | None, counts: Counter[str],
    dropped: list[tuple[bytes, str]],
) -> list[Link]:
    """The page's same-site page links, once each, in page order; every other link
    counted, and each other web URL added to ``dropped`` with its reason."""
    wanted: list[Link] = []
    anchors_left = ANCHORS_SCORED_PER_PAGE
    seen: set[str] = set()
    url_rules = rules.url_rules
    for link in links:
        if len(link.url) > url_rules.max_length:  # before request_url, whose cache would keep it
            counts["links/dropped/too_long"] += 1
            continue
        reason = non_page_reason(link.url)
        if reason is not None:
            counts[f"links/dropped/{reason}"] += 1
            if reason != "scheme":  # mailto:, javascript:... are no URL the crawl could fetch
                _add_dropped(dropped, link.url, NOT_A_PAGE, rules)
            continue
        if link.nofollow and rules.obey_rel_nofollow:
            # The same URL may be followed from another link of the page.
            counts["robots/rel_nofollow"] += 1
            _add_dropped(dropped, link.url, NOFOLLOW_LINK, rules)
            continue
        try:
            url = request_url(link.url)
        except BadURL:
            counts["links/dropped/malformed"] += 1
            continue
        stripped = _without_session_ids(url, rules)
        if stripped != url:
            counts["links/session_ids_stripped"] += 1
            url = stripped
        identity = canonical_url(url, rules.strip_trailing_slash)
        if identity in seen:
            continue
        seen.add(identity)
        if site_of(url) != page.site:
            counts["links/offsite"] += 1
            dropped.append((identity_digest(identity), OFFSITE))
            continue
        counts["links/insite"] += 1
        if refused := refusal(url, url_rules):
            counts[f"links/dropped/{refused}"] += 1
            dropped.append((identity_digest(identity), FILTERED if refused == URL_FILTER else TRAP))
            continue
        if page.depth >= rules.max_depth:
            counts["links/too_deep"] += 1
            dropped.append((identity_digest(identity), TOO_DEEP))
            continue
        priority = None
        if rules.best_first and relevance is not None:
            priority = link_priority(rules, relevance, link.text if anchors_left > 0 else "")
            anchors_left -= 1
        wanted.append(Link(url, identity_digest(identity), priority))
    return wanted


def _add_dropped(dropped: list[tuple[bytes, str]], link_url: str, reason: str, rules: PageRules) -> None:
    try:
        identity = canonical_url(_without_session_ids(request_url(link_url), rules), rules.strip_trailing_slash)
    except BadURL:
        return  # counted as its link already; no URL to count
    dropped.append((identity_digest(identity), reason))


def _without_session_ids(url: str, rules: PageRules) -> str:
    """The URL a link stands for: the one the crawl would request, without session ids."""
    return strip_session_ids(url, rules.url_rules.session_parameters)


def link_priority(rules: PageRules, parent: Relevance, anchor_text: str) -> int:
    """Best-first: half the parent's relevance, half the anchor text's similarity to the topic."""
    topic = rules.topic
    assert topic is not None
    parent_share = relevance_share(parent.score, rules.threshold, topic.min_score, topic.max_score)
    return round(PRIORITY_SCALE * (parent_share + topic.similarity(anchor_text)) / 2)


def relevance_share(score: float, threshold: float, lowest: float, highest: float) -> float:
    """``score`` from 0 at ``lowest`` to 1 at ``highest``, 1/2 at ``threshold``: where the
    verdict is undecided. Linear on each side, so a relevant page ranks above every page
    that is not, whatever side of 0 the threshold is (a trained topic's scores run from -1)."""
    if score >= threshold:
        return min(0.5 + 0.5 * (score - threshold) / (highest - threshold), 1.0) if highest > threshold else 1.0
    return max(0.5 * (score - lowest) / (threshold - lowest), 0.0) if threshold > lowest else 0.0

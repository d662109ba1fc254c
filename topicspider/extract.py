"""Page extraction with no Scrapy dependency: title, visible text, e-mails and links.

Everything here works on an lxml HTML tree (``Selector.root`` in Scrapy) or on plain
strings, so it can be unit-tested on its own and reused by later stages.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote, urljoin

from lxml.html import HtmlElement

from topicspider.urls import has_public_suffix

WHITESPACE = re.compile(r"\s+")
SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "math", "head"})
# Elements that break words apart; inline ones (b, span, a) must not, or "He<b>llo</b>"
# would become two words.
BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hr", "li", "main", "nav", "ol", "option", "p", "pre", "section",
    "table", "td", "th", "tr", "ul", "title", "body", "html", "img", "input", "button",
    "select", "textarea", "label", "caption", "summary", "details",
})
TITLE_MAX_CHARS = 1000

# The trailing look-aheads reject "logo@2x.png-ish" tails and SSH remotes such as
# "git@gitlab.gnome.org:GNOME/gimp.git".
EMAIL = re.compile(
    r"(?<![\w.%+-])([a-z0-9][a-z0-9._%+-]{0,63})@((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})(?![\w-])(?!:[\w/~])",
    re.IGNORECASE,
)
_OPEN, _CLOSE = r"[\[\(\{<]", r"[\]\)\}>]"
OBFUSCATED_AT = re.compile(rf"\s*{_OPEN}\s*(?:at|@)\s*{_CLOSE}\s*", re.IGNORECASE)
OBFUSCATED_DOT = re.compile(rf"\s*{_OPEN}\s*(?:dot|\.)\s*{_CLOSE}\s*", re.IGNORECASE)
EMAIL_MAX_CHARS = 254


def normalize_space(text: str) -> str:
    return WHITESPACE.sub(" ", text).strip()


def extract_title(root: HtmlElement) -> str:
    """``<title>``, else ``og:title``, else the first ``<h1>``; whitespace normalised."""
    candidates = (
        root.xpath("//title[1]//text()"),
        root.xpath("//meta[@property='og:title' or @name='og:title']/@content"),
        root.xpath("(//h1)[1]//text()"),
    )
    for texts in candidates:
        title = normalize_space(" ".join(texts))
        if title:
            return title[:TITLE_MAX_CHARS]
    return ""


def extract_text(root: HtmlElement, max_chars: int) -> str:
    """The visible text of the page body: no scripts, styles or markup, whitespace
    normalised, cut at ``max_chars``."""
    body = root.find("body")
    chunks: list[str] = []
    # An explicit stack, not recursion: hostile pages nest thousands of levels deep.
    stack: list[tuple[HtmlElement, bool]] = [(root if body is None else body, False)]
    while stack:
        node, closing = stack.pop()
        tag = node.tag if isinstance(node.tag, str) else None
        if closing:
            if tag in BLOCK_TAGS:
                chunks.append(" ")
            if node.tail:
                chunks.append(node.tail)
            continue
        if tag is None or tag in SKIPPED_TAGS:
            if node.tail:
                chunks.append(node.tail)
            continue
        if tag in BLOCK_TAGS:
            chunks.append(" ")
        if node.text:
            chunks.append(node.text)
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node))
    return normalize_space("".join(chunks))[:max_chars].rstrip()


def emails_in_text(text: str) -> list[str]:
    """E-mail addresses in ``text``, lower-cased, de-duplicated, in order of appearance.

    Full-width forms (``＠``) and the ``name [at] host [dot] com`` family are undone first.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = OBFUSCATED_AT.sub("@", text)
    if "@" not in text:
        return []
    text = OBFUSCATED_DOT.sub(".", text)
    found: dict[str, None] = {}
    for match in EMAIL.finditer(text):
        local, domain = match.group(1).rstrip("."), match.group(2).lower()
        address = f"{local.lower()}@{domain}"
        # "logo@2x.png" has the shape of an address; only a known public suffix makes it one.
        if ".." in local or len(address) > EMAIL_MAX_CHARS or not has_public_suffix(domain):
            continue
        found.setdefault(address, None)
    return list(found)


def emails_in_mailto(hrefs: list[str]) -> list[str]:
    """Addresses named by ``mailto:`` links (several per link, query ignored)."""
    targets = []
    for href in hrefs:
        target = href.strip()[len("mailto:"):].split("?", 1)[0]
        targets.append(unquote(target).replace(",", " ").replace(";", " "))
    return emails_in_text(" ".join(targets))


def extract_emails(root: HtmlElement, text: str) -> list[str]:
    """Addresses from the visible text and from ``mailto:`` links, de-duplicated."""
    mailto = root.xpath("//a[starts-with(translate(normalize-space(@href), 'MAILTO', 'mailto'), 'mailto:')]/@href")
    merged = dict.fromkeys(emails_in_text(text) + emails_in_mailto(mailto))
    return list(merged)


@dataclass(frozen=True, slots=True)
class RawLink:
    """A link as found: absolute but not yet filtered or canonicalised."""

    url: str
    text: str
    nofollow: bool


LINK_XPATH = "//a[@href] | //area[@href] | //frame[@src] | //iframe[@src]"


def extract_links(root: HtmlElement, base_url: str) -> list[RawLink]:
    """Every ``a``/``area`` href and ``frame``/``iframe`` src, resolved against
    ``base_url`` (the page URL, or its ``<base href>``)."""
    links = []
    for element in root.xpath(LINK_XPATH):
        target = (element.get("href") or element.get("src") or "").strip()
        if not target or target.startswith("#"):
            continue
        rel = (element.get("rel") or "").lower().split()
        try:
            url = urljoin(base_url, target)
        except ValueError:
            continue
        links.append(RawLink(url, normalize_space(element.text_content())[:200], "nofollow" in rel))
    return links

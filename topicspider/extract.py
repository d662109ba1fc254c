"""Page extraction with no Scrapy dependency: title, visible text, e-mails and links.

Everything here works on an lxml HTML tree (``Selector.root`` in Scrapy) or on plain
strings, so it can be unit-tested on its own and reused by later stages.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote, urljoin

from lxml import etree
from lxml.html import HtmlElement, HTMLParser

from topicspider.urls import has_public_suffix

WHITESPACE = re.compile(r"\s+")
XML_INVALID = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
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

# ASCII classes around the address, not \w: on Chinese pages an address usually touches
# Han characters ("邮箱service@example.cn地址"). The last look-ahead rejects SSH remotes
# such as "git@gitlab.gnome.org:GNOME/gimp.git".
EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])([a-z0-9][a-z0-9._%+-]{0,63})@((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})"
    r"(?![A-Za-z0-9-])(?!:[A-Za-z0-9/~])",
    re.IGNORECASE,
)
_OPEN, _CLOSE = r"[\[\(\{<]", r"[\]\)\}>]"
OBFUSCATED_AT = re.compile(rf"\s*{_OPEN}\s*(?:at|@)\s*{_CLOSE}\s*", re.IGNORECASE)
OBFUSCATED_DOT = re.compile(rf"\s*{_OPEN}\s*(?:dot|\.)\s*{_CLOSE}\s*", re.IGNORECASE)
EMAIL_MAX_CHARS = 254
# Characters kept on each side of an at sign: an address of EMAIL_MAX_CHARS written
# as "name [at] host [dot] com" is about twice as long.
HINT_WINDOW = 2 * EMAIL_MAX_CHARS + 64
# What must be in a text, before NFKC, for it to hold an address: an at sign (ASCII,
# full-width, small form) or a bracketed "at". Most pages have none, and skip the
# normalisation of their whole text.
# The brackets are every character whose NFKC form is one of OBFUSCATED_AT's.
EMAIL_HINT = re.compile(
    r"[@＠﹫]|[\[\(\{<［（｛＜﹙﹛﹤⁽₍︵︷﹇]\s*(?:at|ａｔ)\s*[\]\)\}>］）｝＞﹚﹜﹥⁾₎︶︸﹈]", re.IGNORECASE
)


def html_root(text: str, url: str) -> HtmlElement:
    """The page's lxml tree (see :func:`parse_html`)."""
    return parse_html(text, url)[0]


# The tags of the elements that do not carry a link, a title or metadata: what nests.
NESTING_TAG = re.compile(
    r"</?(?!(?:a|area|frame|iframe|title|head|body|html|meta|base|link|script|style|br|img)\b)[a-z][^<>]*>",
    re.IGNORECASE)


def parse_html(text: str, url: str) -> tuple[HtmlElement, bool]:
    """The page's lxml tree, and whether its markup nested too deep to be read as it
    stands. Not Scrapy's ``response.selector``: it resolves ``<base href>`` eagerly, and a
    malformed one ("http://[oops") would raise and lose the page (:func:`base_url` reads
    it safely). libxml2 stops reading a page at 2048 nested elements (even with
    ``huge_tree``), losing all that follows: such a page is read again without the tags
    that nest (``div``, ``span``, ``table``...), so its text and links stay, in one block."""
    root, too_deep = _parse(text, url)
    if too_deep:
        root, _ = _parse(NESTING_TAG.sub(" ", text), url)
    return root, too_deep


def _parse(text: str, url: str) -> tuple[HtmlElement, bool]:
    # As parsel builds a Selector's root, keeping the parser to read its errors.
    body = text.strip().replace("\x00", "").encode("utf-8") or b"<html/>"
    parser = HTMLParser(recover=True, encoding="utf-8", huge_tree=True)
    root = etree.fromstring(body, parser=parser, base_url=url)
    if root is None:
        root = etree.fromstring(b"<html/>", parser=parser, base_url=url)
    too_deep = any(error.type_name == "ERR_RESOURCE_LIMIT" and "depth" in error.message for error in parser.error_log)
    return root, too_deep


def normalize_space(text: str) -> str:
    return WHITESPACE.sub(" ", text).strip()


def extract_title(root: HtmlElement) -> str:
    """``<title>``, else ``og:title``, else the first ``<h1>``; whitespace normalised.
    The ``<title>`` of an inline SVG icon is not the page's."""
    candidates = (
        root.xpath("(//title[not(ancestor::svg)])[1]//text()"),
        root.xpath("//meta[@property='og:title' or @name='og:title']/@content"),
        root.xpath("(//h1)[1]//text()"),
    )
    for texts in candidates:
        title = normalize_space(" ".join(texts))
        if title:
            return title
    return ""


# Marks the edges of block elements in the text lxml joins: a private-use character,
# which no page shows as text.
BLOCK_BREAK = "\ue000"


def extract_blocks(root: HtmlElement) -> list[str]:
    """The visible text of the page body, one string per block of text (a paragraph, a
    heading, a list item, a table cell...): no scripts, styles, comments, control
    characters or markup, whitespace normalised, empty blocks left out. Topic scoring
    reads the blocks, so that those a site repeats on every page (menus, footers) can be
    told apart."""
    body = root.find("body")
    text = str(_TEXT_WITH_BLOCK_BREAKS(root if body is None else body))
    text = WHITESPACE.sub(" ", XML_INVALID.sub("", text))
    return [block for block in (part.strip() for part in text.split(BLOCK_BREAK)) if block]


def join_blocks(blocks: list[str]) -> str:
    """A page's text, as it is stored: its blocks joined by spaces."""
    return " ".join(blocks)


def _text_with_block_breaks() -> etree.XSLT:
    """The text of a tree, each block element's between two :data:`BLOCK_BREAK`, so
    words do not run together and blocks stay apart; skipped elements, comments and
    processing instructions left out (their tails kept). libxslt walks the tree in C:
    setting each block element's text and tail from Python, on a copy of the tree, took
    twice as long (1.27 against 0.65 ms a page on the evaluation's corpora)."""
    blocks = "|".join(sorted(BLOCK_TAGS))
    skipped = "|".join(sorted(SKIPPED_TAGS))
    return etree.XSLT(etree.XML(f"""\
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output method="text" encoding="utf-8"/>
  <xsl:template match="{blocks}">&#x{ord(BLOCK_BREAK):X};<xsl:apply-templates/>&#x{ord(BLOCK_BREAK):X};</xsl:template>
  <xsl:template match="{skipped}|comment()|processing-instruction()"/>
</xsl:stylesheet>"""))


_TEXT_WITH_BLOCK_BREAKS = _text_with_block_breaks()


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut at ``max_chars``, and whether anything was cut."""
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars].rstrip(), True


def emails_in_text(text: str) -> list[str]:
    """E-mail addresses in ``text``, lower-cased, de-duplicated, in order of appearance.

    Full-width forms (``＠``) and the ``name [at] host [dot] com`` family are undone first.
    """
    text = _around_hints(text)
    if not text:
        return []
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


def _around_hints(text: str) -> str:
    """The parts of ``text`` around its at signs, or "" when it has none: an address
    lies within ``HINT_WINDOW`` characters of its at sign, and normalising a whole long
    page for the one address in its footer cost more than scoring it."""
    spans: list[list[int]] = []
    for match in EMAIL_HINT.finditer(text):
        start, end = max(0, match.start() - HINT_WINDOW), match.end() + HINT_WINDOW
        # Never start inside a word: "…xyz@a.cn" must not become the address "yz@a.cn".
        # The walk back stops where the span before ends, since it joins that span
        # there anyway: no character is walked twice, and a text of many at signs and
        # no spaces (Chinese has none) costs linear time, not quadratic.
        floor = spans[-1][1] if spans else 0
        while start > floor and not text[start - 1].isspace():
            start -= 1
        if spans and start <= spans[-1][1]:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    return "\n".join(text[start:end] for start, end in spans)


def emails_in_mailto(hrefs: list[str]) -> list[str]:
    """Addresses named by ``mailto:`` links (several per link, query ignored)."""
    targets = []
    for href in hrefs:
        target = href.strip()[len("mailto:"):].split("?", 1)[0]
        targets.append(unquote(target).replace(",", " ").replace(";", " "))
    return emails_in_text(" ".join(targets))


def decode_cfemail(encoded: str) -> str:
    """An address hidden by Cloudflare's e-mail protection (hex; the first byte is the
    XOR key of the others), or "" when ``encoded`` is not such a value."""
    try:
        data = bytes.fromhex(encoded.strip())
    except ValueError:
        return ""
    if len(data) < 2:
        return ""
    return bytes(byte ^ data[0] for byte in data[1:]).decode("utf-8", errors="replace")


def extract_emails(root: HtmlElement, text: str) -> list[str]:
    """Addresses from the visible text, ``mailto:`` links and Cloudflare-protected
    addresses, de-duplicated."""
    mailto = root.xpath("//a[starts-with(translate(normalize-space(@href), 'MAILTO', 'mailto'), 'mailto:')]/@href")
    protected = root.xpath("//@data-cfemail") + [
        href.partition("#")[2] for href in root.xpath("//a[contains(@href, '/cdn-cgi/l/email-protection#')]/@href")
    ]
    hidden = " ".join(decode_cfemail(value) for value in protected)
    merged = dict.fromkeys(emails_in_text(text) + emails_in_mailto(mailto) + emails_in_text(hidden))
    return list(merged)


@dataclass(frozen=True, slots=True)
class RawLink:
    """A link as found: absolute but not yet filtered or canonicalised."""

    url: str
    text: str
    nofollow: bool


LINK_TAGS = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}


def base_url(root: HtmlElement, page_url: str) -> str:
    """The URL the page's relative links resolve against: its first ``<base href>``,
    wherever it stands in the page, or ``page_url`` when there is none or it is broken."""
    for href in root.xpath("//base[@href][1]/@href"):
        try:
            base = urljoin(page_url, href.strip())
        except ValueError:
            break
        if base.startswith(("http://", "https://")):
            return base
    return page_url


@dataclass(frozen=True, slots=True)
class PageLinks:
    links: list[RawLink]
    malformed: int  # links whose URL could not be resolved
    unread: int  # links past the first ``limit``, in page order: never looked at


def extract_links(root: HtmlElement, base: str, limit: int = sys.maxsize) -> PageLinks:
    """The first ``limit`` ``a``/``area`` hrefs and ``frame``/``iframe`` srcs of the page,
    in page order, resolved against ``base`` (see :func:`base_url`); the others only
    counted, so that a page of a million links costs what ``limit`` of them cost."""
    links: list[RawLink] = []
    malformed = read = unread = 0
    # The whole document, as "//a" reads it: markup after </html> makes a second root.
    tops = [*reversed(list(root.itersiblings(preceding=True))), root, *root.itersiblings()]
    for element in (element for top in tops for element in top.iter(*LINK_TAGS)):
        target = element.get(LINK_TAGS[element.tag])
        if target is None:
            continue
        target = target.strip()
        if not target or target.startswith("#"):
            continue  # no link to another page: not one of the limit's
        if read >= limit:
            unread += 1
            continue
        read += 1
        rel = (element.get("rel") or "").lower().split()
        try:
            url = urljoin(base, target)
        except ValueError:
            malformed += 1
            continue
        links.append(RawLink(url, normalize_space(element.text_content())[:200], "nofollow" in rel))
    return PageLinks(links, malformed, unread)

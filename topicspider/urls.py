"""URL logic with no Scrapy dependency: canonical form, site identity and link filtering.

The canonical form is the identity of a URL everywhere in topicspider (storage keys,
de-duplication); the URL that is actually requested keeps its trailing slash so that
servers which redirect ``/a`` to ``/a/`` are not asked twice.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import SplitResult, urlsplit, urlunsplit

import tldextract
from w3lib.url import canonicalize_url, safe_url_string

DEFAULT_PORTS = {"http": 80, "https": 443}
PAGE_SCHEMES = frozenset(DEFAULT_PORTS)
# Scrapy's IGNORED_EXTENSIONS (scrapy.linkextractors; a test keeps them in), and more.
# Written out rather than imported: the page-analysis processes load this module and
# need no Scrapy, whose import took a fifth of a second of CPU of each one's start
# (topicspider.pageworker).
NON_PAGE_EXTENSIONS = frozenset({
    "7z", "7zip", "bz2", "rar", "tar", "tar.gz", "xz", "zip", "mng", "pct", "bmp", "gif", "jpg", "jpeg", "png",
    "pst", "psp", "tif", "tiff", "ai", "drw", "dxf", "eps", "ps", "svg", "cdr", "ico", "webp", "mp3", "wma",
    "ogg", "wav", "ra", "aac", "mid", "au", "aiff", "3gp", "asf", "asx", "avi", "mov", "mp4", "mpg", "qt", "rm",
    "swf", "wmv", "m4a", "m4v", "flv", "webm", "xls", "xlsm", "xlsx", "xltm", "xltx", "potm", "potx", "ppt",
    "pptm", "pptx", "pps", "doc", "docb", "docm", "docx", "dotm", "dotx", "odt", "ods", "odg", "odp", "css",
    "pdf", "exe", "bin", "rss", "dmg", "iso", "apk", "jar", "sh", "rb", "js", "hta", "bat", "cpl", "msi", "msp",
    "py",
    "woff", "woff2", "ttf", "otf", "eot", "json", "xml", "atom", "gz", "tgz",
    "deb", "rpm", "csv", "txt", "map", "wasm", "torrent", "epub", "mobi", "mjs", "avif",
    "heic", "flac", "ics", "vcf",
})

# The bundled Public Suffix List snapshot, never refreshed over the network: a crawl's
# idea of "same site" must not depend on what a remote server answers today.
_PSL = tldextract.TLDExtract(
    suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
)


class BadURL(ValueError):
    """A URL that cannot be crawled: wrong scheme, no or malformed host, bad port."""


# "scheme://user:" then everything up to the last "@": a password may hold an
# unescaped "/", "#", "?" or "@" that a URL parser would read as the end of the host.
LOOSE_CREDENTIALS = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:).*@")


# A query option that holds a password (redis-py reads ``?password=``, ``?ssl_password=``).
QUERY_PASSWORD = re.compile(r"([?&][^=&#]*password=)[^&#]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with any password (of its user, or a query option's) replaced by ``***``,
    fit for logs and error messages.

    When in doubt it masks too much: in ``http://host:8080/a@b`` the port and path."""
    url = QUERY_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        password = None
    if password is None:
        return LOOSE_CREDENTIALS.sub(r"\1***@", url)
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))


def holds_url_password(url: str) -> bool:
    """Whether ``url`` holds a password, of its user or in a query option."""
    return mask_url(url) != url


# A host name label (underscores occur in the wild), or the host is an IP literal.
HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def _check_host(host: str, url: str) -> None:
    if not _valid_host(host):
        raise BadURL(f"{mask_url(url)!r}: malformed host {host!r}")


@lru_cache(maxsize=4096)
def _valid_host(host: str) -> bool:
    if _is_ip(host.strip("[]")):
        return True
    labels = host.rstrip(".").split(".")
    return len(host) <= 253 and all(HOST_LABEL.match(label) for label in labels)


def _split(url: str, original: str) -> SplitResult:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in PAGE_SCHEMES:
        raise BadURL(f"{mask_url(original)!r}: scheme must be http or https")
    try:
        port = parts.port
    except ValueError as exc:
        raise BadURL(f"{mask_url(original)!r}: {exc}") from None
    if not parts.hostname:
        raise BadURL(f"{mask_url(original)!r}: no host")
    if port == 0:
        raise BadURL(f"{mask_url(original)!r}: port 0")
    _check_host(parts.hostname, original)
    return parts._replace(scheme=scheme)


def _netloc(parts: SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or DEFAULT_PORTS.get(parts.scheme) == port:
        return host
    return f"{host}:{port}"


# Pages repeat their navigation links, and each link is canonicalised by the spider and
# again by the fingerprinter: caching both is a measurable share of a fast crawl.
@lru_cache(maxsize=32768)
def request_url(url: str) -> str:
    """The form of ``url`` to request: safe-quoted, no fragment, host lower-cased.

    Raises :class:`BadURL` when the URL is not an http(s) URL with a host.
    """
    url = url.strip()
    try:
        netloc = urlsplit(url).netloc
    except ValueError as exc:
        raise BadURL(f"{mask_url(url)!r}: {exc}") from None
    # Spaces in a path are common and get quoted; in a host they are an error (which
    # w3lib 2.6 finds too, and words its own way).
    if any(char.isspace() for char in netloc):
        raise BadURL(f"{mask_url(url)!r}: white space in the host")
    try:
        safe = safe_url_string(url)
    except ValueError as exc:
        raise BadURL(f"{mask_url(url)!r}: {exc}") from None
    parts = _split(safe, url)
    return urlunsplit(parts._replace(netloc=_netloc(parts), path=parts.path or "/", fragment=""))


# Query parameters (and ";name=" path parameters) that carry a session, not a page:
# Nutch's and Heritrix's lists. ASP's cookie-less ids are "ASPSESSIONID<letters>".
SESSION_PARAMETERS = ("jsessionid", "phpsessid", "sid", "sessionid", "session_id", "sessid", "aspsessionid",
                      "cfid", "cftoken", "zenid", "osCsid")
MAX_PATH_SEGMENTS = 32
MAX_PATH_REPEATS = 2  # Heritrix's PathologicalPathDecideRule: /a/a/a/ is a trap


@dataclass(frozen=True)
class URLFilter:
    """The user's URL rules, as Nutch's ``regex-urlfilter.txt`` writes them: a line
    ``+REGEX`` accepts the URLs it matches (``re.search``), ``-REGEX`` refuses them, the
    first line that matches decides, and a URL no line matches is refused (end the file
    with ``+.`` to accept the rest). Blank lines and lines starting with ``#`` say nothing."""

    rules: tuple[tuple[bool, re.Pattern[str]], ...]

    def accepts(self, url: str) -> bool:
        return next((accept for accept, pattern in self.rules if pattern.search(url)), False)


def parse_url_filter(text: str) -> URLFilter:
    """A :class:`URLFilter` from its file's ``text``; ``ValueError`` naming the first bad line."""
    rules = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line[0] not in "+-" or len(line) == 1:
            raise ValueError(f"line {number}: expected '+REGEX' or '-REGEX', got {line[:80]!r}")
        try:
            rules.append((line[0] == "+", re.compile(line[1:])))
        except re.error as exc:
            raise ValueError(f"line {number}: bad regular expression {line[1:80]!r}: {exc}") from None
    if not rules:
        raise ValueError("no rules: every URL would be refused")
    return URLFilter(tuple(rules))


@dataclass(frozen=True)
class URLRules:
    """The normaliser and trap filters every link of a page goes through: session ids
    stripped, then traps refused (``URL_*`` settings, Scrapy's ``URLLENGTH_LIMIT``),
    then the user's rules (``URL_FILTER_FILE``)."""

    session_parameters: frozenset[str] = frozenset(name.lower() for name in SESSION_PARAMETERS)
    max_length: int = 2083
    max_path_segments: int = MAX_PATH_SEGMENTS
    max_path_repeats: int = MAX_PATH_REPEATS
    url_filter: URLFilter | None = None


def strip_session_ids(url: str, names: frozenset[str]) -> str:
    """``url`` without the session-id query parameters and ``;name=`` path parameters
    ``names`` lists (lower case; a name matches case-insensitively, ASP's
    ``ASPSESSIONIDXYZ`` by its prefix)."""
    if not names:
        return url
    parts = urlsplit(url)
    path = _PATH_PARAMETER.sub(lambda match: "" if _is_session(match.group(1), names) else match.group(0), parts.path)
    pairs = [pair for pair in parts.query.split("&") if not pair or not _is_session(pair.split("=", 1)[0], names)]
    query = "&".join(pairs)
    if path == parts.path and query == parts.query:
        return url
    return urlunsplit(parts._replace(path=path, query=query))


_PATH_PARAMETER = re.compile(r";([^;=/?#]+)=[^;/?#]*")


def _is_session(name: str, names: frozenset[str]) -> bool:
    lowered = name.lower()
    return lowered in names or (lowered.startswith("aspsessionid") and "aspsessionid" in names)


def trap_reason(url: str, rules: URLRules) -> str | None:
    """Why ``url`` looks like a crawler trap (``too_long``, ``too_many_segments``,
    ``path_repetition``: a run of path segments repeated back to back more than
    ``max_path_repeats`` times, as ``/a/a/a/`` or ``/x/y/x/y/x/y/``), or None."""
    if len(url) > rules.max_length:
        return "too_long"
    segments = [segment for segment in urlsplit(url).path.split("/") if segment]
    if len(segments) > rules.max_path_segments:
        return "too_many_segments"
    if _repeats(segments) > rules.max_path_repeats:
        return "path_repetition"
    return None


URL_FILTER = "url_filter"  # the user's rules refuse it (URL_FILTER_FILE)


def refusal(url: str, rules: URLRules) -> str | None:
    """Why the trap filters (:func:`trap_reason`) or the user's rules (:data:`URL_FILTER`)
    refuse ``url``, or None: the same for a link, a redirect target and a seed."""
    if trap := trap_reason(url, rules):
        return trap
    if rules.url_filter is not None and not rules.url_filter.accepts(url):
        return URL_FILTER
    return None


def _repeats(segments: list[str]) -> int:
    """The longest back-to-back repetition of any run of segments (1: none)."""
    longest = 1
    for width in range(1, len(segments) // 2 + 1):
        for start in range(len(segments) - width):
            count = 1
            while segments[start + count * width:start + (count + 1) * width] == segments[start:start + width]:
                count += 1
            longest = max(longest, count)
    return longest


@lru_cache(maxsize=32768)
def canonical_url(url: str, strip_trailing_slash: bool = True) -> str:
    """The identity of ``url``: what :func:`request_url` gives, plus a sorted query and
    normalised percent-escapes, and with ``/a/`` equal to ``/a`` unless disabled."""
    url = url.strip()
    try:
        # One pass of w3lib's canonicaliser quotes, lower-cases and sorts; the checks
        # below are request_url's, on its result.
        canonical = canonicalize_url(url, keep_blank_values=True)
    except ValueError as exc:
        raise BadURL(f"{mask_url(url)!r}: {exc}") from None
    parts = _split(canonical, url)
    path = parts.path or "/"
    if strip_trailing_slash and len(path) > 1:
        path = path.rstrip("/") or "/"
    return urlunsplit(parts._replace(netloc=_netloc(parts), path=path, fragment=""))


@lru_cache(maxsize=65536)
def _site(host: str, netloc: str) -> str:
    if "." not in host or _is_ip(host):
        return netloc
    return _PSL(host).top_domain_under_public_suffix or netloc


def site_of(url: str) -> str:
    """The site a URL belongs to: its registrable domain from the Public Suffix List.

    An IP address, ``localhost`` or any host with no registrable domain is its own
    site, and then the port is part of it.
    """
    parts = urlsplit(url)
    return _site(parts.hostname or "", _netloc(parts))


@lru_cache(maxsize=4096)
def has_public_suffix(domain: str) -> bool:
    """True when ``domain`` is a name under a known public suffix (``a.com``, not ``2x.png``)."""
    return bool(_PSL(domain).top_domain_under_public_suffix)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def non_page_reason(url: str) -> str | None:
    """Why ``url`` is not worth fetching as a page (``scheme`` or ``extension``), or None."""
    scheme, sep, rest = url.partition(":")
    if not sep or scheme.lower() not in PAGE_SCHEMES:
        return "scheme"
    # Path parameters ("/a.pdf;jsessionid=1") are not part of the extension.
    path = urlsplit(url).path.split(";", 1)[0]
    extension = posixpath.splitext(path)[1][1:].lower()
    if extension in NON_PAGE_EXTENSIONS or path.lower().endswith(".tar.gz"):
        return "extension"
    return None


URL_PATTERN_MAX = 500


@dataclass(frozen=True)
class URLPattern:
    """A blocked-URL pattern: a glob over the whole URL in which ``*`` matches anything
    (``*/tag/*``, ``*.pdf``; ``?`` and ``[`` are themselves, as URLs hold them), or,
    without a ``*``, a URL prefix (``https://example.com/forum/``). Matched without
    backtracking: the pieces between stars are found left to right, once each."""

    text: str
    pieces: tuple[str, ...]

    def matches(self, url: str) -> bool:
        first, *middle, last = self.pieces
        end = len(url) - len(last)
        if end < len(first) or not url.startswith(first) or not url.endswith(last):
            return False
        position = len(first)
        for piece in middle:
            found = url.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True


def url_pattern(pattern: str) -> URLPattern:
    """:class:`URLPattern` of ``pattern``; :class:`ValueError` for an empty or overlong one."""
    pattern = pattern.strip()
    if not pattern:
        raise ValueError("empty URL pattern")
    if len(pattern) > URL_PATTERN_MAX:
        raise ValueError(f"URL pattern longer than {URL_PATTERN_MAX} characters")
    glob = pattern if "*" in pattern else pattern + "*"
    return URLPattern(pattern, tuple(glob.split("*")))


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (``127.0.0.1``, ``::1``, ``[::1]``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False

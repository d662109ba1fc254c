"""Character-set choice for HTML bodies, with no Scrapy dependency.

Scrapy trusts a declared charset even when the body contradicts it, so a GBK page
that claims UTF-8, or a UTF-8 page that claims GBK, comes out garbled: the defect every
seed document complains of. :func:`better_encoding` names an encoding when the
declaration is absent or plainly wrong, and says nothing when it can be trusted.
Detection is charset_normalizer's, the detector Scrapy itself falls back on, limited to
the encodings a Chinese or Western page is likely to be in.
"""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes
from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
)


def _decodes(body: bytes, encoding: str) -> bool:
    try:
        codecs.decode(body, encoding)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


# What an undeclared page may be in. Left free to try every codec, the detector reads
# short Chinese pages as Korean or Japanese; a Chinese-first crawler narrows its choice.
CANDIDATES = ["utf_8", "gb18030", "big5hkscs", "cp1252"]
SINGLE_BYTE = frozenset({"cp1252", "latin-1", "iso8859-1", "ascii", "windows-1252"})


def guess_encoding(body: bytes) -> str | None:
    """The encoding a body is most likely in: UTF-8 whenever it decodes as such."""
    if _decodes(body, "utf-8"):
        return "utf-8"
    match = from_bytes(body, cp_isolation=CANDIDATES).best()
    return resolve_encoding(match.encoding) if match is not None else None


def better_encoding(body: bytes, content_type: str | None) -> str | None:
    """An encoding to use instead of the declared one, or None to keep it.

    A BOM is always right. Non-ASCII bytes that are valid UTF-8 are UTF-8, whatever
    is declared: text in another multi-byte charset is almost never valid UTF-8, while a
    UTF-8 page labelled GBK decodes as GBK without error, into nonsense. A header
    naming a single-byte charset (servers' default ISO-8859-1) loses to a ``<meta>``
    the body agrees with. Otherwise a declaration the body decodes under is kept, and
    a missing or broken one is replaced by :func:`guess_encoding`.
    """
    if read_bom(body)[0] or body.isascii():
        return None
    header = _resolved(http_content_type_encoding(content_type or ""))
    meta = _resolved(html_body_declared_encoding(body))
    declared = header or meta
    if _decodes(body, "utf-8"):
        return None if declared == "utf-8" else "utf-8"
    if header in SINGLE_BYTE and meta and meta != header and _decodes(body, meta):
        return meta
    if declared and _decodes(body, declared):
        return None
    guessed = guess_encoding(body)
    return None if guessed == declared else guessed


def _resolved(encoding: str | None) -> str | None:
    return resolve_encoding(encoding) if encoding else None

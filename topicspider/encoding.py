"""Character-set choice for HTML bodies, with no Scrapy dependency.

Scrapy trusts a declared charset even when the body contradicts it, so a GBK page
that claims UTF-8 comes out garbled: the defect every seed document complains of.
:func:`better_encoding` names an encoding when the declaration is absent or plainly
wrong, and says nothing when the declaration can be trusted. Detection is
charset_normalizer's, the detector Scrapy itself falls back on.
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


def guess_encoding(body: bytes) -> str | None:
    """The encoding a body is most likely in: UTF-8 whenever it decodes as such."""
    if _decodes(body, "utf-8"):
        return "utf-8"
    match = from_bytes(body).best()
    return resolve_encoding(match.encoding) if match is not None else None


def declared_encoding(body: bytes, content_type: str | None) -> str | None:
    """The charset a page declares: BOM, then HTTP header, then ``<meta>``."""
    bom, _ = read_bom(body)
    return (
        bom
        or http_content_type_encoding(content_type or "")
        or html_body_declared_encoding(body)
    )


def better_encoding(body: bytes, content_type: str | None) -> str | None:
    """An encoding to use instead of the declared one, or None to keep it.

    A declaration is kept when the body decodes under it without error; a missing or
    broken one is replaced by :func:`guess_encoding`.
    """
    declared = declared_encoding(body, content_type)
    resolved = resolve_encoding(declared) if declared else None
    if resolved and _decodes(body, resolved):
        return None
    if not declared and body.isascii():
        return None
    guessed = guess_encoding(body)
    return None if guessed == resolved else guessed

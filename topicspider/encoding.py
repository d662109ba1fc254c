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
import re

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
    """The encoding a body is most likely in: UTF-8 whenever it decodes as such. A
    single-byte choice of the detector loses to a Chinese reading of the same bytes
    that the page's ``lang`` asks for or that reads as Chinese (:func:`chinese_reading`):
    a Chinese title over an English body has too few non-ASCII bytes for the detector."""
    if _decodes(body, "utf-8"):
        return "utf-8"
    match = from_bytes(body, cp_isolation=CANDIDATES).best()
    guessed = resolve_encoding(match.encoding) if match is not None else None
    if guessed is None or guessed in SINGLE_BYTE:
        return chinese_reading(body) or guessed
    return guessed


# GB18030 first, as it wins a tie: GBK text read as Big5 is often all Han characters
# too, while Big5 text read as GB18030 turns into symbols, kana and private-use ones.
CHINESE_CODECS = ("gb18030", "big5hkscs", "cp950")
BIG5_CODECS = ("big5hkscs", "cp950")  # Python's Big5-HKSCS lacks cp950's euro sign and a few more
# <html lang="zh-TW">, in the first bytes of the page.
_HTML_LANG = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?zh(?:[-_]([a-z]{2,4}))?", re.IGNORECASE)
_TRADITIONAL = frozenset({b"tw", b"hk", b"mo", b"hant"})
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# A reading is Chinese when nearly all its non-ASCII characters are Han characters in
# words of two or more: a Western page read as GB18030 or Big5 turns each accented
# letter and the letter after it into one Han character, alone among Latin letters.
MIN_HAN_SHARE = 0.9


def chinese_reading(body: bytes) -> str | None:
    """Big5 (HKSCS, else cp950) or GB18030, when the body decodes as it and reads as
    Chinese: the one its ``<html lang="zh-…">`` region names (TW, HK, MO, Hant: Big5;
    others GB18030), else the one whose text has the more Han characters in words of two
    or more; None otherwise."""
    readings = {codec: text for codec in CHINESE_CODECS if (text := _decoded(body, codec)) is not None}
    if not readings:
        return None
    lang = _HTML_LANG.search(body[:4096])
    if lang is not None and (region := (lang.group(1) or b"").lower()):
        # The page says which: when its bytes do not read so, no other reading is trusted.
        wanted = BIG5_CODECS if region in _TRADITIONAL else ("gb18030",)
        return next((codec for codec in wanted if codec in readings), None)
    scores = {codec: _han_in_words(text) for codec, text in readings.items()}
    best = max(scores, key=lambda codec: scores[codec])
    return best if scores[best] >= MIN_HAN_SHARE or lang is not None else None


def _decoded(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except UnicodeDecodeError:
        return None


def _han_in_words(text: str) -> float:
    """The share of the non-ASCII characters of ``text`` that are Han characters in runs
    of two or more."""
    non_ascii = len(_NON_ASCII.findall(text))
    if not non_ascii:
        return 0.0
    return sum(len(run) for run in _HAN.findall(text) if len(run) > 1) / non_ascii


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


# The bytes the WHATWG MIME Sniffing Standard calls binary data bytes (ESC, which
# ISO-2022 text uses, is not one), and how far it reads a body to tell.
BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
SNIFF_BYTES = 1445
# A body is binary when more than this share of its first SNIFF_BYTES are binary data
# bytes, and at least BINARY_MIN_BYTES: random bytes (compressed data, images) hold
# about 10 %, while a text page holds a stray control character or NUL at most.
BINARY_SHARE = 0.05
BINARY_MIN_BYTES = 8
UTF_16_32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def looks_binary(body: bytes, declared: str | None = None) -> bool:
    """Whether ``body`` is binary data (an image, an archive, a compressed body sent as
    is) rather than text, whatever its Content-Type says: more than :data:`BINARY_SHARE`
    binary data bytes (NUL among them), and :data:`BINARY_MIN_BYTES` at least, among its
    first :data:`SNIFF_BYTES`. UTF-16 and UTF-32 text, which holds NULs, is told by its
    BOM or its ``declared`` charset."""
    if body.startswith(UTF_16_32_BOMS) or (declared or "").lower().replace("-", "").startswith(("utf16", "utf32")):
        return False
    sample = body[:SNIFF_BYTES]
    binary = len(sample) - len(sample.translate(None, BINARY_BYTES))  # in C: this runs for every page
    return binary >= BINARY_MIN_BYTES and binary > BINARY_SHARE * len(sample)

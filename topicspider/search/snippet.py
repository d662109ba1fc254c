"""The extract shown with a search result: the stretch of a page's text that holds the
most of the query's terms, cut into plain and matching pieces.

Pieces, not markup: whoever shows them (a template, a terminal) escapes the text and
marks the matches its own way, so a crawled page can never inject markup here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SNIPPET_CHARS = 200
# Candidate windows tried, each starting a little before one match.
MAX_CANDIDATES = 200
LEAD_CHARS = 30
SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Piece:
    text: str
    match: bool


def _matcher(terms: Iterable[str]) -> re.Pattern[str] | None:
    # Longest first, so that "新闻网" is marked whole rather than as "新闻" + "网".
    ordered = sorted({term for term in terms if term}, key=len, reverse=True)
    if not ordered:
        return None
    return re.compile("|".join(re.escape(term) for term in ordered), re.IGNORECASE)


def highlight(text: str, terms: Iterable[str]) -> list[Piece]:
    """``text`` in pieces, the occurrences of ``terms`` (any case) marked."""
    pattern = _matcher(terms)
    if pattern is None or not text:
        return [Piece(text, False)] if text else []
    pieces: list[Piece] = []
    position = 0
    for found in pattern.finditer(text):
        if found.start() > position:
            pieces.append(Piece(text[position:found.start()], False))
        pieces.append(Piece(found.group(), True))
        position = found.end()
    if position < len(text):
        pieces.append(Piece(text[position:], False))
    return pieces


def snippet(text: str, terms: Iterable[str], width: int = SNIPPET_CHARS) -> list[Piece]:
    """At most ``width`` characters of ``text`` around its best cluster of ``terms``, with
    "…" where the text was cut; the start of the text when no term occurs."""
    terms = list(terms)
    pattern = _matcher(terms)
    text = SPACES.sub(" ", text).strip()
    start = 0
    if pattern is not None:
        start = _best_start(text, pattern, width)
    end = min(len(text), start + width)
    pieces = highlight(text[start:end], terms)
    if start > 0:
        pieces.insert(0, Piece("…", False))
    if end < len(text):
        pieces.append(Piece("…", False))
    return pieces


def _best_start(text: str, pattern: re.Pattern[str], width: int) -> int:
    """Where the window holding the most distinct terms starts (the earliest such)."""
    matches = [(found.start(), found.group().lower()) for _, found in zip(range(10 * MAX_CANDIDATES), pattern.finditer(text))]
    best_start, best_count = 0, 0
    for index, (position, _) in enumerate(matches[:MAX_CANDIDATES]):
        start = max(0, position - LEAD_CHARS)
        distinct: set[str] = set()
        for where, term in matches[index:]:  # in position order
            if where + len(term) > start + width:
                break
            distinct.add(term)
        if len(distinct) > best_count:
            best_start, best_count = start, len(distinct)
    return best_start


def as_text(pieces: Iterable[Piece], mark: tuple[str, str] = ("[", "]")) -> str:
    """Pieces as plain text, each match between ``mark``'s two strings."""
    return "".join(f"{mark[0]}{piece.text}{mark[1]}" if piece.match else piece.text for piece in pieces)

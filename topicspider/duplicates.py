"""Duplicate content, with no Scrapy dependency: the same text under several URLs, and
texts that differ only a little.

* :func:`content_digest`: the MD5 of a page's title and text, whitespace runs folded, so
  that ``/guide`` and ``/guide/index.html`` give one digest whatever their markup says
  apart from the text (as Nutch's page signatures compare content, not bytes).
* :func:`simhash`: Charikar's 64-bit SimHash of the text's shingles (pairs of adjacent
  words, each counted once; in Chinese or Japanese, a run of characters between marks
  is a word). Texts that share most shingles differ in few bits.
* :class:`ContentIndex`: the pages seen, bounded: a digest says which earlier page has
  exactly the same text (and whether any copy's links were followed yet), and the
  SimHash which earlier page is within ``distance`` bits of it (Manku, Jain and Das Sarma, 2007: 3 of 64 bits for billions of web pages). A
  SimHash is cut into ``distance + 1`` blocks: two within ``distance`` bits agree on at
  least one block whole, so a page is compared only with those sharing a block.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from array import array
from dataclasses import dataclass
from typing import Any

from topicspider.lru import LRU

SIMHASH_BITS = 64
# Blocks of at least 8 bits: past that, a look-up would compare with much of the index,
# on the reactor thread.
MAX_DISTANCE = SIMHASH_BITS // 8 - 1
# A text shorter than this is no page's own (a "moved" stub, a frameset): not compared.
DIGEST_MIN_CHARS = 50
_ALL_BITS = (1 << SIMHASH_BITS) - 1
# Of the text, read for the SimHash: enough shingles to tell pages apart (about 1,100 of
# English), at about a millisecond a page.
SIMHASH_MAX_CHARS = 8_000
# Fewer shingles than this say too little: short texts would all look alike.
SIMHASH_MIN_SHINGLES = 16
# A word: a run of letters and digits (in Chinese or Japanese, a clause between marks).
_WORD = re.compile(r"\w+")
# For bit b, each byte value mapped to its bit b (0 or 1): bytes.translate counts a
# column of the shingles' hashes in C.
_BIT_OF = [bytes((value >> bit) & 1 for value in range(256)) for bit in range(8)]


def content_digest(title: str, text: str) -> bytes:
    """The MD5 of the title and the text, each with its whitespace runs folded to one space."""
    folded = " ".join(title.split()) + "\n" + " ".join(text.split())
    return hashlib.md5(folded.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()


def shingles(text: str) -> set[str]:
    """The distinct pairs of adjacent words in ``text``'s first :data:`SIMHASH_MAX_CHARS`."""
    words = _WORD.findall(text[:SIMHASH_MAX_CHARS].lower())
    return set(map(" ".join, zip(words, words[1:])))


def simhash(text: str) -> int | None:
    """The text's SimHash, or None for a text of fewer than :data:`SIMHASH_MIN_SHINGLES`
    shingles. Each bit is set when more than half of the shingles' hashes have it set."""
    found = shingles(text)
    if len(found) < SIMHASH_MIN_SHINGLES:
        return None
    hashes = b"".join([hashlib.blake2b(shingle.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                       for shingle in found])
    half = len(found) / 2
    value = 0
    for byte in range(8):
        column = hashes[byte::8]
        for bit in range(8):
            if column.translate(_BIT_OF[bit]).count(1) > half:
                value |= 1 << (byte * 8 + bit)
    return value


def distance(one: int, other: int) -> int:
    """Bits that differ: the Hamming distance."""
    return (one ^ other).bit_count()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`ContentIndex.check` found for a page: the URL of an earlier page with
    the same text, or else of one whose SimHash is within the distance (and how far).
    ``follow_links``: a copy whose links are to be followed, no copy's having been yet
    (the first said nofollow, or lay at the depth limit)."""

    duplicate_of: str | None = None
    near_duplicate_of: str | None = None
    bits: int = 0
    follow_links: bool = False


class NearDuplicateIndex:
    """Distinct SimHashes and their URLs, the oldest forgotten past ``capacity``: for
    each block, a sorted array of the SimHashes turned so that the block's bits come
    first, which bisection searches for those that agree on it (32 bytes a page for
    the default distance, plus the URLs)."""

    def __init__(self, max_distance: int, capacity: int) -> None:
        if not 0 <= max_distance <= MAX_DISTANCE:
            raise ValueError(f"a SimHash distance from 0 to {MAX_DISTANCE}, not {max_distance}")
        self.max_distance = max_distance
        self.capacity = capacity
        blocks = max_distance + 1
        edges = [SIMHASH_BITS * index // blocks for index in range(blocks + 1)]
        # (turn, width): turning right by ``turn`` brings a block of ``width`` bits first.
        self.blocks = [(end % SIMHASH_BITS, end - start) for start, end in zip(edges, edges[1:])]
        self.tables = [array("Q") for _ in self.blocks]
        self.urls: dict[int, str] = {}  # SimHash -> URL, oldest first

    def __len__(self) -> int:
        return len(self.urls)

    def nearest(self, value: int) -> tuple[str, int] | None:
        """The URL of a closest SimHash within the distance, and how many bits apart;
        None if there is none."""
        best: tuple[int, int] | None = None  # (bits, SimHash)
        for (turn, width), table in zip(self.blocks, self.tables):
            turned = _turn(value, turn)
            low = turned >> (SIMHASH_BITS - width) << (SIMHASH_BITS - width)
            high = low + (1 << (SIMHASH_BITS - width))
            for index in range(bisect.bisect_left(table, low), bisect.bisect_left(table, high)):
                other = _turn(table[index], SIMHASH_BITS - turn)
                bits = distance(value, other)
                if bits <= self.max_distance and (best is None or bits < best[0]):
                    best = (bits, other)
        return None if best is None else (self.urls[best[1]], best[0])

    def add(self, value: int, url: str) -> None:
        """Remember ``value`` for ``url``, unless it is remembered already."""
        if value in self.urls:
            return
        self.urls[value] = url
        for (turn, _), table in zip(self.blocks, self.tables):
            turned = _turn(value, turn)
            table.insert(bisect.bisect_left(table, turned), turned)
        while len(self.urls) > self.capacity:
            self._forget(next(iter(self.urls)))

    def snapshot(self) -> list[tuple[int, str]]:
        """The SimHashes and their URLs, oldest first."""
        return list(self.urls.items())

    def restore(self, saved: list[tuple[int, str]]) -> None:
        """Hold the most recent ``capacity`` of ``saved`` (a :meth:`snapshot`) instead;
        each table is sorted once, where adding them one by one would move each array
        once per SimHash."""
        urls = dict(saved[-self.capacity:])
        self.tables = [array("Q", sorted(_turn(value, turn) for value in urls)) for turn, _ in self.blocks]
        self.urls = urls

    def _forget(self, value: int) -> None:
        del self.urls[value]
        for (turn, _), table in zip(self.blocks, self.tables):
            del table[bisect.bisect_left(table, _turn(value, turn))]


def _turn(value: int, bits: int) -> int:
    """``value`` rotated right by ``bits`` within 64 bits."""
    bits %= SIMHASH_BITS
    return ((value >> bits) | (value << (SIMHASH_BITS - bits))) & _ALL_BITS


class ContentIndex:
    """The pages stored so far, by digest and by SimHash, each map holding the
    ``capacity`` most recent. ``max_distance`` None: no near-duplicates."""

    def __init__(self, capacity: int, max_distance: int | None = 3) -> None:
        # digest -> (the first copy's URL, whether a copy's links were followed)
        self.exact: LRU[bytes, tuple[str, bool]] = LRU(capacity)
        self.near = None if max_distance is None else NearDuplicateIndex(max_distance, capacity)

    def check(self, url: str, digest: bytes, value: int | None, follows: bool = True) -> Verdict:
        """What ``url``'s page is to the pages before it; a page that is no exact
        duplicate is remembered. ``follows``: whether the page's links would be followed."""
        exact = self.exact_verdict(url, digest, follows)
        return exact if exact.duplicate_of is not None else self.near_verdict(url, value)

    def exact_verdict(self, url: str, digest: bytes, follows: bool = True) -> Verdict:
        """Whether an earlier page has ``url``'s text (a distributed crawl asks Redis the
        same: :meth:`topicspider.cluster.frontier.RedisFrontier.claim_content`)."""
        original = self.exact.get(digest)
        if original is not None and original[0] != url:
            first, followed = original
            if followed or not follows:
                return Verdict(duplicate_of=first)
            self.exact.put(digest, (first, True))
            return Verdict(duplicate_of=first, follow_links=True)
        self.exact.put(digest, (url, follows or (original is not None and original[1])))
        return Verdict()

    def near_verdict(self, url: str, value: int | None) -> Verdict:
        """The closest earlier page within the distance, for a page that is no exact
        duplicate; the page is remembered."""
        if self.near is None or value is None:
            return Verdict()
        nearest = self.near.nearest(value)
        self.near.add(value, url)
        if nearest is None or nearest[0] == url:
            return Verdict()
        return Verdict(near_duplicate_of=nearest[0], bits=nearest[1])

    def snapshot(self) -> dict[str, list[Any]]:
        """What the index holds, as plain data (oldest first) for :meth:`restore`: a
        paused crawl's memory of the pages stored before it stopped."""
        exact = [(digest, url, followed) for digest, (url, followed) in self.exact.entries.items()]
        return {"exact": exact, "near": [] if self.near is None else self.near.snapshot()}

    def restore(self, saved: dict[str, list[Any]]) -> None:
        """Hold what :meth:`snapshot` gave instead, the most recent ``capacity`` of it;
        unchanged if ``saved`` is not such data."""
        exact: LRU[bytes, tuple[str, bool]] = LRU(self.exact.capacity)
        for digest, url, followed in saved["exact"][-self.exact.capacity:]:
            exact.put(digest, (url, followed))
        if self.near is not None:
            self.near.restore(saved["near"])
        self.exact = exact

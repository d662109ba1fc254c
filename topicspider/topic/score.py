"""Topic relevance of a page, with no Scrapy dependency.

The title's and the body's term-frequency vectors, over the topic's terms only, are
compared with the topic's weights by cosine: B for the title, C for the body. The
relevance is ``A = title_weight * B + body_weight * C`` (the seeds' ``A = 4B + C``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from topicspider.topic.lexicon import Lexicon
from topicspider.topic.segment import Segmenter


@dataclass(frozen=True, slots=True)
class Relevance:
    score: float  # A
    title: float  # B
    body: float  # C


def counts_cosine(counts: Counter[str], lexicon: Lexicon) -> float:
    """Cosine of ``counts`` (of the lexicon's terms only) and the lexicon's weights."""
    weights = lexicon.weights
    if not counts:
        return 0.0
    dot = sum(count * weights[term] for term, count in counts.items())
    length = math.sqrt(sum(count * count for count in counts.values()))
    return dot / (length * lexicon.norm)


class Topic:
    """A lexicon and the segmenter that matches page words to it."""

    def __init__(
        self,
        lexicon: Lexicon,
        segmenter: Segmenter,
        title_weight: float = 4.0,
        body_weight: float = 1.0,
        max_chars: int = 10_000,
    ) -> None:
        self.lexicon = lexicon
        self.segmenter = segmenter
        self.title_weight = title_weight
        self.body_weight = body_weight
        self.max_chars = max_chars
        segmenter.add_words(lexicon.weights)

    @property
    def max_score(self) -> float:
        return self.title_weight + self.body_weight

    def relevance(self, title: str, body: str) -> Relevance:
        """A, B and C for a page; only the first ``max_chars`` of each text are read."""
        title_similarity = self.similarity(title)
        body_similarity = self.similarity(body)
        score = self.title_weight * title_similarity + self.body_weight * body_similarity
        return Relevance(score, title_similarity, body_similarity)

    def similarity(self, text: str) -> float:
        if not text:
            return 0.0
        return counts_cosine(self.segmenter.count(text[: self.max_chars], self.lexicon.weights), self.lexicon)

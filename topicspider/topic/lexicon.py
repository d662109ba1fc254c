"""A topic as a weighted term list (the seed documents' model): parsed from a keyword
file, given as keywords, or trained from sample pages. No Scrapy dependency.

Training weight of term *t* over *N* sample documents, *t* found in *n* of them::

    w(t) = avg_tf(t) / (ln(N / n) + 1 / ln(N + 1))

``avg_tf`` is the mean over all *N* samples of ``count(t, d) / len(d)``. The divisor is
the seeds' document-frequency factor ``1 / (log(nDoc/ni) + 1/log(nDoc-1))`` with
``nDoc - 1`` replaced by ``N + 1``, so that it is defined for one or two samples: a term
in every sample gets its average TF times ``ln(N + 1)``, a term in fewer samples less.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from topicspider.config import ConfigError


@dataclass(frozen=True)
class Lexicon:
    """Term -> positive weight. Terms are lower-case single words."""

    weights: dict[str, float]

    def __post_init__(self) -> None:
        if not self.weights:
            raise ConfigError("the topic has no terms")

    @cached_property
    def norm(self) -> float:
        return math.sqrt(sum(weight * weight for weight in self.weights.values()))

    def __len__(self) -> int:
        return len(self.weights)


def keywords_lexicon(keywords: Iterable[str]) -> Lexicon:
    """Equal weights for inline keywords (``-a topic=电子表格,公式,单元格``)."""
    terms = [keyword.strip().lower() for keyword in keywords if keyword.strip()]
    if not terms:
        raise ConfigError("no topic keywords given: use -a topic=WORD[,WORD...] or -a topic=@file")
    bad = next((term for term in terms if len(term.split()) > 1), None)
    if bad is not None:
        raise ConfigError(f"topic keyword {bad!r} holds a space: give one word per keyword")
    return Lexicon(dict.fromkeys(terms, 1.0))


def parse_lexicon(text: str, source: str) -> Lexicon:
    """``term weight`` a line (weight 1 when left out); ``#`` starts a comment line."""
    weights: dict[str, float] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) > 2:
            raise ConfigError(f"{source}:{number}: expected 'term weight', got {line.strip()!r}")
        weight = _weight(fields[1], source, number) if len(fields) == 2 else 1.0
        weights[fields[0].lower()] = weights.get(fields[0].lower(), 0.0) + weight
    if not weights:
        raise ConfigError(f"topic file {source!r} holds no terms")
    return Lexicon(weights)


def _weight(field: str, source: str, number: int) -> float:
    try:
        weight = float(field)
    except ValueError:
        raise ConfigError(f"{source}:{number}: weight must be a number, got {field!r}") from None
    if not (weight > 0 and math.isfinite(weight)):
        raise ConfigError(f"{source}:{number}: weight must be a positive number, got {field!r}")
    return weight


def train_lexicon(documents: Sequence[Mapping[str, float] | Sequence[str]], top_k: int) -> Lexicon:
    """The ``top_k`` heaviest terms of the sample ``documents`` (formula above), each
    its terms in order or their counts."""
    counted = [document if isinstance(document, Mapping) else Counter(document) for document in documents]
    counted = [counts for counts in counted if sum(counts.values()) > 0]
    if not counted:
        raise ConfigError("the training samples hold no words to learn a topic from")
    total = len(counted)
    tf_sum: Counter[str] = Counter()
    df: Counter[str] = Counter()
    for counts in counted:
        length = sum(counts.values())
        for term, count in counts.items():
            if count > 0:
                tf_sum[term] += count / length
                df[term] += 1
    floor = 1 / math.log(total + 1)
    weights = {term: (tf_sum[term] / total) / (math.log(total / df[term]) + floor) for term in tf_sum}
    # Ties broken by term, so that the same samples always give the same lexicon.
    best = sorted(weights.items(), key=lambda pair: (-pair[1], pair[0]))[:top_k]
    return Lexicon(dict(best))


def without_negative_terms(lexicon: Lexicon, positives: Sequence[Mapping[str, float]],
                           negatives: Sequence[Mapping[str, float]]) -> Lexicon:
    """``lexicon`` without the terms that take as large a share of the ``negatives``
    (off-topic pages' counts) as of the ``positives``, on average."""
    if not negatives:
        return lexicon

    def mean_share(documents: Sequence[Mapping[str, float]], term: str) -> float:
        return sum(counts.get(term, 0) / max(sum(counts.values()), 1) for counts in documents) / len(documents)

    kept = {term: weight for term, weight in lexicon.weights.items()
            if mean_share(negatives, term) < mean_share(positives, term)}
    if not kept:
        raise ConfigError("every term of the trained topic is as frequent on the negatives as on the samples")
    return Lexicon(kept)

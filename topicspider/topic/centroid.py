"""The centroid topic model, with no Scrapy dependency: a Rocchio classifier over
TF-IDF vectors, learnt from sample pages against a background, with a threshold
calibrated by cross-validation.

* A page's vector: its term counts (a title term counting ``title_weight`` times a body
  one), sub-linear (``1 + ln c``), times each term's inverse document frequency over
  the training pages, ``ln((N + 1) / (df + 1)) + 1``, scaled to length 1.
* The topic's direction: the mean vector of the samples minus the mean vector of the
  background (pages sampled from the crawl's sites, and the user's negatives). A term
  weighs what it occurs more on the topic than off it; the site's common words, which
  are as frequent on the samples as on the background, weigh nothing.
* Two steps, as in positive-unlabelled learning (Liu et al., 2002): the background is
  unlabelled and holds pages on the topic too, so the background pages that score
  highest under the first direction (each scored by the direction learnt without it)
  are taken out of it, and the direction and threshold are learnt again from what is
  left (:func:`split_by_share`). As many are taken out as the topic's estimated share
  of the background (:func:`topic_share`), as mixture proportion estimation has it:
  the background is a mixture of pages that score as the held-out samples do and of
  others, so at any threshold its share at or above it is at least the topic's share
  times the samples' expected recall there.
* A page's score: the cosine of its vector and the topic's direction, from -1 to 1.
* The threshold: the one that maximises the F1 expected over the crawl's pages
  (:func:`f1_threshold`). Each sample is scored by the direction learnt without it (the
  expected recall at a threshold is the share of such held-out scores above it, each
  smoothed by a normal kernel); the share of the crawl's pages above it is the
  background's, each background page scored by the direction learnt without it
  (:func:`left_out_scores`), as a page of the crawl is; the topic's share of the
  crawl's pages is :func:`assumed_share` of the second step's scores.
* With fewer than :data:`MIN_F1_SAMPLES` samples, or samples whose held-out scores are
  all alike, nothing says how recall falls: the first step takes out the background
  pages at or above its threshold, the score that ``target_recall`` of the held-out
  samples would reach, their scores taken as normally distributed
  (:func:`recall_threshold`), and at most halfway between their mean and the
  background's mean score (:func:`calibrated_threshold`), and that threshold stays, as
  it does where there is no background to estimate precision from.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

FOLDS = 5
# The normal kernel that smooths each held-out score in :func:`expected_recall`, in
# standard deviations of those scores: ten scores make a coarse ladder of recalls.
RECALL_BANDWIDTH = 0.3
# Fewer samples than this say too little of how recall falls for :func:`f1_threshold`.
MIN_F1_SAMPLES = 5
# :func:`topic_share` divides by the held-out samples' expected recall only where at
# least this share of them reaches the threshold. Higher thresholds leave a small
# section few background pages to count, which its samples outscore: at 0.5, GIMP's
# getting-unstuck chapter came out at half its share and lost most of its recall in a
# crawl. 0.6 to 0.8 kept it; past 0.7 the PostgreSQL corpus lost 0.04 (docs/topic.md).
SHARE_RECALL_FLOOR = 0.65
# The topic's share the F1 threshold assumes, as a multiple of :func:`topic_share`. The
# estimate is a bound from above only with the true recall. Where a section's pages are
# alike, the samples a user picks, typical of it, reach a threshold more often than its
# pages at large do, and the estimate comes out low (LilyPond's web site); where they
# differ, pages of other sections reach the thresholds too, and it comes out high
# (PostgreSQL's parts). Too low a share costs recall more than too high a one costs
# precision. Measured (docs/topic.md, "Evaluation on real sites"): 1.25 to 2 gave the
# same F1 within 0.01 on every corpus; 1 lost LilyPond's web site a fifth of its recall.
SHARE_MARGIN = 1.5
Vector = dict[str, float]


def inverse_document_frequencies(documents: Iterable[Mapping[str, float]]) -> tuple[dict[str, float], float]:
    """Each term's IDF over ``documents``, and the IDF of a term none of them holds."""
    frequency: Counter[str] = Counter()
    total = 0
    for document in documents:
        frequency.update(document.keys())
        total += 1
    idf = {term: math.log((total + 1) / (count + 1)) + 1 for term, count in frequency.items()}
    return idf, math.log(total + 1) + 1


def sublinear(count: float) -> float:
    """``1 + ln c`` from one occurrence on; a fraction of one (a weight below 1) as is."""
    return 1 + math.log(count) if count >= 1 else count


def unit_vector(counts: Mapping[str, float], idf: Mapping[str, float], unseen_idf: float) -> Vector:
    vector = {term: sublinear(count) * idf.get(term, unseen_idf) for term, count in counts.items() if count > 0}
    length = math.sqrt(sum(value * value for value in vector.values()))
    return {term: value / length for term, value in vector.items()} if length else {}


def mean_vector(vectors: Sequence[Vector]) -> Vector:
    total: Counter[str] = Counter()
    for vector in vectors:
        total.update(vector)
    return {term: value / len(vectors) for term, value in total.items()} if vectors else {}


def direction(positives: Sequence[Vector], background: Vector) -> Vector:
    """The mean of ``positives`` minus ``background`` (a mean vector), zeros dropped."""
    weights = mean_vector(positives)
    for term, value in background.items():
        weights[term] = weights.get(term, 0.0) - value
    return {term: value for term, value in weights.items() if value != 0.0}


def norm(vector: Mapping[str, float]) -> float:
    return math.sqrt(sum(value * value for value in vector.values()))


def dot(weights: Mapping[str, float], vector: Mapping[str, float]) -> float:
    return sum(weights.get(term, 0.0) * value for term, value in vector.items())


def cosine(weights: Mapping[str, float], weights_norm: float, vector: Mapping[str, float]) -> float:
    return dot(weights, vector) / weights_norm if weights_norm else 0.0


def held_out_scores(positives: Sequence[Vector], background: Vector, folds: int = FOLDS) -> list[float]:
    """Each positive's score under the direction learnt from the other folds' positives
    (one fold per positive when there are fewer than ``folds``)."""
    count = len(positives)
    folds = min(folds, count)
    scores = [0.0] * count
    for fold in range(folds):
        kept = [vector for index, vector in enumerate(positives) if index % folds != fold]
        weights = direction(kept, background)
        weights_norm = norm(weights)
        for index in range(fold, count, folds):
            scores[index] = cosine(weights, weights_norm, positives[index])
    return scores


def recall_threshold(scores: Sequence[float], target_recall: float) -> float:
    """The score that a new page like those ``scores`` were drawn from reaches with
    probability ``target_recall``: the lower bound of the prediction interval of a
    normal sample, ``mean - t(n - 1) * sd * sqrt(1 + 1/n)`` (at least two scores). Ten
    samples make a coarse ladder of order statistics; their mean and spread move less
    from one choice of samples to the next, and Student's t widens the bound when
    there are few of them."""
    count = len(scores)
    spread = statistics.stdev(scores) * math.sqrt(1 + 1 / count)
    return statistics.fmean(scores) - student_t_quantile(target_recall, count - 1) * spread


def calibrated_threshold(held_out: Sequence[float], background: Sequence[float], target_recall: float) -> float:
    """:func:`recall_threshold` of the samples' held-out scores, but never above the
    midpoint of their mean and the background's mean score: samples that all look alike
    (two copies of one page) would otherwise ask every page to look like them too."""
    threshold = recall_threshold(held_out, target_recall)
    if background:
        threshold = min(threshold, (statistics.fmean(held_out) + statistics.fmean(background)) / 2)
    return threshold


def single_sample_threshold(own: float, background: Sequence[float]) -> float:
    """With one sample, nothing can be held out: half its own score, and at most halfway
    between it and the background's mean score."""
    threshold = own / 2
    if background:
        threshold = min(threshold, (own + statistics.fmean(background)) / 2)
    return threshold


def expected_recall(held_out: Sequence[float], threshold: float, bandwidth: float = RECALL_BANDWIDTH) -> float:
    """The share of pages like the held-out samples that score ``threshold`` or more:
    each held-out score smoothed by a normal kernel ``bandwidth`` standard deviations
    wide (a plain count when the scores do not spread)."""
    width = bandwidth * statistics.stdev(held_out) if len(held_out) > 1 else 0.0
    if not width:
        return sum(score >= threshold for score in held_out) / len(held_out)
    normal = statistics.NormalDist()
    return statistics.fmean(normal.cdf((score - threshold) / width) for score in held_out)


def f1_threshold(held_out: Sequence[float], background: Sequence[float], prior: float) -> float:
    """The threshold, among the held-out and background scores, that maximises the F1
    expected over pages drawn like the ``background``, of which a share ``prior`` is on
    the topic: with recall r (:func:`expected_recall`) and a share s of the background
    at or above the threshold, precision is ``prior * r / s``, and F1 is
    ``2 * prior * r / (s + prior)``. The threshold is at most the background's highest
    score, so that the crawl keeps some page."""
    count = len(background)
    prior = max(prior, 1 / count)
    ordered = sorted(background)
    best_threshold, best_value = ordered[0], -1.0
    # Never above the whole background: held-out scores above every background page
    # would promise a precision above 1 at a threshold that keeps no page of the crawl.
    for threshold in sorted(score for score in {*held_out, *background} if score <= ordered[-1]):
        above = (count - bisect.bisect_left(ordered, threshold)) / count
        value = expected_recall(held_out, threshold) / (above + prior)
        if value > best_value:
            best_threshold, best_value = threshold, value
    return best_threshold


def topic_share(held_out: Sequence[float], background: Sequence[float]) -> float:
    """The share of the pages drawn like ``background`` that are on the topic, its pages
    scoring as the ``held_out`` samples do. At any threshold, the background's share at
    or above it is at least the topic's share times the samples' expected recall there
    (:func:`expected_recall`): the smallest ratio of the two, over the thresholds that
    at least :data:`SHARE_RECALL_FLOOR` of the samples reach, is the estimate, exact
    where no page off the topic reaches the threshold (Blanchard, Lee and Scott, 2010;
    Scott, 2015). It holds when the samples differ from one another, where the score
    most samples reach lies among the background's own scores. 0 for no background; 1
    where no threshold qualifies (the samples' scores tied low, the whole background
    above most of them)."""
    count = len(background)
    if not count:
        return 0.0
    ordered = sorted(background)
    share = 1.0
    for threshold in sorted({*held_out, *background}):
        recall = expected_recall(held_out, threshold)
        if recall < SHARE_RECALL_FLOOR:
            break  # recall only falls as the threshold rises
        above = (count - bisect.bisect_left(ordered, threshold)) / count
        share = min(share, above / recall)
    return share


def assumed_share(held_out: Sequence[float], background: Sequence[float]) -> float:
    """The topic's share :func:`f1_threshold` assumes: :func:`topic_share` times
    :data:`SHARE_MARGIN`, at most 1."""
    return min(1.0, SHARE_MARGIN * topic_share(held_out, background))


def split_by_share(vectors: Sequence[Vector], scores: Sequence[float], share: float) -> tuple[list[Vector], list[Vector]]:
    """``vectors`` but the ``share`` of them that score highest (``scores``, one each):
    the likely negatives; and those, likely on the topic. Ties go by order, so the same
    background always splits the same way."""
    if len(scores) != len(vectors):
        raise ValueError(f"{len(scores)} scores for {len(vectors)} vectors")
    ranked = sorted(range(len(vectors)), key=lambda index: -scores[index])
    likely = set(ranked[: round(share * len(vectors))])
    return ([vector for index, vector in enumerate(vectors) if index not in likely],
            [vector for index, vector in enumerate(vectors) if index in likely])


def student_t_quantile(probability: float, freedom: int) -> float:
    """Student's t quantile, by the Cornish-Fisher expansion around the normal one
    (Abramowitz and Stegun 26.7.5): within 4% for 1 degree of freedom, 0.1% from 5 on."""
    z = statistics.NormalDist().inv_cdf(probability)
    n = float(freedom)
    return (z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3))


def left_out_scores(positives: Sequence[Vector], vectors: Sequence[Vector], known: Sequence[Vector] = ()) -> list[float]:
    """Each of ``vectors``' score under the direction learnt from ``positives`` against
    every other background vector (the other ``vectors`` and the ``known`` ones): each is
    left out of the background it is scored against, as a page of the crawl is. Scored
    with itself in the background, a page scores lower than a page of the crawl like it.
    A vector with no terms scores 0, as it does under any direction."""
    everything = [*vectors, *known]
    others = len(everything) - 1
    if others < 1:  # the background without it is empty
        alone = direction(positives, {})
        return [cosine(alone, norm(alone), vector) for vector in vectors]
    # Without vector v (of length 1), the direction is base + v / others, where base is
    # the positives' mean minus the sum of the background over ``others``: its dot
    # product with v and its length follow from base's, with no pass over the vocabulary.
    base = direction(positives, {term: value * (others + 1) / others for term, value in mean_vector(everything).items()})
    base_squared = sum(value * value for value in base.values())
    scores = []
    for vector in vectors:
        along = dot(base, vector)
        length = math.sqrt(max(base_squared + 2 * along / others + 1 / others**2, 0.0))
        scores.append((along + 1 / others) / length if vector and length else 0.0)
    return scores


def split_background(positives: Sequence[Vector], unlabelled: Sequence[Vector], known: Sequence[Vector],
                     threshold: float) -> tuple[list[Vector], list[Vector]]:
    """The ``unlabelled`` vectors that score below ``threshold`` (:func:`left_out_scores`,
    against ``unlabelled`` and the ``known`` negatives): the likely negatives; and those
    that reach it, likely on the topic."""
    negatives: list[Vector] = []
    likely_positive: list[Vector] = []
    for vector, score in zip(unlabelled, left_out_scores(positives, unlabelled, known), strict=True):
        (negatives if score < threshold else likely_positive).append(vector)
    return negatives, likely_positive

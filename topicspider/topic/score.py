"""Topic relevance of a page, with no Scrapy dependency.

A page is read as its title and its blocks of text, less the blocks of its site's
template (:mod:`topicspider.topic.template`). Two kinds of topic score it:

* ``centroid`` (:mod:`topicspider.topic.centroid`), learnt from sample pages against a
  background: the cosine of the page's TF-IDF vector and the topic's direction, from
  -1 to 1, a title term counting ``title_weight`` times a body one. Each short block
  of the page (a heading, a breadcrumb, a chapter's name: :func:`short_blocks`) is a
  term of its own too, counting ``block_weight``: sibling sections of a site share
  their words but not the markers their pages repeat.
* ``lexicon``, the seed documents' model: a weighted term list, given as keywords or
  trained from samples with the seeds' formula (:mod:`topicspider.topic.lexicon`). The
  title's and the body's counts of the topic's terms are compared with the weights by
  cosine, B for the title and C for the body, and the relevance is
  ``A = title_weight * B + body_weight * C`` (the seeds' ``A = 4B + C``), from 0 to 5.

Each topic has its own threshold: a trained one is calibrated on its samples held out
by cross-validation and on the background (the threshold of the best F1 expected, or
the score ``target_recall`` of the samples reach when held out); keywords,
which come with no samples, use :data:`KEYWORD_THRESHOLD`. Each score comes with the
terms that weighed most in it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field

from topicspider.topic import centroid
from topicspider.topic.lexicon import Lexicon, train_lexicon, without_negative_terms
from topicspider.topic.segment import Segmenter, found_in_lower_case_only
from topicspider.topic.template import SiteTemplates

KINDS = ("centroid", "lexicon")
# The threshold of a keyword topic: the best of the evaluation's keyword topics (see
# docs/topic.md, "Evaluation on real sites"); a title holding one of up to a dozen keywords
# reaches it, and so does a body whose topic-term profile is close to the topic's.
KEYWORD_THRESHOLD = 0.6
EXPLAIN_TERMS = 5
# A short block is a term of a centroid topic of its own, written as this mark and the
# block's lower-cased text (a segmenter's terms never hold it).
BLOCK_TERM = "\u00b6"
# Longer blocks are paragraphs: their words count, not their text.
BLOCK_TERM_MAX_CHARS = 80


@dataclass(frozen=True, slots=True)
class Relevance:
    score: float
    terms: tuple[tuple[str, float], ...] = ()  # the terms that weighed most, heaviest first

    def explain(self) -> str:
        """``term score, term score...``: what the fetch log and the database show."""
        return ", ".join(f"{term} {weight:.3f}" for term, weight in self.terms)


@dataclass(frozen=True)
class Doc:
    """A page's term counts, title and body apart, and its short blocks
    (:func:`short_blocks`)."""

    title: Mapping[str, float]
    body: Mapping[str, float]
    blocks: frozenset[str] = frozenset()

    def weighted(self, title_weight: float, body_weight: float, block_weight: float = 0.0,
                 known_blocks: Container[str] = ()) -> dict[str, float]:
        """Each term's count, a title term counting ``title_weight`` and a body one
        ``body_weight``; with a ``block_weight``, each short block among ``known_blocks``
        is a term of its own (:data:`BLOCK_TERM`), counted that many times."""
        counts: dict[str, float] = {term: body_weight * count for term, count in self.body.items()}
        for term, count in self.title.items():
            counts[term] = counts.get(term, 0.0) + title_weight * count
        if block_weight:
            for block in self.blocks:
                if block in known_blocks:
                    counts[BLOCK_TERM + block] = block_weight
        return counts

    def merged(self) -> Counter[str]:
        return Counter(self.body) + Counter(self.title)


def short_blocks(blocks: Sequence[str], max_chars: int) -> frozenset[str]:
    """The blocks of at most :data:`BLOCK_TERM_MAX_CHARS` that start within the first
    ``max_chars`` characters of ``blocks``, lower-cased: a page's headings, breadcrumbs
    and menu entries. Those a section repeats on its pages and the rest of the site does
    not (a chapter's name above each of its pages, a breadcrumb) say which section a
    page belongs to when its words do not."""
    found = set()
    read = 0
    for block in blocks:
        if read >= max_chars:
            break
        read += len(block) + 1
        if len(block) <= BLOCK_TERM_MAX_CHARS and block.strip():
            found.add(block.lower())
    return frozenset(found)


def read_text_doc(segmenter: Segmenter, title: str, text: str, max_chars: int) -> Doc:
    """The term counts of a page known only as text (a stored page): no short blocks."""
    return Doc(segmenter.term_counts(title[:max_chars]), segmenter.term_counts(text[:max_chars]))


def read_doc(segmenter: Segmenter, title: str, blocks: Sequence[str], max_chars: int) -> Doc:
    """The term counts of the first ``max_chars`` of a page's title and of its blocks,
    and its short blocks."""
    return read_doc_tokens(segmenter, title, blocks, max_chars)[0]


@dataclass(frozen=True)
class PageTokens:
    """The tokens (:meth:`Segmenter.tokens`) a topic's score was counted from, and
    whether the page's title and its blocks were read whole: the page's search index
    terms are counted from them, not from a second cut of the page."""

    title: list[str]
    body: list[str]
    whole: bool


def cut_page(cut: Callable[[str], list[str]], title: str, blocks: Sequence[str], max_chars: int) -> PageTokens:
    """The first ``max_chars`` of a page's title and of its ``blocks`` joined, cut."""
    text = " ".join(blocks)
    return PageTokens(cut(title[:max_chars]), cut(text[:max_chars]), len(title) <= max_chars and len(text) <= max_chars)


def read_doc_tokens(segmenter: Segmenter, title: str, blocks: Sequence[str], max_chars: int) -> tuple[Doc, PageTokens]:
    """:func:`read_doc`, and the tokens it was counted from."""
    tokens = cut_page(segmenter.tokens, title, blocks, max_chars)
    doc = Doc(segmenter.counts_of_tokens(tokens.title), segmenter.counts_of_tokens(tokens.body),
              short_blocks(blocks, max_chars))
    return doc, tokens


# A page is counted whole while sampled when its text is at most this many times
# TOPIC_MAX_CHARS: longer, little chance that its content (the text less the site's
# template) is short enough to be read whole.
COUNTED_TEXT_FACTOR = 2


@dataclass(frozen=True)
class PageTerms:
    """A page's term counts, read before its site's template is known: the title's, and
    the text's (its blocks joined, template included)."""

    title: Counter[str]
    text: Counter[str]


def count_page_terms(segmenter: Segmenter, title: str, blocks: Sequence[str], max_chars: int) -> PageTerms | None:
    """The page's terms, or None for a page too long to be worth it: its template would
    have to make up over half of it for the counts to serve (:func:`doc_without_template`)."""
    text = " ".join(blocks)
    if len(text) > COUNTED_TEXT_FACTOR * max_chars or len(title) > max_chars:
        return None
    return PageTerms(segmenter.term_counts(title), segmenter.term_counts(text))


def doc_without_template(segmenter: Segmenter, terms: PageTerms, content: Sequence[str], template: Sequence[str],
                         block_terms: dict[str, Counter[str]], max_chars: int) -> Doc | None:
    """What :func:`read_doc` gives for the page's ``content`` blocks, from the counts of
    its whole text less those of its ``template`` blocks (``block_terms`` caches each
    block's counts); None when the content is longer than ``max_chars``, since where the
    cut falls is for :func:`read_doc` to say. Blocks are joined by a space, where a
    segmenter always ends a word, so counts add up."""
    if len(" ".join(content)) > max_chars:
        return None
    body = Counter(terms.text)
    for block in template:
        counts = block_terms.get(block)
        if counts is None:
            counts = block_terms[block] = segmenter.term_counts(block)
        body.subtract(counts)
    return Doc(terms.title, +body, short_blocks(content, max_chars))


@dataclass
class TopicSpec:
    """What a topic is given as or learnt from: what a topic file keeps."""

    kind: str  # "centroid" or "lexicon"; keywords are a lexicon with no samples
    lexicon: Lexicon | None = None  # the keywords
    samples: list[Doc] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where each sample came from
    negatives: list[Doc] = field(default_factory=list)
    background: list[Doc] = field(default_factory=list)
    templates: SiteTemplates = field(default_factory=SiteTemplates)
    title_weight: float = 4.0
    body_weight: float = 1.0
    block_weight: float = 0.0  # a centroid topic's short blocks as terms (TOPIC_BLOCK_WEIGHT); 0: none
    top_k: int = 100
    target_recall: float = 0.9

    @property
    def keywords(self) -> bool:
        return self.lexicon is not None


def counts_cosine(counts: Mapping[str, float], lexicon: Lexicon) -> float:
    """Cosine of ``counts`` (of the lexicon's terms only) and the lexicon's weights."""
    weights = lexicon.weights
    if not counts:
        return 0.0
    dot = sum(count * weights[term] for term, count in counts.items())
    length = math.sqrt(sum(count * count for count in counts.values()))
    return dot / (length * lexicon.norm) if length else 0.0


def lexicon_contributions(lexicon: Lexicon, title: Mapping[str, float], body: Mapping[str, float],
                          title_weight: float, body_weight: float) -> Counter[str]:
    """Each topic term's share of ``A = title_weight * B + body_weight * C``."""
    weights = lexicon.weights
    contributions: Counter[str] = Counter()
    for counts, field_weight in ((title, title_weight), (body, body_weight)):
        found = {term: count for term, count in counts.items() if term in weights}
        length = math.sqrt(sum(count * count for count in found.values()))
        for term, count in found.items():
            contributions[term] += field_weight * count * weights[term] / (length * lexicon.norm)
    return contributions


def heaviest(contributions: Mapping[str, float], count: int) -> tuple[tuple[str, float], ...]:
    best = sorted(((term, value) for term, value in contributions.items() if value > 0), key=lambda pair: (-pair[1], pair[0]))
    return tuple(best[:count])


class Topic:
    """What every kind shares: reading a page's words, less its site's template."""

    kind = ""
    threshold = 0.0
    min_score = 0.0
    max_score = 1.0

    def __init__(self, segmenter: Segmenter, templates: SiteTemplates, title_weight: float, body_weight: float,
                 max_chars: int, explain_terms: int = EXPLAIN_TERMS) -> None:
        self.segmenter = segmenter
        self.templates = templates
        self.title_weight = title_weight
        self.body_weight = body_weight
        self.max_chars = max_chars
        self.explain_terms = explain_terms

    def relevance(self, title: str, blocks: Sequence[str], site: str = "") -> Relevance:
        """The score of a page of ``site`` with this ``title`` and these ``blocks``."""
        raise NotImplementedError

    def relevance_with_tokens(self, title: str, blocks: Sequence[str], site: str = "") -> tuple[Relevance, PageTokens | None]:
        """:meth:`relevance`, and the tokens of the page's title and content (its blocks
        less the template) when this kind counts its terms from a cut of them."""
        return self.relevance(title, blocks, site), None

    def similarity(self, text: str) -> float:
        """How close a short text (a link's anchor) is to the topic, from 0 to 1."""
        raise NotImplementedError

    def weights(self) -> Mapping[str, float]:
        """Each term's weight in the topic."""
        raise NotImplementedError

    def top_terms(self, count: int) -> list[tuple[str, float]]:
        """The ``count`` heaviest terms, heaviest first."""
        return list(heaviest(self.weights(), count))



class LexiconTopic(Topic):
    """The seeds' ``A = title_weight * B + body_weight * C`` over a weighted term list."""

    kind = "lexicon"

    def __init__(self, lexicon: Lexicon, segmenter: Segmenter, templates: SiteTemplates | None = None,
                 title_weight: float = 4.0, body_weight: float = 1.0, max_chars: int = 10_000,
                 threshold: float = KEYWORD_THRESHOLD, explain_terms: int = EXPLAIN_TERMS) -> None:
        super().__init__(segmenter, templates or SiteTemplates(), title_weight, body_weight, max_chars, explain_terms)
        self.lexicon = lexicon
        self.threshold = threshold
        self.max_score = title_weight + body_weight
        segmenter.add_words(lexicon.weights)
        # A keyword such as "iphone手机" is in the dictionary lower-cased: only the cut of
        # lower-cased text finds it in "iPhone手机". Other topics cut the text as it is,
        # as the search index does, so that the page's index terms come from this cut.
        self.cuts_lower_case = any(map(found_in_lower_case_only, lexicon.weights))

    def relevance(self, title: str, blocks: Sequence[str], site: str = "") -> Relevance:
        return self.relevance_with_tokens(title, blocks, site)[0]

    def relevance_with_tokens(self, title: str, blocks: Sequence[str], site: str = "") -> tuple[Relevance, PageTokens | None]:
        tokens = cut_page(self._cut, title, self.templates.content(site, blocks), self.max_chars)
        relevance = self.relevance_of_counts(self._count(tokens.title), self._count(tokens.body))
        return relevance, None if self.cuts_lower_case else tokens

    def relevance_of_counts(self, title: Mapping[str, float], body: Mapping[str, float]) -> Relevance:
        contributions = lexicon_contributions(self.lexicon, title, body, self.title_weight, self.body_weight)
        return Relevance(sum(contributions.values()), heaviest(contributions, self.explain_terms))

    def similarity(self, text: str) -> float:
        return counts_cosine(self._count(self._cut(text[: self.max_chars])), self.lexicon) if text else 0.0

    def weights(self) -> Mapping[str, float]:
        return self.lexicon.weights

    def _cut(self, text: str) -> list[str]:
        if not text:
            return []
        return self.segmenter.tokens(text.lower() if self.cuts_lower_case else text)

    def _count(self, tokens: list[str]) -> Counter[str]:
        return self.segmenter.count_tokens(tokens, self.lexicon.weights)


class CentroidTopic(Topic):
    """The cosine of a page's TF-IDF vector and the topic's direction."""

    kind = "centroid"
    min_score = -1.0  # a cosine, and the direction weighs the background's terms below 0

    def __init__(self, spec: TopicSpec, segmenter: Segmenter, max_chars: int = 10_000,
                 explain_terms: int = EXPLAIN_TERMS) -> None:
        super().__init__(segmenter, spec.templates, spec.title_weight, spec.body_weight, max_chars, explain_terms)
        if not spec.samples:
            raise ValueError("a centroid topic needs samples")
        self.block_weight = spec.block_weight
        self.shared_blocks = shared_blocks([*spec.samples, *spec.background, *spec.negatives])
        weighted = [[self._weighted(doc) for doc in docs] for docs in (spec.samples, spec.background, spec.negatives)]
        self.idf, self.unseen_idf = centroid.inverse_document_frequencies([counts for docs in weighted for counts in docs])
        positives, unlabelled, negatives = ([self._vector(counts) for counts in docs] for docs in weighted)
        self.background_kept = 0  # background pages kept as likely negatives
        if not unlabelled:
            self._learn(positives, negatives, spec.target_recall)
            return
        # Each sample scored against the whole background, in both steps: against the
        # background the first step kept, the held-out scores come out higher than those
        # of the crawl's pages on the topic, and the threshold too high (measured: see
        # docs/topic.md, "Evaluation on real sites").
        held_out = self._spread_held_out(positives, centroid.mean_vector([*unlabelled, *negatives]))
        if held_out is None:
            self._learn(positives, [*unlabelled, *negatives], spec.target_recall)  # its threshold splits
        kept, likely_positive = self._split_background(positives, unlabelled, negatives, held_out)
        self.background_kept = len(kept)
        self._learn(positives, [*kept, *negatives], spec.target_recall)
        if held_out is not None:
            self.threshold = self._f1_threshold(positives, kept, likely_positive, negatives, held_out)

    def _split_background(self, positives: list[centroid.Vector], unlabelled: list[centroid.Vector],
                          negatives: list[centroid.Vector], held_out: list[float] | None,
                          ) -> tuple[list[centroid.Vector], list[centroid.Vector]]:
        """The background as likely negatives and pages likely on the topic: the pages
        that score highest, each without itself, as many as :func:`centroid.topic_share`
        says the topic is of it. Without ``held_out`` scores to say how recall falls,
        those at or above the first step's threshold are likely on the topic."""
        if held_out is None:
            return centroid.split_background(positives, unlabelled, negatives, self.threshold)
        scores = centroid.left_out_scores(positives, unlabelled, negatives)
        return centroid.split_by_share(unlabelled, scores, centroid.topic_share(held_out, scores))

    def _f1_threshold(self, positives: list[centroid.Vector], kept: list[centroid.Vector],
                      likely_positive: list[centroid.Vector], negatives: list[centroid.Vector],
                      held_out: list[float]) -> float:
        """:func:`centroid.f1_threshold`: the unlabelled background stands for the crawl's
        pages, and :func:`centroid.assumed_share` of it for the topic's share. The
        background pages the direction was learnt against (``kept``) are scored each
        without itself, as the crawl's pages will be."""
        scores = [*centroid.left_out_scores(positives, kept, negatives),
                  *(centroid.cosine(self.direction, self.direction_norm, vector) for vector in likely_positive)]
        return centroid.f1_threshold(held_out, scores, centroid.assumed_share(held_out, scores))

    @staticmethod
    def _spread_held_out(positives: list[centroid.Vector], background: centroid.Vector) -> list[float] | None:
        """Each sample's score under the direction learnt from the others against the
        ``background`` mean; None with fewer than :data:`centroid.MIN_F1_SAMPLES` samples
        or held-out scores that do not spread: they cannot say how recall falls, and two
        copies of one page would ask every page to score as they do. Without them the
        first step's threshold splits the background and stays."""
        if len(positives) < centroid.MIN_F1_SAMPLES:
            return None
        held_out = centroid.held_out_scores(positives, background, folds=len(positives))
        return held_out if len(set(held_out)) > 1 else None

    def _learn(self, positives: list[centroid.Vector], background: list[centroid.Vector], target_recall: float) -> None:
        mean = centroid.mean_vector(background)
        self.direction = centroid.direction(positives, mean)
        self.direction_norm = centroid.norm(self.direction)
        background_scores = [centroid.cosine(self.direction, self.direction_norm, vector) for vector in background]
        if len(positives) > 1:
            held_out = centroid.held_out_scores(positives, mean)
            self.threshold = centroid.calibrated_threshold(held_out, background_scores, target_recall)
        else:
            own = centroid.cosine(self.direction, self.direction_norm, positives[0])
            self.threshold = centroid.single_sample_threshold(own, background_scores)

    def relevance(self, title: str, blocks: Sequence[str], site: str = "") -> Relevance:
        return self.relevance_with_tokens(title, blocks, site)[0]

    def relevance_with_tokens(self, title: str, blocks: Sequence[str], site: str = "") -> tuple[Relevance, PageTokens | None]:
        doc, tokens = read_doc_tokens(self.segmenter, title, self.templates.content(site, blocks), self.max_chars)
        return self.relevance_of_doc(doc), tokens

    def relevance_of_doc(self, doc: Doc) -> Relevance:
        if not self.direction_norm:
            return Relevance(0.0)
        # The page's vector, its length and its dot product with the direction in one
        # pass over its terms (this runs for every page).
        idf, unseen, direction, log = self.idf, self.unseen_idf, self.direction, math.log
        dot = squares = 0.0
        products: dict[str, float] = {}
        for term, count in self._weighted(doc).items():
            value = (1 + log(count) if count >= 1 else count) * idf.get(term, unseen)
            squares += value * value
            weight = direction.get(term)
            if weight:
                dot += weight * value
                if weight > 0:
                    products[term] = weight * value
        if not squares:
            return Relevance(0.0)
        scale = 1 / (math.sqrt(squares) * self.direction_norm)
        return Relevance(dot * scale, tuple((term, product * scale) for term, product in heaviest(products, self.explain_terms)))

    def similarity(self, text: str) -> float:
        if not text:
            return 0.0
        vector = self._vector(self.segmenter.term_counts(text[: self.max_chars]))
        return max(0.0, centroid.cosine(self.direction, self.direction_norm, vector))

    def weights(self) -> Mapping[str, float]:
        return self.direction

    def _vector(self, counts: Mapping[str, float]) -> centroid.Vector:
        return centroid.unit_vector(counts, self.idf, self.unseen_idf)

    def _weighted(self, doc: Doc) -> dict[str, float]:
        return doc.weighted(self.title_weight, self.body_weight, self.block_weight, self.shared_blocks)


def shared_blocks(docs: Sequence[Doc]) -> frozenset[str]:
    """The short blocks found on at least two of ``docs``. A block of one page alone (a
    sentence, a caption) says nothing of any other page, yet as a term it would weigh in
    the length of its page's vector, and shrink the score of a page of many short
    paragraphs."""
    counts = Counter(block for doc in docs for block in doc.blocks)
    return frozenset(block for block, count in counts.items() if count >= 2)


def trained_lexicon(samples: Sequence[Doc], negatives: Sequence[Doc], top_k: int) -> Lexicon:
    merged = [doc.merged() for doc in samples]
    lexicon = train_lexicon(merged, top_k)
    return without_negative_terms(lexicon, merged, [doc.merged() for doc in negatives])


def build_topic(spec: TopicSpec, segmenter: Segmenter, max_chars: int = 10_000,
                explain_terms: int = EXPLAIN_TERMS) -> Topic:
    """The topic ``spec`` describes: trained now when it holds samples."""
    if spec.lexicon is not None:
        return LexiconTopic(spec.lexicon, segmenter, spec.templates, spec.title_weight, spec.body_weight, max_chars,
                            KEYWORD_THRESHOLD, explain_terms)
    if spec.kind == "centroid":
        return CentroidTopic(spec, segmenter, max_chars, explain_terms)
    lexicon = trained_lexicon(spec.samples, spec.negatives, spec.top_k)
    topic = LexiconTopic(lexicon, segmenter, spec.templates, spec.title_weight, spec.body_weight, max_chars,
                         KEYWORD_THRESHOLD, explain_terms)
    topic.threshold = _lexicon_threshold(topic, spec)
    return topic


def _lexicon_threshold(topic: LexiconTopic, spec: TopicSpec) -> float:
    """Each sample scored by the lexicon learnt from the other folds' samples; the score
    ``target_recall`` of such pages reach, as for a centroid topic."""
    samples = spec.samples
    background = [topic.relevance_of_counts(doc.title, doc.body).score for doc in [*spec.background, *spec.negatives]]
    if len(samples) < 2:
        return centroid.single_sample_threshold(topic.relevance_of_counts(samples[0].title, samples[0].body).score,
                                                background)
    folds = min(centroid.FOLDS, len(samples))
    scores = []
    for fold in range(folds):
        lexicon = trained_lexicon([doc for index, doc in enumerate(samples) if index % folds != fold],
                                  spec.negatives, spec.top_k)
        scores += [sum(lexicon_contributions(lexicon, doc.title, doc.body, topic.title_weight, topic.body_weight).values())
                   for doc in samples[fold::folds]]
    return centroid.calibrated_threshold(scores, background, spec.target_recall)

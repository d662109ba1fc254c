"""A trained topic learnt from the pages gathered for it, with no Scrapy dependency.

:class:`topicspider.focus.TopicBuilder` gathers the samples, negatives, labelled pages
and background sample, and the sites' templates; counting their terms needs the
segmenter's dictionary (57 MB, about a fifth of a second of CPU to load, the GIL held
all along), which the page-analysis processes hold already. So :func:`learn` runs in one of
them (:meth:`topicspider.pagepool.PagePool.run`), and the crawler's own process never
loads a dictionary for a trained topic; without such processes, it runs on a thread.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from topicspider.config import ConfigError
from topicspider.storage.labels import LabelledPage
from topicspider.topic.score import (
    Doc,
    PageTerms,
    Topic,
    TopicSpec,
    build_topic,
    doc_without_template,
    read_doc,
    read_text_doc,
)
from topicspider.topic.segment import Segmenter
from topicspider.topic.template import SiteTemplates
from topicspider.urls import site_of


@dataclass
class SampledPage:
    url: str
    site: str
    title: str
    blocks: list[str]
    terms: PageTerms | None = None  # counted as the page was read


@dataclass(frozen=True)
class Learning:
    """What a trained topic is learnt from, and how (the ``TOPIC_*`` settings)."""

    model: str
    samples: list[SampledPage]
    sources: list[str]  # the samples' URLs or paths, as given
    negatives: list[SampledPage]
    background: list[SampledPage]
    labelled: list[LabelledPage]
    templates: SiteTemplates
    saved: TopicSpec | None  # a saved topic learnt again with more pages
    title_weight: float
    body_weight: float
    block_weight: float
    top_k: int
    target_recall: float
    max_chars: int
    explain_terms: int


def learn(learning: Learning, segmenter: Segmenter) -> tuple[TopicSpec, Topic]:
    """The topic's spec (the pages' term counts) and the topic learnt from it; raise
    :class:`ConfigError` when a sample holds no words or nothing is on the topic."""
    segmenter.load()  # at once in a page-analysis process, which has loaded it
    spec = learnt_spec(learning, segmenter)
    return spec, build_topic(spec, segmenter, learning.max_chars, learning.explain_terms)


def learnt_spec(learning: Learning, segmenter: Segmenter) -> TopicSpec:
    templates, max_chars = learning.templates, learning.max_chars
    block_terms: dict[str, Counter[str]] = {}

    def doc_of(page: SampledPage) -> Doc:
        content = templates.content(page.site, page.blocks)
        if page.terms is not None:
            doc = doc_without_template(segmenter, page.terms, content, templates.template_blocks(page.site, page.blocks),
                                       block_terms, max_chars)
            if doc is not None:
                return doc
        return read_doc(segmenter, page.title, content, max_chars)

    def labelled_docs(relevant: bool) -> list[Doc]:
        # Stored pages keep their text, not its blocks: the template comes out of it as
        # text, and they bring no short blocks (a centroid's block terms) of their own.
        return [read_text_doc(segmenter, page.title, templates.text_content(site_of(page.url), page.text), max_chars)
                for page in learning.labelled if page.relevant is relevant]

    sample_docs = [doc_of(page) for page in learning.samples]
    for source, doc in zip(learning.sources, sample_docs, strict=True):
        if not (doc.title or doc.body):
            raise ConfigError(f"training sample {source} holds no words to learn from")
    negative_docs = [doc_of(page) for page in learning.negatives]
    labelled_yes, labelled_no = labelled_docs(True), labelled_docs(False)
    sources = [*learning.sources, *(page.url for page in learning.labelled if page.relevant)]
    saved = learning.saved
    if saved is not None:
        return replace(saved, samples=[*saved.samples, *sample_docs, *labelled_yes],
                       sources=[*saved.sources, *sources], negatives=[*saved.negatives, *negative_docs, *labelled_no])
    if not sample_docs and not labelled_yes:
        raise ConfigError("nothing to learn the topic from: no sample, and no page labelled relevant")
    return TopicSpec(learning.model, samples=[*sample_docs, *labelled_yes], sources=sources,
                     negatives=[*negative_docs, *labelled_no], background=[doc_of(page) for page in learning.background],
                     templates=templates, title_weight=learning.title_weight, body_weight=learning.body_weight,
                     block_weight=learning.block_weight, top_k=learning.top_k, target_recall=learning.target_recall)

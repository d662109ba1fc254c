"""Topic files, with no Scrapy dependency: a hand-written keyword file, or a trained
topic saved by ``scrapy topic-train -o``.

* A keyword file holds ``term weight`` lines (weight 1 when left out, ``#`` comments):
  :func:`topicspider.topic.lexicon.parse_lexicon`.
* A saved topic is JSON: its format name and version, its kind (``centroid`` or
  ``lexicon``), the segmenter it was cut with, its weights, and what it was learnt
  from: each sample's and negative's term counts, the background pages' counts and the
  sites' templates, and (version 2) each page's short blocks and their weight. A
  version-1 file reads as a topic without block terms. A topic is trained again from
  these when it is read, so a saved topic can be retrained with more labelled pages
  (``scrapy topic-train -a labels=``). ``threshold`` and ``terms`` are there for people
  to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topicspider.config import ConfigError
from topicspider.topic.lexicon import parse_lexicon
from topicspider.topic.score import KINDS, Doc, Topic, TopicSpec
from topicspider.topic.template import SiteTemplates

FORMAT = "topicspider-topic"
VERSION = 2
# Version 1, from before block terms, is still read.
READABLE_VERSIONS = (1, VERSION)
SHOWN_TERMS = 30


@dataclass(frozen=True)
class TopicFile:
    spec: TopicSpec
    segmenter: str | None  # None for a keyword file, which any segmenter reads
    path: str


def read_topic_file(path: Path) -> TopicFile:
    """A keyword file or a saved topic; :class:`ConfigError` for anything else."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read topic file {str(path)!r}: {exc}") from None
    if not text.lstrip().startswith("{"):
        return TopicFile(TopicSpec("lexicon", lexicon=parse_lexicon(text, str(path))), None, str(path))
    try:
        return _decode(json.loads(text), str(path))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"topic file {str(path)!r} is not a topicspider topic: {type(exc).__name__}: {exc}") from None


def _decode(data: Any, path: str) -> TopicFile:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"topic file {path!r} is JSON but not a topicspider topic (no \"format\": \"{FORMAT}\")")
    if data.get("version") not in READABLE_VERSIONS:
        raise ConfigError(f"topic file {path!r} has version {data.get('version')!r}; this topicspider reads "
                          f"versions {', '.join(map(str, READABLE_VERSIONS))}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"topic file {path!r} is of an unknown kind {kind!r} (known: {', '.join(KINDS)})")
    samples = [_doc(entry) for entry in data["samples"]]
    if not samples:
        raise ConfigError(f"topic file {path!r} holds no samples")
    spec = TopicSpec(
        kind=kind,
        samples=samples,
        sources=[str(entry.get("source", "")) for entry in data["samples"]],
        negatives=[_doc(entry) for entry in data.get("negatives", [])],
        background=[_doc(entry) for entry in data.get("background", [])],
        templates=SiteTemplates({str(site): frozenset(str(block) for block in blocks)
                                 for site, blocks in data.get("templates", {}).items()}),
        title_weight=float(data["title_weight"]),
        body_weight=float(data["body_weight"]),
        block_weight=float(data.get("block_weight", 0.0)),
        top_k=int(data["top_k"]),
        target_recall=float(data["target_recall"]),
    )
    return TopicFile(spec, str(data["segmenter"]), path)


def _doc(entry: Mapping[str, Any]) -> Doc:
    blocks = entry.get("blocks", [])
    if not isinstance(blocks, list):
        raise TypeError(f"a page's blocks are a list, not {type(blocks).__name__}")
    return Doc(_counts(entry["title"]), _counts(entry["body"]), frozenset(str(block) for block in blocks))


def _counts(counts: Mapping[str, Any]) -> dict[str, float]:
    return {str(term): float(count) for term, count in counts.items()}


def encode_topic(spec: TopicSpec, topic: Topic, segmenter: str) -> str:
    """The saved form of ``spec`` (``topic`` is what it trains into)."""
    if spec.lexicon is not None:
        raise ValueError("a keyword topic is saved as a keyword file")

    def docs(entries: Sequence[Doc], sources: Sequence[str] = ()) -> list[dict[str, Any]]:
        encoded = [{"title": dict(doc.title), "body": dict(doc.body), "blocks": sorted(doc.blocks)} for doc in entries]
        for entry, source in zip(encoded, sources, strict=False):
            entry["source"] = source
        return encoded

    document = {
        "format": FORMAT,
        "version": VERSION,
        "kind": spec.kind,
        "segmenter": segmenter,
        "saved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threshold": round(topic.threshold, 6),
        "terms": [[term, round(weight, 6)] for term, weight in topic.top_terms(SHOWN_TERMS)],
        "title_weight": spec.title_weight,
        "body_weight": spec.body_weight,
        "block_weight": spec.block_weight,
        "top_k": spec.top_k,
        "target_recall": spec.target_recall,
        "samples": docs(spec.samples, spec.sources),
        "negatives": docs(spec.negatives),
        "background": docs(spec.background),
        "templates": {site: sorted(blocks) for site, blocks in spec.templates.sites.items()},
    }
    return json.dumps(document, ensure_ascii=False, indent=1, sort_keys=False) + "\n"

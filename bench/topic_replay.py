"""An offline replay of :mod:`bench_topic`: the same corpora, targets, samples, keyword
topics, page extraction, site templates, segmentation and topic models, with no crawl,
so that a change to a model or a threshold is measured in a minute rather than a
quarter of an hour. What it leaves out is the crawl itself: the background is drawn at
random from the pages within the crawl's depth (the crawl's sampler draws at random
from the links it has found, round by round), and every page within that depth is
scored, as ``bench_topic``'s "every page scored" mode does.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/topic_replay.py [--only gimp,python] [--kinds trained,keywords]
        [--backgrounds 3] [--set NAME=VALUE ...] [--samples even|random|first]

``--backgrounds N`` draws N backgrounds per corpus (random seeds 0..N-1) and reports the
mean, so that a difference smaller than the sample's own spread shows as such. ``--set``
takes ``TOPIC_*`` settings the models read (``TOPIC_MODEL``, ``TOPIC_THRESHOLD``,
``TOPIC_TITLE_WEIGHT``, ``TOPIC_BODY_WEIGHT``, ``TOPIC_BLOCK_WEIGHT``, ``TOPIC_BACKGROUND_PAGES``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bench_topic import DEPTH, KEYWORDS, MIN_TARGET_PAGES, SAMPLE_PICKS, SAMPLES, Measure, sample_pages
from common import REPO
from topic_corpus import SPECS, Corpus, build_corpus

sys.path.insert(0, str(REPO))

from topicspider import settings as defaults  # noqa: E402
from topicspider.extract import base_url, extract_blocks, extract_links, extract_title, html_root  # noqa: E402
from topicspider.topic.lexicon import Lexicon  # noqa: E402
from topicspider.topic.score import Doc, Topic, TopicSpec, build_topic, read_doc  # noqa: E402
from topicspider.topic.segment import Segmenter  # noqa: E402
from topicspider.topic.template import learn_templates  # noqa: E402

SITE = "127.0.0.1"
ORIGIN = f"http://{SITE}/"


@dataclass(frozen=True)
class Page:
    title: str
    blocks: list[str]
    links: list[str]  # site paths


def read_page(corpus: Corpus, path: str) -> Page | None:
    file = corpus.root / path
    if not file.is_file():
        return None
    root = html_root(file.read_text("utf-8", errors="replace"), ORIGIN + path)
    paths = []
    for link in extract_links(root, base_url(root, ORIGIN + path)).links:
        parts = urlsplit(link.url)
        if parts.netloc == SITE and not link.nofollow:
            linked = unquote(parts.path).lstrip("/")
            paths.append(linked + "index.html" if linked == "" or linked.endswith("/") else linked)
    return Page(extract_title(root), extract_blocks(root), paths)


def reachable(corpus: Corpus) -> dict[str, Page]:
    """The pages a crawl from every section's start page reaches within :data:`DEPTH`."""
    pages: dict[str, Page] = {}
    queue = deque((start, 0) for start in corpus.starts.values())
    seen = set(corpus.starts.values())
    while queue:
        path, depth = queue.popleft()
        page = read_page(corpus, path)
        if page is None:
            continue
        pages[path] = page
        if depth < DEPTH:
            for linked in page.links:
                if linked not in seen and linked.endswith((".html", ".htm")):
                    seen.add(linked)
                    queue.append((linked, depth + 1))
    return pages


@dataclass
class Replay:
    corpus: Corpus
    pages: dict[str, Page]
    segmenter: Segmenter
    settings: dict[str, str]
    pick: str = "even"  # how the samples are picked (bench_topic.sample_pages)

    def setting(self, name: str) -> float:
        return float(self.settings.get(name, getattr(defaults, name)))

    def docs(self, background: list[str]) -> tuple[dict[str, Doc], object]:
        templates = learn_templates(((SITE, self.pages[path].blocks) for path in background),
                                    self.setting("TOPIC_BOILERPLATE_SHARE"))
        max_chars = int(self.setting("TOPIC_MAX_CHARS"))
        docs = {path: read_doc(self.segmenter, page.title, templates.content(SITE, page.blocks), max_chars)
                for path, page in self.pages.items()}
        return docs, templates

    def topic(self, kind: str, target: str, docs: dict[str, Doc], background: list[str], templates: object) -> tuple[Topic, set[str]]:
        samples = sample_pages(self.corpus, target, SAMPLES, self.pick) if kind == "trained" else []
        spec = TopicSpec(
            str(self.settings.get("TOPIC_MODEL", defaults.TOPIC_MODEL)),
            lexicon=Lexicon(dict(KEYWORDS[self.corpus.name, target])) if kind == "keywords" else None,
            samples=[docs[path] for path in samples if path in docs],
            background=[docs[path] for path in background if path not in samples],
            templates=templates,  # type: ignore[arg-type]
            title_weight=self.setting("TOPIC_TITLE_WEIGHT"), body_weight=self.setting("TOPIC_BODY_WEIGHT"),
            block_weight=self.setting("TOPIC_BLOCK_WEIGHT"),
        )
        topic = build_topic(spec, self.segmenter, int(self.setting("TOPIC_MAX_CHARS")))
        if "TOPIC_THRESHOLD" in self.settings:
            topic.threshold = float(self.settings["TOPIC_THRESHOLD"])
        return topic, set(samples)


def score(topic: Topic, doc: Doc) -> float:
    if hasattr(topic, "relevance_of_doc"):
        return float(topic.relevance_of_doc(doc).score)
    return float(topic.relevance_of_counts(doc.title, doc.body).score)  # type: ignore[attr-defined]


def replay_corpus(name: str, segmenter: Segmenter, options: argparse.Namespace) -> list[dict[str, object]]:
    corpus = build_corpus(name)
    started = time.perf_counter()
    replay = Replay(corpus, reachable(corpus), segmenter, options.settings, options.samples)
    print(f"  {name}: {len(replay.pages)} pages within depth {DEPTH}, read in {time.perf_counter() - started:.1f} s",
          flush=True)
    targets = [label for label, count in corpus.sizes().most_common() if count >= MIN_TARGET_PAGES]
    size = int(replay.setting("TOPIC_BACKGROUND_PAGES"))
    rows = []
    for seed in range(options.backgrounds):
        background = random.Random(seed).sample(sorted(replay.pages), min(size, len(replay.pages)))
        docs, templates = replay.docs(background)
        for target in targets:
            for kind in options.kinds:
                if kind == "keywords" and (name, target) not in KEYWORDS:
                    continue
                topic, left_out = replay.topic(kind, target, docs, background, templates)
                evaluated = [path for path in docs if path in corpus.labels and path not in left_out]
                chosen = {path for path in evaluated if score(topic, docs[path]) >= topic.threshold}
                wanted = {path for path in evaluated if corpus.labels[path] == target}
                hits = len(chosen & wanted)
                measure = Measure(hits / len(chosen) if chosen else 0.0, hits / len(wanted) if wanted else 0.0)
                rows.append({"corpus": name, "target": target, "kind": kind, "seed": seed, "measure": measure,
                             "threshold": topic.threshold})
    for kind in options.kinds:
        for target in targets:
            own = [row for row in rows if row["kind"] == kind and row["target"] == target]
            if own:
                print(f"  {name:<12} {target:<22} {kind:<8} " + "  ".join(
                    f"{row['measure'].precision:.2f}/{row['measure'].recall:.2f}/{row['measure'].f1:.2f}"  # type: ignore[attr-defined]
                    f" t={row['threshold']:.3f}" for row in own), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SPECS))
    parser.add_argument("--kinds", default="trained,keywords")
    parser.add_argument("--backgrounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--samples", choices=SAMPLE_PICKS, default="even")
    options = parser.parse_args(argv)
    options.kinds = options.kinds.split(",")
    options.settings = dict(item.split("=", 1) for item in options.set)
    segmenter = Segmenter(str(options.settings.get("TOPIC_SEGMENTER", defaults.TOPIC_SEGMENTER)))
    segmenter.load()
    rows = []
    for name in options.only.split(","):
        rows += replay_corpus(name, segmenter, options)
    print("\nMean F1 by corpus over targets and backgrounds, worst first:")
    for kind in options.kinds:
        means = {}
        for name in {str(row["corpus"]) for row in rows if row["kind"] == kind}:
            means[name] = statistics.fmean(row["measure"].f1 for row in rows  # type: ignore[attr-defined]
                                           if row["kind"] == kind and row["corpus"] == name)
        print(f"  {kind:<8} " + "  ".join(f"{name} {f1:.3f}" for name, f1 in sorted(means.items(), key=lambda p: p[1]))
              + (f"   mean {statistics.fmean(means.values()):.3f}" if means else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

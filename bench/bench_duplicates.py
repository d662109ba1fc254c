"""Duplicate content on real documentation sites: what the digest and the SimHash find,
how close the pages they flag really are, and what they cost a page.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_duplicates.py [--only gimp,python] [--distance 3]

Each corpus of :mod:`topic_corpus` (Debian documentation packages; built on first use)
is read page by page in sorted order, as the crawl's page analysis reads it
(:func:`topicspider.analysis.analyse_page`, default rules), and each page is checked
against the pages before it with :class:`topicspider.duplicates.ContentIndex`. Reported
per corpus:

* pages, exact duplicates, near duplicates flagged;
* for the flagged pairs, the Jaccard similarity of their shingle sets (the truth the
  SimHash estimates): the smallest, the median, and how many fall below 0.8;
* every pair of pages whose shingle sets have a Jaccard similarity of 0.9 or more, and
  how many of those the SimHash leaves unflagged (a full comparison of all pairs);
* the page analysis's time a page, and the SimHash's share of it (timed apart, on the
  same text), and the index's check a page.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time

from common import REPO
from topic_corpus import SPECS, build_corpus

sys.path.insert(0, str(REPO))

from topicspider.analysis import Page, PageRules, analyse_page  # noqa: E402
from topicspider.duplicates import ContentIndex, distance, shingles, simhash  # noqa: E402

ORIGIN = "http://127.0.0.1/"
SIMILAR = 0.9  # a pair this close by shingles is a near duplicate by any account


def jaccard(one: set[str], other: set[str]) -> float:
    return len(one & other) / len(one | other) if one or other else 1.0


def measure(name: str, max_distance: int) -> dict[str, object]:
    corpus = build_corpus(name)
    files = sorted(path for path in corpus.root.rglob("*.html"))
    index = ContentIndex(100_000, max_distance)
    kept: dict[str, tuple[int, set[str]]] = {}  # URL -> SimHash, shingles, of pages not exact duplicates
    texts: dict[str, str] = {}
    exact, flagged = 0, []
    analysis_seconds = simhash_seconds = check_seconds = 0.0
    for path in files:
        url = ORIGIN + str(path.relative_to(corpus.root))
        started = time.perf_counter()
        analysis = analyse_page(Page(url, path.read_bytes(), "utf-8", "127.0.0.1", 1), PageRules())
        analysis_seconds += time.perf_counter() - started
        started = time.perf_counter()
        simhash(analysis.text)
        simhash_seconds += time.perf_counter() - started
        assert analysis.content_digest is not None
        started = time.perf_counter()
        verdict = index.check(url, analysis.content_digest, analysis.simhash)
        check_seconds += time.perf_counter() - started
        texts[url] = analysis.text
        if verdict.duplicate_of is not None:
            exact += 1
            continue
        if verdict.near_duplicate_of is not None:
            flagged.append(jaccard(shingles(analysis.text), shingles(texts[verdict.near_duplicate_of])))
        if analysis.simhash is not None:
            kept[url] = (analysis.simhash, shingles(analysis.text))
    similar = missed = 0
    for (one, other) in itertools.combinations(kept.values(), 2):
        if jaccard(one[1], other[1]) >= SIMILAR:
            similar += 1
            missed += distance(one[0], other[0]) > max_distance
    pages = len(files)
    return {
        "corpus": name, "pages": pages, "exact": exact, "near": len(flagged),
        "near_jaccard_min": round(min(flagged), 2) if flagged else None,
        "near_jaccard_median": round(statistics.median(flagged), 2) if flagged else None,
        "near_below_0.8": sum(value < 0.8 for value in flagged),
        "pairs_similar": similar, "pairs_similar_unflagged": missed,
        "analysis_ms": round(analysis_seconds / pages * 1000, 2),
        "simhash_ms": round(simhash_seconds / pages * 1000, 2),
        "simhash_share": round(simhash_seconds / analysis_seconds, 3),
        "check_us": round(check_seconds / pages * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SPECS), help="corpora, comma-separated")
    parser.add_argument("--distance", type=int, default=3, help="DUPLICATE_NEAR_DISTANCE")
    arguments = parser.parse_args()
    for name in arguments.only.split(","):
        result = measure(name, arguments.distance)
        print("  ".join(f"{key} {value}" for key, value in result.items()), flush=True)


if __name__ == "__main__":
    main()

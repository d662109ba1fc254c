"""Pages to index terms, and queries to look-up terms.

A page is cut in jieba's search mode: every word of the precise cut, and the dictionary
words of two or three characters inside it, so that 新闻 finds 新闻网 and 中华人民共和国
is found by 人民 as well as by itself. A query is cut in precise mode, so that a long
word asks for itself (:func:`topicspider.search.index.search` falls back to the words
inside one that no page holds as such). jieba's dictionary and algorithm, through
rjieba (the same cuts as jieba, see :mod:`topicspider.topic.segment`). Terms follow
the topic stage's rules (:class:`topicspider.topic.segment.Segmenter`): lower case, at
least two characters, a letter or Han character, no stopword. The title's terms count
:data:`TITLE_WEIGHT` times, as the topic score weights titles.
"""

from __future__ import annotations

import threading
from collections import Counter
from functools import cache

from topicspider.topic.segment import Segmenter

# As the topic score's default TOPIC_TITLE_WEIGHT: a word of the title says more about
# the page than one of its body.
TITLE_WEIGHT = 4
# Text beyond this many characters is not indexed: it bounds the storage thread's work
# and the index's size for a huge page (the snippet still sees the whole stored text).
INDEX_MAX_CHARS = 50_000
# The widest term the index keeps (a column width in MySQL).
TERM_MAX_CHARS = 40

_segmenter_lock = threading.Lock()


@cache
def _segmenter(backend: str) -> Segmenter:
    segmenter = Segmenter(backend)
    segmenter.load()
    return segmenter


def segmenter(backend: str = "rjieba") -> Segmenter:
    """The process's segmenter for search; its dictionary loads on first use."""
    with _segmenter_lock:
        return _segmenter(backend)


def document_terms(title: str, text: str, backend: str = "rjieba") -> Counter[str]:
    """Each index term of a page and its weighted count."""
    count = segmenter(backend).search_term_counts
    counts = count(text[:INDEX_MAX_CHARS])
    for term, occurrences in count(title).items():
        counts[term] += TITLE_WEIGHT * occurrences
    return Counter({term: n for term, n in counts.items() if len(term) <= TERM_MAX_CHARS})


def query_terms(query: str, backend: str = "rjieba") -> list[str]:
    """The distinct look-up terms of ``query``, in order."""
    terms = segmenter(backend).terms(query)
    return list(dict.fromkeys(term for term in terms if len(term) <= TERM_MAX_CHARS))

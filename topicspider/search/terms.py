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
from collections.abc import Iterable, Mapping
from functools import cache
from itertools import chain

from topicspider.topic.segment import Segmenter

# As the topic score's default TOPIC_TITLE_WEIGHT: a word of the title says more about
# the page than one of its body.
TITLE_WEIGHT = 4
# Text beyond this many characters is not indexed: it bounds the storage thread's work
# and the index's size for a huge page (the snippet still sees the whole stored text).
INDEX_MAX_CHARS = 50_000
# The widest term the index keeps (a column width in MySQL).
TERM_MAX_CHARS = 40
# The index's segmenter, whatever TOPIC_SEGMENTER says: an index is cut one way.
SEARCH_SEGMENTER = "rjieba"
# ASCII characters other than letters and digits separate tokens in FTS5's ascii
# tokenizer (and some are query syntax): each becomes a character of Unicode's private
# use area, which that tokenizer keeps inside a token. The stored tokens are made so:
# changing this encoding needs a schema migration that rewrites them.
_PRIVATE_USE = 0xE000
_ENCODED = {code: chr(_PRIVATE_USE + code) for code in range(128) if not chr(code).isalnum()}

# A page's index terms: each term's weighted count, or those counts as the one text
# SQLite's FTS5 index takes (document_text), which the page-analysis process builds so
# that the crawler's own process, where the reactor runs, does not.
IndexTerms = Mapping[str, int] | str

_segmenter_lock = threading.Lock()


@cache
def _segmenter(backend: str) -> Segmenter:
    segmenter = Segmenter(backend)
    segmenter.load()
    return segmenter


def segmenter(backend: str = SEARCH_SEGMENTER) -> Segmenter:
    """The process's segmenter for search; its dictionary loads on first use."""
    with _segmenter_lock:
        return _segmenter(backend)


def document_terms(title: str, text: str, backend: str = SEARCH_SEGMENTER) -> Counter[str]:
    """Each index term of a page and its weighted count."""
    count = segmenter(backend).search_term_counts
    return _weighted(count(text[:INDEX_MAX_CHARS]), count(title))


def terms_of_tokens(title: list[str], text: list[str], blocks: Iterable[str] = (),
                    backend: str = SEARCH_SEGMENTER) -> Counter[str]:
    """:func:`document_terms` of a page from the tokens of its title and text
    (:meth:`Segmenter.tokens`, cut with this process's dictionary, at most
    :data:`INDEX_MAX_CHARS` of text), and of further ``blocks`` of its text that recur
    from page to page (a site's template, which the topic's reading left out): the
    page is not cut again."""
    cutter = segmenter(backend)
    tokens = chain(text, *(cutter.block_tokens(block) for block in blocks))
    return _weighted(cutter.search_counts_of_tokens(tokens), cutter.search_counts_of_tokens(title))


def _weighted(text: Counter[str], title: Counter[str]) -> Counter[str]:
    """A page's index terms: its text's and its title's, the title's counting
    :data:`TITLE_WEIGHT` times, none wider than :data:`TERM_MAX_CHARS`."""
    for term, occurrences in title.items():
        text[term] += TITLE_WEIGHT * occurrences
    return Counter({term: n for term, n in text.items() if len(term) <= TERM_MAX_CHARS})


def fts_token(term: str) -> str:
    """``term`` as one FTS5 token (ASCII punctuation and spaces moved out of ASCII)."""
    return term.translate(_ENCODED)


def document_text(counts: Mapping[str, int]) -> str:
    """A page's index terms, each repeated its count: what FTS5 indexes for it."""
    # A term of letters and digits only is its own token (fts_token moves none of its
    # characters): the check costs a fraction of the translation, for most terms.
    return "".join([((term if term.isalnum() else fts_token(term)) + " ") * count
                    for term, count in counts.items() if term and count > 0])[:-1]


def query_terms(query: str, backend: str = SEARCH_SEGMENTER) -> list[str]:
    """The distinct look-up terms of ``query``, in order."""
    terms = segmenter(backend).terms(query)
    return list(dict.fromkeys(term for term in terms if len(term) <= TERM_MAX_CHARS))

"""Word segmentation for topic scoring, with no Scrapy dependency.

Chinese is cut by jieba's algorithm and dictionary in precise mode, through rjieba
(its Rust port, the default) or jieba itself (``TOPIC_SEGMENTER``). rjieba keeps runs
such as ``grub.cfg`` or ``debian-policy`` whole where jieba splits them; such runs are
split as jieba splits them, so that both give the same terms. English words come out
whole and are lower-cased. A term must hold a letter or a Han character, be at least two
characters long (unless it is a word the topic or user dictionary names) and not be a
stopword. The segmenter's dictionary is loaded once per process.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from functools import cache
from itertools import chain
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from topicspider.config import ConfigError

SEGMENTERS = ("jieba", "rjieba")
MIN_TERM_CHARS = 2
# Longer "words" are runs of letters with no spaces: base64, hashes, minified code.
MAX_TERM_CHARS = 40
# Distinct tokens whose terms a segmenter remembers (a few MB at most).
TOKEN_CACHE_SIZE = 200_000
# Characters of recurring blocks (sites' templates) whose tokens a segmenter remembers
# (a few MB of tokens at most).
BLOCK_CACHE_CHARS = 200_000
Cut = Callable[[str], list[str]]
# How jieba cuts an ASCII run that holds more than letters and digits: letters and
# digits apart from the rest, a decimal ("3.1", "v2.24") whole.
ASCII_RUNS = re.compile(r"[A-Za-z0-9]+(?:\.\d+)?%?|[^A-Za-z0-9]")
# The runs rjieba keeps whole and jieba splits: letters and digits joined by the
# punctuation both segmenters count as part of a word.
JOINED_ASCII = re.compile(r"[A-Za-z0-9]+(?:[+#&._%-]+[A-Za-z0-9]+)+")
# A run of letters and digits, which both segmenters keep whole with no help: in their
# dictionary, such a word would split every longer run that starts with it ("sheet"
# out of "sheets", "document" out of "documentation").
PLAIN_ASCII = re.compile(r"[A-Za-z0-9]+")


def found_in_lower_case_only(word: str) -> bool:
    """Whether the cut may find the dictionary word ``word`` (lower-case) in
    lower-cased text only: it holds a letter that has a case, and is no run of ASCII
    letters and digits, which both segmenters keep whole whatever its case. "iphone手机"
    is such a word; so, to be safe, is "node.js", which rjieba keeps whole anyway;
    "sheet" and "电子表格" are not."""
    return word.upper() != word and not PLAIN_ASCII.fullmatch(word)


_load_lock = threading.Lock()


@cache
def default_stopwords() -> frozenset[str]:
    text = resources.files("topicspider.topic").joinpath("stopwords.txt").read_text(encoding="utf-8")
    return frozenset(word for line in text.splitlines() if not line.startswith("#") for word in line.split())


class Backend(NamedTuple):
    cut: Cut  # precise mode
    cut_for_search: Cut  # precise mode's words, then the dictionary words inside them
    add_word: Callable[[str], None]


@cache
def _backend(name: str) -> Backend:
    """The named segmenter, its dictionary loaded."""
    if name == "jieba":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        return Backend(lambda text: jieba.lcut(text, HMM=True), lambda text: jieba.lcut_for_search(text, HMM=True),
                       jieba.add_word)
    if name == "rjieba":
        try:
            import rjieba
        except ImportError:
            raise ConfigError("TOPIC_SEGMENTER is 'rjieba' but rjieba is not installed: pip install rjieba") from None
        # rjieba's add_word wants freq and tag; None lets it pick a frequency, as jieba does.
        return Backend(lambda text: rjieba.cut(text, hmm=True), lambda text: rjieba.cut_for_search(text, hmm=True),
                       lambda word: rjieba.add_word(word, None, None))
    raise ConfigError(f"TOPIC_SEGMENTER must be one of {', '.join(SEGMENTERS)}, got {name!r}")


def _as_jieba_cuts(tokens: list[str]) -> list[str]:
    """rjieba's tokens cut as jieba cuts them."""
    cut: list[str] = []
    for token in tokens:
        if token.isascii() and not token.isalnum():
            cut.extend(ASCII_RUNS.findall(token))
        else:
            cut.append(token)
    return cut


NO_TERM = ""  # what a token that is no term maps to: never a term itself


class _TokenTerms(dict[str, Any]):
    """Token -> its term, :data:`NO_TERM`, or the tuple of its terms when it has several;
    a token not seen yet is looked up on first use."""

    def __init__(self, terms_of: Callable[[list[str]], list[str]]) -> None:
        super().__init__()
        self.terms_of = terms_of
        self.several: set[tuple[str, ...]] = set()

    def __missing__(self, token: str) -> str | tuple[str, ...]:
        terms = tuple(self.terms_of([token]))
        value: str | tuple[str, ...] = NO_TERM if not terms else terms[0] if len(terms) == 1 else terms
        if isinstance(value, tuple):
            self.several.add(value)
        self[token] = value
        return value

    def clear(self) -> None:
        super().clear()
        self.several.clear()


class _TokenTuples(dict[str, tuple[str, ...]]):
    """Token -> the tuple of its terms (maybe empty), looked up on first use."""

    def __init__(self, terms_of: Callable[[str], list[str]]) -> None:
        super().__init__()
        self.terms_of = terms_of

    def __missing__(self, token: str) -> tuple[str, ...]:
        value = self[token] = tuple(self.terms_of(token))
        return value


def check_segmenter_name(name: str) -> None:
    if name not in SEGMENTERS:
        raise ConfigError(f"TOPIC_SEGMENTER must be one of {', '.join(SEGMENTERS)}, got {name!r}")


def read_user_dict(path: Path) -> list[str]:
    """The words of a jieba user dictionary: ``word [freq] [tag]`` a line."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read TOPIC_USER_DICT {str(path)!r}: {exc}") from None
    return [line.split()[0] for line in lines if line.strip() and not line.lstrip().startswith("#")]


class Segmenter:
    """Text to topic terms. ``keep`` words are never split and never dropped for length."""

    def __init__(self, backend: str = "jieba", keep: Iterable[str] = (), stopwords: frozenset[str] | None = None) -> None:
        check_segmenter_name(backend)
        self.backend = backend
        self.stopwords = default_stopwords() if stopwords is None else stopwords
        self.keep: set[str] = set()
        self._pending_words = list(keep)
        self._added_words: list[str] = []
        self._backend: Backend | None = None
        # Token -> its terms: a page's tokens are mostly words seen on earlier pages.
        self._token_terms = _TokenTerms(self._terms)
        # Token -> its terms and those of the dictionary words inside it (search mode).
        self._search_terms = _TokenTuples(self._search_terms_of)
        # A block of text that recurs (a site's template) -> its tokens.
        self._block_tokens: dict[str, list[str]] = {}
        self._block_chars = 0

    def __getstate__(self) -> dict[str, object]:
        # Sent to a page-analysis process (topicspider.pagepool): the dictionary is
        # loaded again there, with every word added here.
        return {"backend": self.backend, "stopwords": self.stopwords,
                "words": self._added_words + self._pending_words}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["backend"], keep=state["words"], stopwords=state["stopwords"])  # type: ignore[misc,arg-type]

    def load(self) -> None:
        """Load the dictionary (about a second for jieba): call it off the reactor thread."""
        with _load_lock:
            backend = _backend(self.backend)
            for word in self._pending_words:
                if not PLAIN_ASCII.fullmatch(word):
                    backend.add_word(word)
                self.keep.add(word.lower())
            self._added_words += self._pending_words
            self._pending_words = []
            self._backend = backend
            self._token_terms.clear()  # a kept word is a term whatever its length
            self._search_terms.clear()  # the dictionary has changed
            self._block_tokens.clear()
            self._block_chars = 0

    def add_words(self, words: Iterable[str]) -> None:
        """Words to keep whole: the topic's own terms and the user dictionary's."""
        self._pending_words.extend(words)
        if self._backend is not None:
            self.load()

    def terms(self, text: str) -> list[str]:
        """Every term of ``text``, in order: what training learns from."""
        return self._terms(self.tokens(text))

    def term_counts(self, text: str) -> Counter[str]:
        """How often each term of ``text`` occurs (the terms :meth:`terms` finds), the
        tokens counted first (in C) and each distinct one checked once."""
        return self.counts_of_tokens(self.tokens(text))

    def search_term_counts(self, text: str) -> Counter[str]:
        """How often each term of ``text`` occurs in jieba's search mode: each word, and
        the dictionary words of two or three characters inside it (新闻 inside 新闻网),
        so that a search for the shorter word finds the longer one. Cut in the
        backend's own search mode: for a text not cut yet, faster than
        :meth:`search_counts_of_tokens` of its :meth:`tokens`, which gives the same."""
        return self.counts_of_tokens(self._loaded().cut_for_search(text))

    def tokens(self, text: str) -> list[str]:
        """``text``'s precise cut: one cut that :meth:`counts_of_tokens` and
        :meth:`search_counts_of_tokens` both count."""
        return self._loaded().cut(text)

    def block_tokens(self, block: str) -> list[str]:
        """:meth:`tokens` of a block of text that recurs from page to page (a site's
        template), remembered; not to be changed."""
        found = self._block_tokens.get(block)
        if found is None:
            found = self.tokens(block)  # first, since loading the dictionary empties the cache
            if self._block_chars + len(block) > BLOCK_CACHE_CHARS:
                self._block_tokens.clear()
                self._block_chars = 0
            self._block_tokens[block] = found
            self._block_chars += len(block)
        return found

    def search_counts_of_tokens(self, tokens: Iterable[str]) -> Counter[str]:
        """:meth:`search_term_counts` of the text ``tokens`` were cut from (:meth:`tokens`):
        search mode adds to each word of the precise cut the dictionary words inside it,
        which depend on the word alone, so each distinct token's terms and its inner
        words' are found once, and the tokens counted through them in C."""
        known = self._search_terms
        if len(known) >= TOKEN_CACHE_SIZE:
            known.clear()
        return Counter(chain.from_iterable(map(known.__getitem__, tokens)))

    def _search_terms_of(self, token: str) -> list[str]:
        """The terms of a token and of the dictionary words search mode finds inside it."""
        return self._terms([token, *self._words_inside(token)] if len(token) > 2 else [token])

    def _words_inside(self, word: str) -> list[str]:
        """What search mode adds for ``word`` (of three characters or more: jieba finds
        no word inside a shorter one): its cut in search mode, which ends with the word,
        less the word (tested against search mode's cut of whole pages). Were the
        precise cut to split the word when alone (its cut in a sentence depending on
        the words around it; on 1,701 pages of the benchmark's sites no word was), the
        pieces' words would stand in for its own."""
        pieces = self._loaded().cut_for_search(word)
        return pieces[:-1] if pieces and pieces[-1] == word else [piece for piece in pieces if piece != word]

    def counts_of_tokens(self, tokens: list[str]) -> Counter[str]:
        """How often each term of ``tokens`` occurs: :meth:`term_counts` of the text
        they were cut from (:meth:`tokens`), or a count of its search mode's cut."""
        known = self._token_terms
        if len(known) >= TOKEN_CACHE_SIZE:
            known.clear()
        # Each token mapped to its term and counted in C; only a token of no term or of
        # several (a joined ASCII run) is seen to in Python.
        counts: Counter[Any] = Counter(map(known.__getitem__, tokens))
        counts.pop(NO_TERM, None)
        for several in counts.keys() & known.several:
            count = counts.pop(several)
            for term in several:
                counts[term] += count
        return counts

    def _terms(self, tokens: list[str]) -> list[str]:
        if self.backend == "rjieba":
            tokens = _as_jieba_cuts(tokens)
        return [term for term in (token.strip().lower() for token in tokens) if self.is_term(term)]

    def count_tokens(self, tokens: list[str], vocabulary: Collection[str]) -> Counter[str]:
        """How often each word of ``vocabulary`` (lower-case terms, added to the
        dictionary as such, but for runs of ASCII letters and digits, which both
        segmenters keep whole anyway) occurs among ``tokens`` (:meth:`tokens`), whatever
        their case.

        The words :meth:`terms` would find, with a look-up per word of ``vocabulary``
        only, since a topic holds terms only: each token is a term of its own, and so are
        the words inside a run of ASCII letters and digits joined by punctuation that
        rjieba keeps whole and jieba splits ("debian" in "debian-policy"; a run that
        ends in punctuation, such as "node%", is not looked into).
        """
        lowered = Counter(map(str.lower, tokens))  # lower-cased and counted in C
        counts = Counter({term: lowered[term] for term in vocabulary if term in lowered})
        if self.backend == "rjieba":
            for run in filter(JOINED_ASCII.fullmatch, lowered):
                for piece in ASCII_RUNS.findall(run):
                    # A decimal such as "python3.12" is a piece of its own, counted above.
                    if piece != run and piece in vocabulary:
                        counts[piece] += lowered[run]
        return counts

    def _loaded(self) -> Backend:
        if self._backend is None:
            self.load()
        assert self._backend is not None
        return self._backend

    def is_term(self, term: str) -> bool:
        if term in self.keep:
            return True
        if not MIN_TERM_CHARS <= len(term) <= MAX_TERM_CHARS or term in self.stopwords:
            return False
        return any(char.isalpha() for char in term)

"""Word segmentation for topic scoring, with no Scrapy dependency.

Chinese is cut by jieba's algorithm and dictionary in precise mode, through rjieba
(its Rust port, the default) or jieba itself (``TOPIC_SEGMENTER``); ASCII punctuation
next to a letter or digit is set apart first, so that both cut alike. English words
come out whole and are lower-cased. A term must hold a letter or a Han character, be at least two
characters long (unless it is a word the topic or user dictionary names) and not be a
stopword. The segmenter's dictionary is loaded once per process.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Container, Iterable
from functools import cache
from importlib import resources
from pathlib import Path

from topicspider.config import ConfigError

SEGMENTERS = ("jieba", "rjieba")
MIN_TERM_CHARS = 2
# Longer "words" are runs of letters with no spaces: base64, hashes, minified code.
MAX_TERM_CHARS = 40
Cut = Callable[[str], list[str]]
_PUNCT = r"[!-/:-@\[-`{-~]"
PUNCT_BY_ALNUM = re.compile(rf"(?<=[A-Za-z0-9]){_PUNCT}+|{_PUNCT}+(?=[A-Za-z0-9])")

_load_lock = threading.Lock()


@cache
def default_stopwords() -> frozenset[str]:
    text = resources.files("topicspider.topic").joinpath("stopwords.txt").read_text(encoding="utf-8")
    return frozenset(word for line in text.splitlines() if not line.startswith("#") for word in line.split())


@cache
def _backend(name: str) -> tuple[Cut, Callable[[str], None]]:
    """The named segmenter's cut and add-word functions, its dictionary loaded."""
    if name == "jieba":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        return (lambda text: jieba.lcut(_spaced(text), HMM=True)), jieba.add_word
    if name == "rjieba":
        try:
            import rjieba
        except ImportError:
            raise ConfigError("TOPIC_SEGMENTER is 'rjieba' but rjieba is not installed: pip install rjieba") from None
        # rjieba's add_word wants freq and tag; None lets it pick a frequency, as jieba does.
        return (lambda text: rjieba.cut(_spaced(text), hmm=True)), (lambda word: rjieba.add_word(word, None, None))
    raise ConfigError(f"TOPIC_SEGMENTER must be one of {', '.join(SEGMENTERS)}, got {name!r}")


def _spaced(text: str) -> str:
    """``text`` with ASCII punctuation that touches a letter or digit set apart, so that
    both segmenters split ``grub.cfg``, ``grub-pc`` and ``3.1.2`` alike (rjieba would
    keep them whole, jieba keeps decimals), at the cost of one C-level pass."""
    return PUNCT_BY_ALNUM.sub(r" \g<0> ", text)


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
        self._cut: Cut | None = None

    def load(self) -> None:
        """Load the dictionary (about a second for jieba): call it off the reactor thread."""
        with _load_lock:
            cut, add_word = _backend(self.backend)
            for word in self._pending_words:
                add_word(word)
                self.keep.add(word.lower())
            self._pending_words = []
            self._cut = cut

    def add_words(self, words: Iterable[str]) -> None:
        """Words to keep whole: the topic's own terms and the user dictionary's."""
        self._pending_words.extend(words)
        if self._cut is not None:
            self.load()

    def terms(self, text: str) -> list[str]:
        """Every term of ``text``, in order: what training learns from."""
        return [term for term in (token.strip() for token in self._tokens(text)) if self.is_term(term)]

    def count(self, text: str, vocabulary: Container[str]) -> Counter[str]:
        """How often each word of ``vocabulary`` (lower-case terms, added to the
        dictionary as such) occurs in ``text``.

        The words :meth:`terms` would find, but with a set look-up per token only, since
        a topic holds terms only; and the text is lower-cased before the cut, so that a
        keyword such as ``iphone手机`` also matches ``iPhone手机``.
        """
        if self._cut is None:
            self.load()
        assert self._cut is not None
        return Counter(token for token in self._cut(text.lower()) if token in vocabulary)

    def _tokens(self, text: str) -> list[str]:
        if self._cut is None:
            self.load()
        assert self._cut is not None
        # Lower-cased after the cut: the dictionary knows words such as "T恤".
        return [token.lower() for token in self._cut(text)]

    def is_term(self, term: str) -> bool:
        if term in self.keep:
            return True
        if not MIN_TERM_CHARS <= len(term) <= MAX_TERM_CHARS or term in self.stopwords:
            return False
        return any(char.isalpha() for char in term)

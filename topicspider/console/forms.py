"""The console's form checks, with no web framework in them: each returns the clean
values or raises :class:`FormError` with every problem, worded for the page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from topicspider.urls import BadURL, request_url, url_pattern

MAX_SEEDS = 1000
MAX_DEPTH = 100
MAX_KEYWORDS = 200
KEYWORD_CHARS = 100
# Seeds and URLs are separated by whitespace or commas; keywords by commas, the Chinese
# ，and 、, or new lines, as -a topic takes them.
URL_SEPARATORS = re.compile(r"[\s,]+")
KEYWORD_SEPARATORS = re.compile(r"[,，、\n]+")


class FormError(ValueError):
    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {problem}" for name, problem in problems.items()))
        self.problems = problems  # field name -> message


@dataclass
class CrawlRequest:
    seeds: list[str]
    depth: int
    keywords: list[str] = field(default_factory=list)
    training: list[str] = field(default_factory=list)


def parse_urls(text: str, what: str, limit: int = MAX_SEEDS) -> list[str]:
    """Distinct URLs from ``text``; :class:`ValueError` naming the first bad one."""
    urls: dict[str, None] = {}
    for candidate in filter(None, URL_SEPARATORS.split(text.strip())):
        try:
            urls.setdefault(request_url(candidate), None)
        except BadURL as exc:
            raise ValueError(f"bad {what} URL {exc}") from None
    if not urls:
        raise ValueError(f"give at least one {what} URL")
    if len(urls) > limit:
        raise ValueError(f"at most {limit} {what} URLs, got {len(urls)}")
    return list(urls)


def parse_keywords(text: str) -> list[str]:
    keywords = list(dict.fromkeys(word.strip() for word in KEYWORD_SEPARATORS.split(text) if word.strip()))
    if not keywords:
        raise ValueError("give at least one keyword")
    if len(keywords) > MAX_KEYWORDS:
        raise ValueError(f"at most {MAX_KEYWORDS} keywords, got {len(keywords)}")
    for word in keywords:
        if len(word) > KEYWORD_CHARS or word.startswith(("@", "#")):
            raise ValueError(f"bad keyword {word[:KEYWORD_CHARS]!r}: at most {KEYWORD_CHARS} characters, "
                             "not starting with @ or #")
    return keywords


def parse_depth(text: str) -> int:
    try:
        depth = int(text.strip())
    except ValueError:
        raise ValueError(f"depth must be a whole number, got {text.strip()[:20]!r}") from None
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be between 0 and {MAX_DEPTH}, got {depth}")
    return depth


def crawl_request(form: dict[str, str]) -> CrawlRequest:
    """The start form: ``seeds``, ``depth``, ``topic_kind`` (``keywords`` or
    ``training``) and ``topic``."""
    problems: dict[str, str] = {}
    values: dict[str, object] = {}
    checks = {"seeds": lambda: parse_urls(form.get("seeds", ""), "seed"),
              "depth": lambda: parse_depth(form.get("depth", ""))}
    kind = form.get("topic_kind", "keywords")
    if kind == "keywords":
        checks["topic"] = lambda: parse_keywords(form.get("topic", ""))
    elif kind == "training":
        checks["topic"] = lambda: parse_urls(form.get("topic", ""), "training", limit=100)
    else:
        problems["topic"] = f"unknown kind of topic {kind[:20]!r}"
    for name, check in checks.items():
        try:
            values[name] = check()
        except ValueError as exc:
            problems[name] = str(exc)
    if problems:
        raise FormError(problems)
    topic = values["topic"]
    assert isinstance(topic, list)
    return CrawlRequest(values["seeds"], values["depth"],  # type: ignore[arg-type]
                        keywords=topic if kind == "keywords" else [], training=topic if kind == "training" else [])


def block_pattern(text: str) -> str:
    """A URL pattern to block; :class:`FormError` for a bad one."""
    try:
        url_pattern(text)
    except ValueError as exc:
        raise FormError({"pattern": str(exc)}) from None
    return text.strip()


def added_urls(text: str) -> list[str]:
    try:
        return parse_urls(text, "added", limit=MAX_SEEDS)
    except ValueError as exc:
        raise FormError({"urls": str(exc)}) from None

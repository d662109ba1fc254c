"""Checks for spider arguments and project settings, run before any request is made.

Every check raises :class:`ConfigError` with the bad value in its message, so the
``crawl`` command can print one line and exit non-zero before the crawl starts.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from topicspider.duplicates import MAX_DISTANCE
from topicspider.urls import (
    URL_FILTER, BadURL, URLFilter, URLRules, mask_url, parse_url_filter, refusal, request_url, strip_session_ids,
)

if TYPE_CHECKING:
    from scrapy.exceptions import NotConfigured
    from scrapy.settings import BaseSettings


N = TypeVar("N", int, float)

# Every typed setting the project reads, with its smallest allowed value; the
# components read them through the getters below, and preflight checks them all.
INT_SETTINGS: dict[str, int] = {
    "WARC_MAX_SIZE": 1024,
    "EXTRACT_TEXT_MAX_CHARS": 1,
    "EXTRACT_EMAIL_MAX_CHARS": 1,
    "EXTRACT_MAX_LINKS": 0,
    "SITE_MAX_PAGES": 0,
    "STORAGE_BATCH_SIZE": 1,
    "STORAGE_RETRY_TIMES": 0,
    "ROBOTSTXT_RETRY_TIMES": 0,
    "ROBOTSTXT_MAX_SIZE": 1,
    "BACKOFF_MAX_RETRIES": 0,
    "MEMUSAGE_LIMIT_MB": 0,
    "MEMUSAGE_WARNING_MB": 0,
    "SCHEDULER_MAX_HELD": 1,
    "DUPEFILTER_LRU_CAPACITY": 1,
    "DUPEFILTER_FLUSH_SIZE": 1,
    "TOPIC_TOP_K": 1,
    "TOPIC_MAX_CHARS": 1,
    "TOPIC_BACKGROUND_PAGES": 0,
    "TOPIC_EXPLAIN_TERMS": 0,
    "PAGE_PROCESSES": 0,
    "PAGE_SITE_MAX_LOST": 0,
    "DUPLICATE_CAPACITY": 1,
    "DUPLICATE_NEAR_DISTANCE": -1,
    "REDIS_PREFETCH": 1,
    "REDIS_MAX_DELIVERIES": 0,
    "URL_MAX_PATH_SEGMENTS": 1,
    "URL_MAX_PATH_REPEATS": 1,
    "URLLENGTH_LIMIT": 0,  # Scrapy's; 0: no limit
    "CONSOLE_PORT": 0,
    # Scrapy's own, which it would only reject with a traceback.
    "CONCURRENT_REQUESTS": 1,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "CONCURRENT_ITEMS": 1,
    "DOWNLOAD_MAXSIZE": 0,
    "DOWNLOAD_WARNSIZE": 0,
    "DEPTH_PRIORITY": -1_000_000,
}
FLOAT_SETTINGS: dict[str, float] = {
    "STORAGE_FLUSH_INTERVAL": 0.01,
    "STORAGE_RETRY_DELAY": 0.01,
    "PAGE_TIMEOUT": 0.1,
    "REDIS_LEASE": 5.0,
    "REDIS_IDLE_TIMEOUT": 0.0,
    "STORAGE_RETRY_MAX_DELAY": 0.01,
    "DOWNLOAD_DELAY": 0.0,
    "DOWNLOAD_DELAY_JITTER": 0.0,
    "ROBOTSTXT_CACHE_TTL": 0.0,
    "ROBOTSTXT_UNREACHABLE_TTL": 0.0,
    "ROBOTSTXT_RETRY_DELAY": 0.0,
    "ROBOTSTXT_MAX_CRAWL_DELAY": 0.0,
    "BACKOFF_DEFAULT_DELAY": 0.0,
    "BACKOFF_MAX_DELAY": 0.0,
    "TOPIC_TARGET_RECALL": 0.01,
    "TOPIC_BOILERPLATE_SHARE": 0.01,
    "TOPIC_TITLE_WEIGHT": 0.0,
    "TOPIC_BODY_WEIGHT": 0.0,
    "TOPIC_BLOCK_WEIGHT": 0.0,
    "DOWNLOAD_TIMEOUT": 0.001,
    "STATUS_INTERVAL": 0.0,
    "PROGRESS_INTERVAL": 0.0,
    "WARC_QUEUE_MAX_MB": 1.0,
    "CONTROL_INTERVAL": 0.0,
    "CONSOLE_REFRESH": 0.2,
}
BOOL_SETTINGS = (
    "URL_STRIP_TRAILING_SLASH",
    "SCHEDULER_LEVEL_SYNC",
    "ROBOTSTXT_OBEY",
    "ROBOTS_META_OBEY",
    "ROBOTS_REL_NOFOLLOW_OBEY",
    "DUPEFILTER_DEBUG",
    "TOPIC_STORE_ALL",
    "TOPIC_FOLLOW_ALL",
    "TOPIC_BEST_FIRST",
    "SCHEDULER_FLUSH_ON_START",
    "SEARCH_INDEX",
    "DUPLICATE_CONTENT",
)


class ConfigError(ValueError):
    """A bad spider argument, setting or file, found before crawling."""


def off_by_design(module: str, reason: str) -> NotConfigured:
    """What a component off by design raises in ``from_crawler``: a NotConfigured with
    a reason is a WARNING in Scrapy's log, on every crawl; the reason goes to ``module``'s
    log at DEBUG instead."""
    # Imported here: the page-analysis processes load this module, and never Scrapy.
    from scrapy.exceptions import NotConfigured

    logging.getLogger(module).debug("Disabled: %s", reason)
    return NotConfigured()


# What a file argument given without its "@" looks like: a path from the root, the
# working or home directory, or a name with a list or topic file's extension.
PATH_PREFIXES = ("/", "./", "../", "~/", ".\\", "..\\")
LIST_FILE = re.compile(r"\.(txt|text|lst|list|csv|tsv|json|md|ya?ml|ini|conf)$", re.IGNORECASE)


def looks_like_a_file(item: str) -> bool:
    """Whether ``item``, given where a word or URL is expected, names an existing file
    or looks like a file's path."""
    item = item.strip()
    if not item or "://" in item:
        return False
    return item.startswith(PATH_PREFIXES) or bool(LIST_FILE.search(item)) or Path(item).expanduser().is_file()


def refuse_bare_file(value: str, items: list[str], argument: str) -> None:
    """Raise :class:`ConfigError` when one of ``items`` (read from ``-a argument=value``
    without ``@``) is a file's path, which the user surely meant as ``@file``."""
    for item in items:
        if looks_like_a_file(item):
            suggestion = value.strip() if item == value.strip() else item.strip()
            raise ConfigError(f"-a {argument}={value.strip()}: {item.strip()!r} is a file path, not a "
                              f"{'keyword' if argument == 'topic' else 'URL'}; did you mean @{suggestion}?")


def check_directory(name: str, path: str) -> None:
    """Raise :class:`ConfigError` unless ``path`` (setting ``name``) is a directory this
    process can write files in, made if missing; nothing to check when empty."""
    if not path:
        return
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{name} {path!r}: cannot be made: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{name} {path!r}: cannot be written")


def parse_list(value: str, what: str) -> list[str]:
    """Items from ``A,B,...`` (also split on the Chinese commas ``，`` and ``、``) or from
    ``@file``, one a line with ``#`` comments."""
    value = value.strip()
    if value.startswith("@"):
        return _read_list_file(Path(value[1:]), what)
    return [part.strip() for part in re.split(r"[,，、]", value) if part.strip()]


def parse_seeds(value: str) -> list[str]:
    """Seed URLs from ``URL[,URL...]`` or ``@file`` (one URL a line, ``#`` comments)."""
    candidates = parse_list(value, "seed")
    if not candidates:
        raise ConfigError("no seed URLs given: use -a seeds=URL[,URL...] or -a seeds=@file")
    if not value.strip().startswith("@"):
        refuse_bare_file(value, candidates, "seeds")
    seeds: dict[str, None] = {}
    for candidate in candidates:
        try:
            seeds.setdefault(request_url(candidate), None)
        except BadURL as exc:
            raise ConfigError(f"bad seed URL {exc}") from None
    return list(seeds)


# The setting behind each refusal of the links' filters (topicspider.urls.refusal).
REFUSAL_SETTINGS = {"too_long": "URLLENGTH_LIMIT", "too_many_segments": "URL_MAX_PATH_SEGMENTS",
                    "path_repetition": "URL_MAX_PATH_REPEATS", URL_FILTER: "URL_FILTER_FILE"}


def seeds_under(seeds: list[str], rules: URLRules) -> list[str]:
    """The seeds as the crawl requests them, once each: through the links' normaliser
    (session ids stripped, as Nutch's injector normalises what it injects);
    :class:`ConfigError` for a seed the trap filters or the user's rules refuse."""
    return list(dict.fromkeys(seed_under(seed, rules) for seed in seeds))


def seed_under(url: str, rules: URLRules) -> str:
    """One seed as :func:`seeds_under` takes it."""
    url = strip_session_ids(url, rules.session_parameters)
    if refused := refusal(url, rules):
        raise ConfigError(f"bad seed URL {mask_url(url)!r}: refused by {REFUSAL_SETTINGS[refused]} ({refused})")
    return url


def _read_list_file(path: Path, what: str) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {exc}") from None
    # "#" starts a comment at the start of a line or after white space; inside a URL
    # it is a fragment.
    return [line for line in (re.split(r"(?:^|\s)#", raw, maxsplit=1)[0].strip() for raw in lines) if line]


def parse_depth(value: str | int) -> int:
    """A crawl depth: a whole number, 0 meaning the seeds alone."""
    try:
        depth = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"depth must be a whole number, got {value!r}") from None
    if depth < 0:
        raise ConfigError(f"depth must be 0 or more, got {depth}")
    return depth


def _number(settings: BaseSettings, name: str, kind: type[N], minimum: N) -> N:
    raw = settings.get(name)
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name} must be {noun}, got {raw!r}") from None
    if not value >= minimum:  # "not >=" so that NaN is refused too
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def get_int(settings: BaseSettings, name: str, minimum: int | None = None) -> int:
    """An integer setting of at least ``minimum`` (by default, its entry in INT_SETTINGS)."""
    return _number(settings, name, int, INT_SETTINGS[name] if minimum is None else minimum)


def get_float(settings: BaseSettings, name: str, minimum: float | None = None) -> float:
    """A number setting of at least ``minimum`` (by default, its entry in FLOAT_SETTINGS)."""
    return _number(settings, name, float, FLOAT_SETTINGS[name] if minimum is None else minimum)


def get_bool(settings: BaseSettings, name: str) -> bool:
    """A boolean setting; anything but the usual spellings is an error."""
    try:
        return settings.getbool(name)
    except ValueError:
        raise ConfigError(f"{name} must be true or false, got {settings.get(name)!r}") from None


def url_rules_from(settings: BaseSettings) -> URLRules:
    """The links' normaliser and filters, from ``URL_SESSION_PARAMETERS``,
    ``URLLENGTH_LIMIT``, ``URL_MAX_PATH_SEGMENTS``, ``URL_MAX_PATH_REPEATS`` and
    ``URL_FILTER_FILE``."""
    names = settings.getlist("URL_SESSION_PARAMETERS")
    for name in names:
        if not PARAMETER_NAME.fullmatch(name):
            raise ConfigError(f"URL_SESSION_PARAMETERS: {name!r} is not a URL parameter name")
    limit = get_int(settings, "URLLENGTH_LIMIT")
    return URLRules(frozenset(name.lower() for name in names), limit or sys.maxsize,
                    get_int(settings, "URL_MAX_PATH_SEGMENTS"), get_int(settings, "URL_MAX_PATH_REPEATS"),
                    _url_filter(settings.get("URL_FILTER_FILE") or ""))


def _url_filter(path: str) -> URLFilter | None:
    if not path:
        return None
    try:
        return parse_url_filter(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"URL_FILTER_FILE {path!r}: {exc}") from None


def near_distance_from(settings: BaseSettings) -> int | None:
    """``DUPLICATE_NEAR_DISTANCE``: the SimHash bits within which pages are near
    duplicates, or None when they are not looked for (-1, or ``DUPLICATE_CONTENT`` off)."""
    bits = get_int(settings, "DUPLICATE_NEAR_DISTANCE")
    if bits > MAX_DISTANCE:
        raise ConfigError(f"DUPLICATE_NEAR_DISTANCE must be from -1 to {MAX_DISTANCE}, got {bits}")
    return None if bits < 0 or not get_bool(settings, "DUPLICATE_CONTENT") else bits


PARAMETER_NAME = re.compile(r"[A-Za-z0-9_.~-]{1,100}")


def gc_thresholds_from(settings: BaseSettings) -> tuple[int, int, int] | None:
    """``GC_THRESHOLDS``: the three thresholds of Python's ``gc.set_threshold``, or None
    to keep Python's own (an empty value)."""
    raw = settings.get("GC_THRESHOLDS")
    parts = settings.getlist("GC_THRESHOLDS")
    if not parts:
        return None
    try:
        numbers = tuple(int(str(part).strip()) for part in parts)
    except ValueError:
        numbers = ()
    if len(numbers) != 3 or min(numbers) < 1:
        raise ConfigError(f"GC_THRESHOLDS must be three whole numbers, each at least 1, got {raw!r}")
    return numbers[0], numbers[1], numbers[2]


def check_typed_settings(settings: BaseSettings) -> None:
    """Raise :class:`ConfigError` for the first typed setting with a bad value."""
    for name in BOOL_SETTINGS:
        get_bool(settings, name)
    for name in INT_SETTINGS:
        get_int(settings, name)
    for name in FLOAT_SETTINGS:
        get_float(settings, name)
    url_rules_from(settings)
    near_distance_from(settings)
    gc_thresholds_from(settings)

"""The crawl's topic, built from the spider's ``topic``/``train``/``negatives``/``labels``
arguments and the ``TOPIC_*`` settings.

* ``-a topic=WORD[,WORD...]`` or ``-a topic=@file``: keywords, or a keyword file
  (``term weight`` lines), or a topic saved by ``scrapy topic-train -o``.
* ``-a train=URL_OR_PATH[,...]|@file``: sample pages to learn the topic from, with the
  model ``TOPIC_MODEL`` names (``centroid`` by default, or the seeds' ``lexicon``).
* ``-a negatives=URL_OR_PATH[,...]|@file``: pages off the topic, for a trained topic.
* ``-a labels=database|@file``: stored pages a person labelled relevant or not
  (:mod:`topicspider.storage.labels`), added to the samples and negatives.

Before the first seed, up to ``TOPIC_BACKGROUND_PAGES`` pages of the seeds' sites are
sampled (:class:`BackgroundSampler`): the seeds first, then pages drawn at random from
the links found so far, within the crawl's depth. They give each site's template
(``TOPIC_BOILERPLATE_SHARE``) and, for a trained topic, the background it is learnt
against. Sampled pages and downloaded samples are kept in memory
(:class:`ResponseCache`, at most :data:`CACHE_MAX_BYTES`) and served to the crawl when
it asks for them (:mod:`topicspider.middlewares.background`), so they cost no second
download. Samples, negatives and the background are downloaded through the crawler's own
downloader middlewares: robots.txt, the user agent and the per-host delay apply to them
as to any page. Settings: ``TOPIC_MODEL``, ``TOPIC_SEGMENTER``, ``TOPIC_USER_DICT``,
``TOPIC_TOP_K``, ``TOPIC_MAX_CHARS``, ``TOPIC_TITLE_WEIGHT``, ``TOPIC_BODY_WEIGHT``,
``TOPIC_BLOCK_WEIGHT``, ``TOPIC_TARGET_RECALL``, ``TOPIC_BACKGROUND_PAGES``,
``TOPIC_BOILERPLATE_SHARE``, ``TOPIC_EXPLAIN_TERMS``. Stats: ``topic/background_pages``,
``topic/background_failed``, ``topic/background_seconds``, ``topic/template_blocks``,
``topic/train_seconds``.
"""

from __future__ import annotations

import importlib.util
import logging
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import DeferredList, FirstError

from topicspider.analysis import Page, PageAnalysis, PageRules
from topicspider.config import ConfigError, get_bool, get_float, get_int, parse_list, refuse_bare_file
from topicspider.encoding import better_encoding
from topicspider.extract import extract_blocks, extract_title, html_root
from topicspider.pagepool import PagePoolFailed
from topicspider.reactor_tools import to_thread
from topicspider.storage import open_store
from topicspider.storage.labels import (
    LABELS_FROM_DATABASE,
    LabelledPage,
    labelled_pages,
    pages_by_url,
    read_labels_file,
)
from topicspider.topic.lexicon import Lexicon, keywords_lexicon
from topicspider.topic.learn import Learning, SampledPage, learn
from topicspider.topic.score import KINDS, Topic, TopicSpec, build_topic
from topicspider.topic.segment import Segmenter, check_segmenter_name, read_user_dict
from topicspider.topic.template import learn_templates
from topicspider.topic.topicfile import TopicFile, read_topic_file
from topicspider.urls import BadURL, canonical_url, request_url, site_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

PLAIN_TEXT_SUFFIXES = frozenset({".txt", ".text", ".md"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".shtml"})
# Sampled pages kept for the crawl to reuse: beyond this, a page is downloaded again.
CACHE_MAX_BYTES = 64 * 1024 * 1024
# The same sites give the same sample, run after run.
SAMPLE_SEED = 20_261_202
# Pages downloaded at once in each round of sampling; the downloader still keeps each
# host's delay.
SAMPLE_CONCURRENCY = 16
# Seconds a background page may take (at most DOWNLOAD_TIMEOUT): a round waits for its
# slowest page.
SAMPLE_TIMEOUT = 30.0
# A site whose host did not answer so many sampled pages is sampled no more.
SAMPLE_UNREACHABLE_LIMIT = 3


@dataclass(frozen=True)
class TopicArguments:
    """What ``-a topic``, ``-a train``, ``-a negatives`` and ``-a labels`` asked for, checked."""

    keywords: Lexicon | None = None
    saved: TopicFile | None = None  # a topic saved by topic-train
    samples: list[str] = field(default_factory=list)  # URLs and local paths
    negatives: list[str] = field(default_factory=list)
    labels: str = ""  # "database" or a labels file's path
    label_urls: dict[str, bool] = field(default_factory=dict)  # a labels file's labels

    @property
    def wanted(self) -> bool:
        return self.keywords is not None or self.saved is not None or bool(self.samples or self.labels)

    @property
    def trains(self) -> bool:
        """Whether a topic is learnt (or learnt again) from pages in this crawl."""
        return bool(self.samples or self.labels or self.negatives)


# Characters of a plain-text sample read to tell a list of samples from a sample.
LIST_PEEK_CHARS = 65_536

def parse_topic_arguments(topic: str = "", train: str = "", negatives: str = "", labels: str = "") -> TopicArguments:
    """Raise :class:`ConfigError` for a bad, empty or unreadable topic, sample list,
    negatives or labels file."""
    if topic.strip() and train.strip():
        raise ConfigError("give -a topic or -a train, not both")
    keywords, saved = None, None
    if topic.strip().startswith("@"):
        read = read_topic_file(Path(topic.strip()[1:]))
        keywords, saved = (read.spec.lexicon, None) if read.segmenter is None else (None, read)
    elif topic.strip():
        words = parse_list(topic, "topic")
        refuse_bare_file(topic, words, "topic")
        keywords = keywords_lexicon(words)
    samples = [_sample(source, "training sample") for source in parse_list(train, "training")] if train.strip() else []
    _refuse_lists_as_samples(train, samples, "train")
    negative_pages = _negatives(negatives)
    _refuse_lists_as_samples(negatives, negative_pages, "negatives")
    label_source, label_urls = _labels(labels)
    if (negative_pages or label_source) and keywords is not None:
        raise ConfigError("negatives and labels refine a trained topic: give -a train=... or a topic saved by "
                          "scrapy topic-train, not keywords")
    if negative_pages and not (samples or saved or label_source):
        raise ConfigError("negatives need something on the topic too: -a train=URL_OR_PATH[,...]")
    return TopicArguments(keywords, saved, samples, negative_pages, label_source, label_urls)


def _negatives(value: str) -> list[str]:
    if not value.strip():
        return []
    sources = parse_list(value, "negatives")
    if not sources:
        raise ConfigError("no negatives given: use -a negatives=URL_OR_PATH[,...] or -a negatives=@file")
    return [_sample(source, "negative") for source in sources]


def _labels(value: str) -> tuple[str, dict[str, bool]]:
    value = value.strip()
    if not value:
        return "", {}
    if value == LABELS_FROM_DATABASE:
        return value, {}
    if not value.startswith("@"):
        raise ConfigError(f"labels must be {LABELS_FROM_DATABASE!r} or @FILE of 'URL relevant|irrelevant' lines, "
                          f"got {value!r}")
    labels = read_labels_file(Path(value[1:]))
    try:
        return value, {canonical_url(request_url(url)): relevant for url, relevant in labels.items()}
    except BadURL as exc:
        raise ConfigError(f"labels file {value[1:]!r}: bad URL {exc}") from None


def _refuse_lists_as_samples(value: str, samples: list[str], argument: str) -> None:
    """A text file of URLs or paths given without ``@`` is a list of samples, not one:
    learning from its lines would learn the topic of URLs."""
    if value.strip().startswith("@"):
        return
    for sample in samples:
        if "://" not in sample and Path(sample).suffix.lower() in PLAIN_TEXT_SUFFIXES and _lists_sources(Path(sample)):
            raise ConfigError(f"-a {argument}={value.strip()}: {sample!r} is a list of URLs or paths, not a "
                              f"page; did you mean @{sample}?")


def _lists_sources(path: Path) -> bool:
    """Whether every line of ``path`` (but blanks and # comments) is an http(s) URL or a file's path."""
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            lines = [line.strip() for line in file.read(LIST_PEEK_CHARS).splitlines()]
    except OSError:
        return False
    lines = [line for line in lines if line and not line.startswith("#")]
    return bool(lines) and all(
        line.lower().startswith(("http://", "https://")) and " " not in line or Path(line).is_file()
        for line in lines)


def _sample(source: str, what: str) -> str:
    if source.lower().startswith(("http://", "https://")):
        try:
            return request_url(source)
        except BadURL as exc:
            raise ConfigError(f"bad {what} URL {exc}") from None
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"{what} {source!r} is neither an http(s) URL nor a readable file")
    if path.suffix.lower() not in HTML_SUFFIXES | PLAIN_TEXT_SUFFIXES:
        kinds = ", ".join(sorted(HTML_SUFFIXES | PLAIN_TEXT_SUFFIXES))
        raise ConfigError(f"{what} {source!r} is not an HTML or text file ({kinds})")
    return str(path)


def check_topic_settings(settings: BaseSettings) -> None:
    """Raise :class:`ConfigError` for a topic setting no crawl could use."""
    backend = settings.get("TOPIC_SEGMENTER")
    check_segmenter_name(backend)
    if importlib.util.find_spec(backend) is None:
        raise ConfigError(f"TOPIC_SEGMENTER is {backend!r} but {backend} is not installed: pip install {backend}")
    model = settings.get("TOPIC_MODEL")
    if model not in KINDS:
        raise ConfigError(f"TOPIC_MODEL must be one of {', '.join(KINDS)}, got {model!r}")
    user_dict = settings.get("TOPIC_USER_DICT") or ""
    if user_dict:
        read_user_dict(Path(user_dict))
    highest = get_float(settings, "TOPIC_TITLE_WEIGHT") + get_float(settings, "TOPIC_BODY_WEIGHT")
    if highest <= 0:
        raise ConfigError("TOPIC_TITLE_WEIGHT and TOPIC_BODY_WEIGHT cannot both be 0")
    threshold = threshold_setting(settings)
    if threshold is not None and threshold > highest:
        raise ConfigError(f"TOPIC_THRESHOLD {threshold} is above the highest possible score, {highest}")
    recall = get_float(settings, "TOPIC_TARGET_RECALL")
    if not recall < 1:
        raise ConfigError(f"TOPIC_TARGET_RECALL must be below 1, got {recall}")
    share = get_float(settings, "TOPIC_BOILERPLATE_SHARE")
    if share > 1:
        raise ConfigError(f"TOPIC_BOILERPLATE_SHARE must be at most 1, got {share}")


def threshold_setting(settings: BaseSettings) -> float | None:
    """``TOPIC_THRESHOLD``, or None when it is empty: each topic's own threshold."""
    if settings.get("TOPIC_THRESHOLD") in (None, ""):
        return None
    return get_float(settings, "TOPIC_THRESHOLD", minimum=-1.0)


def check_topic_arguments(settings: BaseSettings, arguments: TopicArguments, seeds: list[str] | None = None) -> None:
    """Raise :class:`ConfigError` for settings that need a topic, or samples, and lack
    them, a saved topic cut by another segmenter, a centroid topic with nothing to
    learn against, and labels naming pages the database does not hold."""
    if settings.get("TOPIC_TRAIN_OUTPUT") and not arguments.trains:
        raise ConfigError("TOPIC_TRAIN_OUTPUT needs training samples: -a train=URL_OR_PATH[,...] or -a labels=...")
    if get_bool(settings, "TOPIC_BEST_FIRST") and not arguments.wanted:
        # Without a topic every priority is the same, and the level barrier would be off.
        raise ConfigError("TOPIC_BEST_FIRST needs a topic: -a topic=... or -a train=...")
    saved = arguments.saved
    if saved is not None and saved.segmenter != settings.get("TOPIC_SEGMENTER"):
        raise ConfigError(f"topic file {saved.path!r} was trained with the {saved.segmenter} segmenter, and "
                          f"TOPIC_SEGMENTER is {settings.get('TOPIC_SEGMENTER')}: train it again, or set "
                          f"TOPIC_SEGMENTER={saved.segmenter}")
    if arguments.trains and saved is None and settings.get("TOPIC_MODEL") == "centroid":
        start = list(seeds or []) + [source for source in arguments.samples if source.startswith("http")]
        if not arguments.negatives and not (start and get_int(settings, "TOPIC_BACKGROUND_PAGES") > 0):
            raise ConfigError("a centroid topic is learnt against a background: give seed URLs (their sites are "
                              "sampled, TOPIC_BACKGROUND_PAGES) or -a negatives=..., or set TOPIC_MODEL=lexicon")
    if arguments.labels:
        read_labels(settings, arguments)


def read_labels(settings: BaseSettings, arguments: TopicArguments) -> list[LabelledPage]:
    """The labelled pages ``-a labels`` names, from the crawl's database."""
    store = open_store(settings.get("DATABASE_URL") or "", index=False)
    try:
        if arguments.labels == LABELS_FROM_DATABASE:
            pages = store.transaction(labelled_pages)
            if not pages:
                raise ConfigError("no page is labelled in the database (label pages in scrapy console first)")
            return pages
        pages, missing = store.transaction(lambda cursor, dialect: pages_by_url(cursor, dialect, arguments.label_urls))
    finally:
        store.close()
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"labels name pages that are not in the database: {missing[0]}{more}")
    return pages


def page_blocks(response: Response) -> tuple[str, list[str]]:
    """A page's title and blocks of text; plain text is one block and has no title."""
    if isinstance(response, HtmlResponse):
        root = html_root(response.text, response.url)
        return extract_title(root), extract_blocks(root)
    if isinstance(response, TextResponse):
        return "", [response.text]
    return "", []


def _file_response(path: Path) -> Response:
    body = path.read_bytes()
    cls = TextResponse if path.suffix.lower() in PLAIN_TEXT_SUFFIXES else HtmlResponse
    return cls(url=path.resolve().as_uri(), body=body, encoding=better_encoding(body, None) or "utf-8")


class ResponseCache:
    """Pages downloaded to sample the background, by canonical URL, until the crawl
    asks for them: at most ``max_bytes`` of bodies."""

    def __init__(self, strip_trailing_slash: bool, max_bytes: int = CACHE_MAX_BYTES) -> None:
        self.strip_trailing_slash = strip_trailing_slash
        self.max_bytes = max_bytes
        self.size = 0
        self.responses: dict[str, Response] = {}

    def put(self, response: Response) -> None:
        if self.size + len(response.body) > self.max_bytes:
            return
        key = canonical_url(response.url, self.strip_trailing_slash)
        if key not in self.responses:
            self.responses[key] = response
            self.size += len(response.body)

    def take(self, url: str) -> Response | None:
        response = self.responses.pop(canonical_url(url, self.strip_trailing_slash), None)
        if response is not None:
            self.size -= len(response.body)
        return response


@dataclass(frozen=True)
class Sampled:
    """What sampling one page gave: the page (None if it could not be had) and its links."""

    page: SampledPage | None
    links: list[str] = field(default_factory=list)
    unreachable: bool = False  # its host did not answer


class BackgroundSampler:
    """Which page to sample next: each site's start pages first, then pages drawn at
    random among the links found on its sampled pages, the sites taken in turn.
    Drawing at random, rather than breadth-first, spreads the sample over the site's
    sections instead of the few pages next to the seeds."""

    def __init__(self, start_urls: list[str], max_depth: int, limit: int, strip_trailing_slash: bool,
                 excluded: frozenset[str] | set[str] = frozenset()) -> None:
        self.limit = limit
        self.max_depth = max_depth
        self.strip_trailing_slash = strip_trailing_slash
        self.random = random.Random(SAMPLE_SEED)
        self.pending: dict[str, list[tuple[str, int]]] = {}
        self.seen: set[str] = set(excluded)
        self.unreachable: Counter[str] = Counter()  # site -> sampled pages its host did not answer
        self.starts = 0
        for url in start_urls:
            self.add(url, 0)
            self.starts += 1
        self.sites = list(self.pending)
        self.turn = 0
        self.taken = 0  # pages handed out, less those that failed

    def add(self, url: str, depth: int) -> None:
        key = canonical_url(url, self.strip_trailing_slash)
        site = site_of(url)
        if key in self.seen or depth > self.max_depth or self.unreachable[site] >= SAMPLE_UNREACHABLE_LIMIT:
            return
        self.seen.add(key)
        self.pending.setdefault(site, []).append((url, depth))

    def next(self) -> tuple[str, int] | None:
        """The next page to download, or None when none is pending now."""
        if self.taken >= self.limit:
            return None
        for _ in range(len(self.sites)):
            site = self.sites[self.turn % len(self.sites)]
            self.turn += 1
            waiting = self.pending.get(site)
            if waiting:
                self.taken += 1
                # The start pages in order, then a random draw.
                index = 0 if self.taken <= self.starts else self.random.randrange(len(waiting))
                return waiting.pop(index)
        return None

    def next_batch(self, size: int) -> list[tuple[str, int]]:
        """Up to ``size`` pages to download now."""
        batch: list[tuple[str, int]] = []
        while len(batch) < size and (chosen := self.next()) is not None:
            batch.append(chosen)
        return batch

    def failed(self, url: str, unreachable: bool = False) -> None:
        """A page handed out did not make it into the sample: another may take its place.
        ``unreachable``: its host did not answer; after :data:`SAMPLE_UNREACHABLE_LIMIT`
        such pages, its site is sampled no more."""
        self.taken -= 1
        if unreachable:
            site = site_of(url)
            self.unreachable[site] += 1
            if self.unreachable[site] == SAMPLE_UNREACHABLE_LIMIT:
                self.pending.pop(site, None)
                logger.warning("Background: %s did not answer %d pages; sampling it no more", site,
                               SAMPLE_UNREACHABLE_LIMIT)


class TopicBuilder:
    """Builds the :class:`Topic` when the crawl opens, off the reactor thread where slow."""

    def __init__(self, crawler: Crawler, arguments: TopicArguments, seeds: list[str], rules: PageRules,
                 analyse: Callable[[Page], Awaitable[PageAnalysis]], run: Callable[..., Awaitable[Any]]) -> None:
        """``analyse`` reads a background page under :attr:`sampling_rules`: the crawl's
        page-analysis processes, started with them while the topic is learnt; ``run``
        calls a function in one of them (:func:`~topicspider.topic.learn.learn`, which
        needs their dictionary)."""
        settings = crawler.settings
        check_topic_settings(settings)
        self.crawler = crawler
        self.settings = settings
        self.arguments = arguments
        self.seeds = seeds
        self.rules = rules
        self.analyse = analyse
        self.run = run
        self.model: str = settings.get("TOPIC_MODEL")
        self.top_k = get_int(settings, "TOPIC_TOP_K")
        self.max_chars = get_int(settings, "TOPIC_MAX_CHARS")
        self.title_weight = get_float(settings, "TOPIC_TITLE_WEIGHT")
        self.body_weight = get_float(settings, "TOPIC_BODY_WEIGHT")
        self.block_weight = get_float(settings, "TOPIC_BLOCK_WEIGHT")
        self.target_recall = get_float(settings, "TOPIC_TARGET_RECALL")
        self.background_pages = get_int(settings, "TOPIC_BACKGROUND_PAGES")
        self.boilerplate_share = get_float(settings, "TOPIC_BOILERPLATE_SHARE")
        self.explain_terms = get_int(settings, "TOPIC_EXPLAIN_TERMS")
        self.backend: str = settings.get("TOPIC_SEGMENTER")
        user_dict = settings.get("TOPIC_USER_DICT") or ""
        self.segmenter = Segmenter(self.backend, keep=read_user_dict(Path(user_dict)) if user_dict else [])
        # Background pages are read for their blocks and all their links, nothing stored
        # (no index terms, digest or SimHash); for a topic to learn, their words are
        # counted in the same pass.
        learns = arguments.saved is None and arguments.keywords is None
        self.sampling_rules = replace(rules, topic=None, search_index=False, content_digest=False, simhash=False,
                                      keep_blocks=True, follow_all=True,
                                      count_terms=(self.segmenter, self.max_chars) if learns else None)
        # Pages are scored in this process only without page-analysis processes.
        self.scores_here = get_int(settings, "PAGE_PROCESSES") == 0
        self.cache = ResponseCache(rules.strip_trailing_slash)
        self.spec: TopicSpec | None = None

    async def build(self) -> Topic:
        """Raise :class:`ConfigError` when a sample cannot be read or fetched."""
        if self.scores_here:
            # Pages are cut in this process; otherwise only the page-analysis processes
            # cut text (a trained topic's pages too, learn), each with its own dictionary.
            await to_thread(self.segmenter.load)
        gathered = await self._gather()
        started = monotonic()
        if isinstance(gathered, Learning):
            self.spec, topic = await self.run(learn, gathered, self.segmenter)
        else:
            self.spec = gathered
            topic = await to_thread(build_topic, gathered, self.segmenter, self.max_chars, self.explain_terms)
        self._count("topic/train_seconds", round(monotonic() - started, 3))
        logger.info("Topic (%s, %s): threshold %.4f; the heaviest terms %s", topic.kind, self._origin(),
                    topic.threshold, ", ".join(term for term, _ in topic.top_terms(10)))
        return topic

    def _origin(self) -> str:
        spec = self.spec
        if spec is None or spec.keywords:
            return "keywords"
        return (f"{len(spec.samples)} samples, {len(spec.negatives)} negatives, "
                f"{len(spec.background)} background pages")

    async def _gather(self) -> TopicSpec | Learning:
        """A keyword topic's or a saved topic's spec; or what a trained topic is to be
        learnt from."""
        arguments = self.arguments
        saved = arguments.saved.spec if arguments.saved is not None else None
        if saved is not None and not arguments.trains:
            return saved
        # Samples and negatives first: one that cannot be read ends the crawl at once.
        samples = await self._pages(arguments.samples, "training sample")
        negatives = await self._pages(arguments.negatives, "negative")
        labelled = await to_thread(read_labels, self.settings, arguments) if arguments.labels else []
        # A sample is not background too.
        excluded = {canonical_url(page.url) for page in samples + negatives if page.site} | {page.url for page in labelled}
        background = [] if saved is not None else await self._sample_background(excluded)
        templates = saved.templates if saved is not None else learn_templates(
            ((page.site, page.blocks) for page in background), self.boilerplate_share)
        self._count("topic/template_blocks", len(templates))
        if arguments.keywords is not None:
            return TopicSpec("lexicon", lexicon=arguments.keywords, templates=templates,
                             title_weight=self.title_weight, body_weight=self.body_weight)
        return Learning(self.model, samples, list(arguments.samples), negatives, background, labelled, templates, saved,
                        self.title_weight, self.body_weight, self.block_weight, self.top_k, self.target_recall,
                        self.max_chars, self.explain_terms)

    async def _pages(self, sources: list[str], what: str) -> list[SampledPage]:
        results = await maybe_deferred_to_future(
            DeferredList([deferred_from_coro(self._read_page(source)) for source in sources], consumeErrors=True)
        )
        pages: list[SampledPage] = []
        for source, (ok, value) in zip(sources, results, strict=True):
            if not ok:
                raise ConfigError(f"{what} {source} could not be read: {value.getErrorMessage()}")
            pages.append(value)
        return pages

    async def _read_page(self, source: str) -> SampledPage:
        if source.startswith(("http://", "https://")):
            response = await self._download(source)
            if response.url == source:
                self.cache.put(response)  # the crawl may ask for it too
        else:
            response = await to_thread(_file_response, Path(source))
        # Parsing a page of up to DOWNLOAD_MAXSIZE is no work for the reactor thread.
        title, blocks = await to_thread(page_blocks, response)
        if not (title.strip() or any(blocks)):
            raise ValueError("it holds no text")
        return SampledPage(source, site_of(source) if "://" in source else "", title, blocks)

    async def _download(self, url: str, timeout: float | None = None) -> Response:
        assert self.crawler.engine is not None
        meta: dict[str, object] = {"site": site_of(url)}
        if timeout is not None:
            meta["download_timeout"] = min(timeout, get_float(self.settings, "DOWNLOAD_TIMEOUT"))
        request = Request(url, meta=meta, dont_filter=True)
        try:
            response = await self.crawler.engine.download_async(request)
        except IgnoreRequest as exc:
            raise ValueError(str(exc) or "refused (robots.txt or policy)") from None
        if not 200 <= response.status < 300:
            raise ValueError(f"HTTP {response.status}")
        return response

    def _start_urls(self) -> list[str]:
        """The seeds; without them (topic-train), the home pages of the http(s) samples'
        and negatives' hosts."""
        if self.seeds:
            return self.seeds
        homes = (urljoin(source, "/") for source in [*self.arguments.samples, *self.arguments.negatives]
                 if source.startswith(("http://", "https://")))
        return list(dict.fromkeys(homes))

    async def _sample_background(self, excluded: set[str]) -> list[SampledPage]:
        """Pages of the crawl's sites, but for those in ``excluded`` (canonical URLs)."""
        start = self._start_urls()
        if not start or self.background_pages == 0:
            return []
        started = monotonic()
        sampler = BackgroundSampler(start, self.rules.max_depth, self.background_pages, self.rules.strip_trailing_slash,
                                    excluded)
        pages: list[SampledPage] = []
        # In rounds, the links found added in the round's order, not as downloads end: the
        # same sites give the same sample, however fast each page comes.
        while batch := sampler.next_batch(SAMPLE_CONCURRENCY):
            try:
                results = await maybe_deferred_to_future(DeferredList(
                    [deferred_from_coro(self._sample(url, depth)) for url, depth in batch],
                    fireOnOneErrback=True, consumeErrors=True))
            except FirstError as error:  # PagePoolFailed: the crawl cannot go on
                raise error.subFailure.value from None
            for (url, depth), (_, result) in zip(batch, results, strict=True):
                if result.page is None:
                    sampler.failed(url, result.unreachable)
                    self._count("topic/background_failed")
                    continue
                pages.append(result.page)
                for link in result.links:
                    sampler.add(link, depth + 1)
        seconds = monotonic() - started
        self._count("topic/background_pages", len(pages))
        self._count("topic/background_seconds", round(seconds, 3))
        logger.info("Background: %d pages of %d sites sampled in %.1f s", len(pages), len({p.site for p in pages}),
                    seconds)
        return pages

    async def _sample(self, url: str, depth: int) -> Sampled:
        site = site_of(url)
        try:
            response = await self._download(url, SAMPLE_TIMEOUT)
        except ValueError as exc:  # an HTTP error status, or refused by robots.txt
            logger.debug("Background page %s not sampled: %s", url, exc)
            return Sampled(None)
        except Exception as exc:  # noqa: BLE001 - a timeout, a connection or DNS failure
            logger.debug("Background page %s not sampled: %s", url, exc)
            return Sampled(None, unreachable=True)
        if not isinstance(response, HtmlResponse):
            return Sampled(None)
        page = Page(response.url, response.body, response.encoding, site, depth)  # type: ignore[attr-defined]
        try:
            analysis = await self.analyse(page)
        except PagePoolFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - PageLost, or a bug on one page: not a reason to stop
            logger.warning("Background page %s not sampled: %s", url, exc)
            return Sampled(None)
        if response.url == url:
            self.cache.put(response)
        return Sampled(SampledPage(url, site, analysis.title, analysis.blocks, analysis.terms),
                       [link.url for link in analysis.links])

    def _count(self, key: str, value: float = 1) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(key, value)

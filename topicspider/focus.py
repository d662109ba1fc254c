"""The crawl's topic, built from the spider's ``topic``/``train`` arguments and the
``TOPIC_*`` settings.

``-a topic=WORD[,WORD...]`` or ``-a topic=@file`` (``term weight`` lines) gives the
topic; ``-a train=URL_OR_PATH[,...]`` or ``-a train=@file`` learns it from sample pages.
Sample URLs are downloaded through the crawler's own downloader middlewares, so
robots.txt, the user agent and the per-host delay apply to them as to any page.
Settings: ``TOPIC_SEGMENTER``, ``TOPIC_USER_DICT``, ``TOPIC_TOP_K``, ``TOPIC_MAX_CHARS``,
``TOPIC_TITLE_WEIGHT``, ``TOPIC_BODY_WEIGHT``.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import DeferredList

from topicspider.config import ConfigError, get_bool, get_float, get_int, parse_list
from topicspider.encoding import better_encoding
from topicspider.extract import extract_text, extract_title, html_root
from topicspider.reactor_tools import to_thread
from topicspider.topic.lexicon import Lexicon, keywords_lexicon, read_lexicon, train_lexicon
from topicspider.topic.score import Topic
from topicspider.topic.segment import Segmenter, check_segmenter_name, read_user_dict
from topicspider.urls import BadURL, request_url, site_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

PLAIN_TEXT_SUFFIXES = frozenset({".txt", ".text", ".md"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".shtml"})


@dataclass(frozen=True)
class TopicArguments:
    """What ``-a topic`` and ``-a train`` asked for, checked."""

    lexicon: Lexicon | None = None
    samples: list[str] = field(default_factory=list)  # URLs and local paths

    @property
    def wanted(self) -> bool:
        return self.lexicon is not None or bool(self.samples)


def parse_topic_arguments(topic: str = "", train: str = "") -> TopicArguments:
    """Raise :class:`ConfigError` for a bad, empty or unreadable topic or sample list."""
    if topic.strip() and train.strip():
        raise ConfigError("give -a topic or -a train, not both")
    if topic.strip():
        if topic.strip().startswith("@"):
            return TopicArguments(lexicon=read_lexicon(Path(topic.strip()[1:])))
        return TopicArguments(lexicon=keywords_lexicon(parse_list(topic, "topic")))
    if train.strip():
        return TopicArguments(samples=[_sample(source) for source in parse_list(train, "training")])
    return TopicArguments()


def _sample(source: str) -> str:
    if source.lower().startswith(("http://", "https://")):
        try:
            return request_url(source)
        except BadURL as exc:
            raise ConfigError(f"bad training URL {exc}") from None
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"training sample {source!r} is neither an http(s) URL nor a readable file")
    if path.suffix.lower() not in HTML_SUFFIXES | PLAIN_TEXT_SUFFIXES:
        kinds = ", ".join(sorted(HTML_SUFFIXES | PLAIN_TEXT_SUFFIXES))
        raise ConfigError(f"training sample {source!r} is not an HTML or text file ({kinds})")
    return str(path)


def check_topic_settings(settings: BaseSettings) -> None:
    """Raise :class:`ConfigError` for a topic setting no crawl could use."""
    backend = settings.get("TOPIC_SEGMENTER")
    check_segmenter_name(backend)
    if importlib.util.find_spec(backend) is None:
        raise ConfigError(f"TOPIC_SEGMENTER is {backend!r} but {backend} is not installed: pip install {backend}")
    user_dict = settings.get("TOPIC_USER_DICT") or ""
    if user_dict:
        read_user_dict(Path(user_dict))
    highest = get_float(settings, "TOPIC_TITLE_WEIGHT") + get_float(settings, "TOPIC_BODY_WEIGHT")
    if highest <= 0:
        raise ConfigError("TOPIC_TITLE_WEIGHT and TOPIC_BODY_WEIGHT cannot both be 0")
    threshold = get_float(settings, "TOPIC_THRESHOLD")
    if threshold > highest:
        raise ConfigError(f"TOPIC_THRESHOLD {threshold} is above the highest possible score, {highest}")


def check_topic_arguments(settings: BaseSettings, arguments: TopicArguments) -> None:
    """Raise :class:`ConfigError` for settings that need a topic, or samples, and lack them."""
    if settings.get("TOPIC_TRAIN_OUTPUT") and not arguments.samples:
        raise ConfigError("TOPIC_TRAIN_OUTPUT needs training samples: -a train=URL_OR_PATH[,...]")
    if get_bool(settings, "TOPIC_BEST_FIRST") and not arguments.wanted:
        # Without a topic every priority is the same, and the level barrier would be off.
        raise ConfigError("TOPIC_BEST_FIRST needs a topic: -a topic=... or -a train=...")


def page_words(response: Response) -> tuple[str, str]:
    """A page's title and visible text; plain text has no title."""
    if isinstance(response, HtmlResponse):
        root = html_root(response.text, response.url)
        return extract_title(root), extract_text(root)
    if isinstance(response, TextResponse):
        return "", response.text
    return "", ""


def _file_response(path: Path) -> Response:
    body = path.read_bytes()
    cls = TextResponse if path.suffix.lower() in PLAIN_TEXT_SUFFIXES else HtmlResponse
    return cls(url=path.resolve().as_uri(), body=body, encoding=better_encoding(body, None) or "utf-8")


class TopicBuilder:
    """Builds the :class:`Topic` when the crawl opens, off the reactor thread where slow."""

    def __init__(self, crawler: Crawler, arguments: TopicArguments) -> None:
        settings = crawler.settings
        check_topic_settings(settings)
        self.crawler = crawler
        self.arguments = arguments
        self.backend: str = settings.get("TOPIC_SEGMENTER")
        self.user_dict = settings.get("TOPIC_USER_DICT") or ""
        self.top_k = get_int(settings, "TOPIC_TOP_K")
        self.max_chars = get_int(settings, "TOPIC_MAX_CHARS")
        self.title_weight = get_float(settings, "TOPIC_TITLE_WEIGHT")
        self.body_weight = get_float(settings, "TOPIC_BODY_WEIGHT")
        self.sample_text_max_chars = get_int(settings, "EXTRACT_TEXT_MAX_CHARS")
        # Pages are scored in this process only without page-analysis processes.
        self.scores_here = get_int(settings, "PAGE_PROCESSES") == 0

    async def build(self) -> Topic:
        """Raise :class:`ConfigError` when a sample cannot be read or fetched."""
        keep = read_user_dict(Path(self.user_dict)) if self.user_dict else []
        segmenter = Segmenter(self.backend, keep=keep)
        if self.arguments.samples or self.scores_here:
            # Otherwise only the page-analysis processes cut text: each loads its own.
            await to_thread(segmenter.load)
        lexicon = self.arguments.lexicon or await self._train(segmenter)
        return Topic(lexicon, segmenter, self.title_weight, self.body_weight, self.max_chars)

    async def _train(self, segmenter: Segmenter) -> Lexicon:
        samples = self.arguments.samples
        results = await maybe_deferred_to_future(
            DeferredList([deferred_from_coro(self._sample_text(source)) for source in samples], consumeErrors=True)
        )
        texts: list[str] = []
        for source, (ok, value) in zip(samples, results, strict=True):
            if not ok:
                raise ConfigError(f"training sample {source} could not be read: {value.getErrorMessage()}")
            texts.append(value)
        documents = await to_thread(lambda: [segmenter.terms(text) for text in texts])
        for source, document in zip(samples, documents, strict=True):
            if not document:
                raise ConfigError(f"training sample {source} holds no words to learn from")
        lexicon = train_lexicon(documents, self.top_k)
        logger.info("Topic trained from %d samples: %d terms, the heaviest %s",
                    len(samples), len(lexicon), ", ".join(list(lexicon.weights)[:10]))
        return lexicon

    async def _sample_text(self, source: str) -> str:
        if source.startswith(("http://", "https://")):
            response = await self._download(source)
        else:
            response = await to_thread(_file_response, Path(source))
        # Parsing a page of up to DOWNLOAD_MAXSIZE is no work for the reactor thread.
        title, text = await to_thread(page_words, response)
        if not (title or text).strip():
            raise ValueError("it holds no text")
        return f"{title}\n{text[: self.sample_text_max_chars]}"

    async def _download(self, url: str) -> Response:
        assert self.crawler.engine is not None
        request = Request(url, meta={"site": site_of(url)}, dont_filter=True)
        try:
            response = await self.crawler.engine.download_async(request)
        except IgnoreRequest as exc:
            raise ValueError(str(exc) or "refused (robots.txt or policy)") from None
        if not 200 <= response.status < 300:
            raise ValueError(f"HTTP {response.status}")
        return response

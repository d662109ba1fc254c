"""The item topicspider emits for every stored page."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PageItem:
    """One fetched HTML page. ``url`` is the canonical URL, the page's identity."""

    url: str
    title: str
    depth: int
    http_status: int
    fetched_at: str
    text: str
    emails: list[str] = field(default_factory=list)
    relevance: float | None = None  # the topic score A; None without a topic
    relevant: bool | None = None  # relevance >= the topic's threshold; not stored
    relevance_terms: str | None = None  # the terms that weighed most in the score
    content_type: str = ""
    encoding: str = ""
    content_length: int = 0
    # The page's search index terms and counts, or (SQLite) the text its index takes,
    # worked out off the reactor with the rest of the page (topicspider.analysis); not
    # stored as such. None: the store works them out itself.
    search_terms: dict[str, int] | str | None = None
    # The canonical URL of the page stored before with the same text: this one is
    # stored as an alias of it (page_aliases), not as a page.
    duplicate_of: str | None = None
    # The URL of a page stored before whose text is nearly the same (SimHash).
    near_duplicate_of: str | None = None

"""Storage backends behind ``DATABASE_URL``.

A backend is a small synchronous class (:class:`Store`); the storage pipeline runs it
on a thread of its own, so a backend never has to think about the reactor. Adding a
backend means one module and one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from topicspider.config import ConfigError
from topicspider.items import PageItem
from topicspider.urls import mask_url

if TYPE_CHECKING:
    from topicspider.storage.dialect import Dialect

T = TypeVar("T")

# scheme -> "module:Class", imported only when used so an unused backend's driver
# need not be installed.
BACKENDS: dict[str, str] = {
    "sqlite": "topicspider.storage.sqlite:SQLiteStore",
    "mysql": "topicspider.storage.mysql:MySQLStore",
}


# Values per "IN (...)" look-up: SQLite's host-parameter limit is 999 in old builds.
PARAMETER_CHUNK = 500


def chunks(values: Sequence[T], size: int = PARAMETER_CHUNK) -> Iterator[list[T]]:
    """``values`` in consecutive lists of at most ``size``."""
    for start in range(0, len(values), size):
        yield list(values[start:start + size])


class StorageError(RuntimeError):
    """The database refused or lost a write. ``retryable``: the same write may succeed
    later (connection lost, server restarting, lock timeout), as opposed to a refusal
    of the data itself."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class Store(Protocol):
    """What the storage pipeline needs from a backend. Calls come from one thread."""

    def write_pages(self, pages: Sequence[PageItem]) -> int:
        """Insert or update ``pages`` and their e-mails in one transaction; return the
        number of e-mail rows written."""
        ...

    def transaction(self, work: Callable[[Any, Dialect], T], *, write: bool = False) -> T:
        """``work(cursor, dialect)``'s result, in a transaction of its own: the search
        index's and the console's queries (:mod:`topicspider.search.index`)."""
        ...

    def close(self) -> None: ...


@dataclass
class BatchOutcome:
    written: int = 0  # pages, aliases apart
    emails: int = 0
    refused: list[tuple[PageItem, str]] = field(default_factory=list)  # with the database's reason
    aliases: int = 0  # pages stored as aliases of another (duplicate_of)

    def __add__(self, other: BatchOutcome) -> BatchOutcome:
        return BatchOutcome(self.written + other.written, self.emails + other.emails, self.refused + other.refused,
                            self.aliases + other.aliases)


def split_aliases(items: Sequence[PageItem]) -> tuple[list[PageItem], list[PageItem]]:
    """The pages to store as such, and the aliases: pages whose text one stored before
    has (``duplicate_of``)."""
    pages = [item for item in items if item.duplicate_of is None]
    return pages, [item for item in items if item.duplicate_of is not None]


def write_isolating(store: Store, pages: Sequence[PageItem]) -> BatchOutcome:
    """Write ``pages`` in one transaction; if the database refuses the batch (not a
    retryable failure), write its halves apart, down to single pages, so that only the
    pages it refuses are set aside. A retryable :class:`StorageError` is raised, for the
    caller to try the whole batch again (pages are upserted, so rewriting is harmless)."""
    try:
        emails = store.write_pages(pages)
        aliases = sum(page.duplicate_of is not None for page in pages)
        return BatchOutcome(len(pages) - aliases, emails, aliases=aliases)
    except StorageError as exc:
        if exc.retryable:
            raise
        if len(pages) == 1:
            return BatchOutcome(refused=[(pages[0], str(exc))])
    middle = len(pages) // 2
    return write_isolating(store, pages[:middle]) + write_isolating(store, pages[middle:])


def scheme_of(database_url: str) -> str:
    """The backend's name in ``database_url`` (``mysql`` for ``mysql+pymysql://``)."""
    return urlsplit(database_url).scheme.lower().split("+", 1)[0]


def backend_for(database_url: str) -> Callable[..., Store]:
    """The backend class for ``database_url``; :class:`ConfigError` for an unknown scheme."""
    scheme = scheme_of(database_url)
    target = BACKENDS.get(scheme)
    if target is None:
        known = ", ".join(f"{name}://" for name in sorted(BACKENDS))
        raise ConfigError(
            f"DATABASE_URL {mask_url(database_url)!r}: unknown scheme {scheme!r} (known: {known})"
        )
    module_name, class_name = target.split(":")
    return getattr(import_module(module_name), class_name)


def open_store(database_url: str, *, index: bool = True) -> Store:
    """Connect to ``database_url`` and create the schema if it is absent; ``index``:
    index the pages it writes for search (``SEARCH_INDEX``).

    Raises :class:`ConfigError` when the URL is bad or the database cannot be opened.
    """
    return backend_for(database_url)(database_url, index=index)

"""A storage connection on a thread of its own, for components other than the storage
pipeline that read or write the database during a crawl (live status, control inbox).
A backend connection is used by one thread only, and the reactor thread never waits
on the database."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from topicspider.reactor_tools import in_thread, thread_pool
from topicspider.storage import Store, open_store
from topicspider.storage.dialect import Dialect

T = TypeVar("T")


class StoreThread:
    def __init__(self, database_url: str, name: str) -> None:
        self.database_url = database_url
        self.pool = thread_pool(name)
        self.store: Store | None = None

    async def open(self) -> None:
        self.pool.start()
        self.store = await in_thread(self.pool, open_store, self.database_url)

    async def transaction(self, work: Callable[[Any, Dialect], T], *, write: bool = False) -> T:
        if self.store is None:
            raise RuntimeError("the database is not open")
        return await in_thread(self.pool, partial(self.store.transaction, work, write=write))

    async def close(self) -> None:
        try:
            if self.store is not None:
                await in_thread(self.pool, self.store.close)
        finally:
            self.store = None
            if self.pool.started:
                self.pool.stop()

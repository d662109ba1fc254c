"""Waiting, scheduling and thread or process hand-off on the Twisted reactor, from coroutines.

The reactor is imported inside each function, never at module load: importing it at
load would install Twisted's default reactor before Scrapy installs the asyncio one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from threading import Thread
from typing import Any, TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

T = TypeVar("T")


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor."""
    from twisted.internet import reactor

    await maybe_deferred_to_future(deferLater(reactor, seconds))


def call_later(seconds: float, function: Callable[[], Any]) -> None:
    """Run ``function`` on the reactor thread after ``seconds``."""
    from twisted.internet import reactor

    reactor.callLater(seconds, function)


def thread_pool(name: str, threads: int = 1) -> ThreadPool:
    """A component's own pool for its blocking calls (a database, Redis). Its threads
    never keep the process alive: a forced stop (a second Ctrl-C or SIGTERM) stops the
    reactor without closing the crawl, so nothing would ever stop the pool, and Python
    waits for every thread that is not a daemon before it exits. What such a thread was
    writing is lost as in a kill, which the stores are made to survive."""
    pool = ThreadPool(minthreads=1, maxthreads=threads, name=name)
    pool.threadFactory = partial(Thread, daemon=True)  # type: ignore[method-assign]
    return pool


async def in_thread(pool: ThreadPool, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on one of ``pool``'s threads, awaited from the reactor."""
    from twisted.internet import reactor

    return await maybe_deferred_to_future(deferToThreadPool(reactor, pool, function, *args))


async def to_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the reactor's shared thread pool, awaited from the reactor."""
    from twisted.internet import reactor

    return await in_thread(reactor.getThreadPool(), function, *args)


def deferred_from_future(future: Future[T]) -> Deferred[T]:
    """A Deferred fired on the reactor thread when ``future`` (of a thread or process
    pool) is done; a Deferred cancelled or timed out meanwhile is left as it is."""
    from twisted.internet import reactor

    deferred: Deferred[T] = Deferred()

    def fire(done: Future[T]) -> None:
        if deferred.called:
            return
        try:
            result = done.result()  # raises CancelledError for a cancelled future
        except BaseException as error:
            deferred.errback(error)
        else:
            deferred.callback(result)

    future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
    return deferred

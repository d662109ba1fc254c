"""Distributed mode: several workers share one crawl through Redis (scrapy-redis).

Setting ``REDIS_URL`` (``redis://[:password@]host:port/db``, ``rediss://``, ``unix://``)
turns it on: the topic spider then swaps in :class:`topicspider.cluster.scheduler.ClusterScheduler`
and :class:`topicspider.middlewares.clusterpacing.ClusterPacingMiddleware`. Without it,
nothing in this package is imported and Redis is not needed.

The keys follow scrapy-redis's layout and settings (``SCHEDULER_QUEUE_KEY``,
``SCHEDULER_DUPEFILTER_KEY``, ``REDIS_START_URLS_KEY``, each with ``%(spider)s`` or
``%(name)s``), plus topicspider's own beside them (see :class:`ClusterKeys`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from topicspider.config import ConfigError
from topicspider.urls import mask_url

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

SCHEMES = ("redis", "rediss", "unix")
PASSWORD_ENV = "REDIS_PASSWORD"
PICKLE_MAGIC = b"\x80"  # how a pickle of protocol 2 or later starts; JSON never does
QUEUE_PROBE = 100  # entries of the queue, and of the leases, looked at before a crawl
# scrapy-redis's defaults, repeated so that reading them does not import redis.
QUEUE_KEY = "%(spider)s:requests"
DUPEFILTER_KEY = "%(spider)s:dupefilter"
START_URLS_KEY = "%(name)s:start_urls"
#: Per-host politeness state, shared by every crawl on one Redis database: two crawls
#: of one host are polite together.
HOST_KEY_PREFIX = "topicspider:host:"
#: Set in a request's meta by a component that gave up on it without crawling it (the
#: page pool failed, Redis was gone while closing): the cluster scheduler gives it back
#: to the shared queue instead of acknowledging it.
GIVE_BACK_META = "cluster_give_back"
#: Set by the cluster pacing middleware on a request it hands back to the scheduler
#: because its host's next start is still some way off (another worker booked it): the
#: scheduler puts the request back in its buffer, and pops the key.
RETURNED_META = "cluster_returned"
#: ... and kept on it, so that a request is handed back at most once: the next time it
#: books its start however far off, and cannot be starved by busier workers.
DECLINED_META = "cluster_declined"


def redis_url(settings: BaseSettings) -> str:
    """``REDIS_URL``, or "" when distributed mode is off."""
    return (settings.get("REDIS_URL") or "").strip()


def check_redis_url(url: str) -> None:
    """Raise :class:`ConfigError` for a ``REDIS_URL`` redis-py cannot use."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(f"REDIS_URL {mask_url(url)!r} is malformed: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"REDIS_URL {mask_url(url)!r} must start with redis://, rediss:// or unix://")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(f"REDIS_URL {mask_url(url)!r} has no host")
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not database.isdigit():
        raise ConfigError(f"REDIS_URL {mask_url(url)!r}: the database must be a number, got {database!r}")


def connect(settings: BaseSettings, retries: bool = True) -> Any:
    """A redis-py client for ``REDIS_URL`` (and ``REDIS_PARAMS``), through scrapy-redis;
    replies are bytes. The password is the URL's, else ``REDIS_PARAMS``'s, else the
    ``REDIS_PASSWORD`` environment variable's. Without ``retries``, a failed command is
    not sent again by redis-py."""
    from scrapy_redis.connection import get_redis_from_settings

    client = get_redis_from_settings(settings)
    options = client.connection_pool.connection_kwargs
    if not options.get("password") and os.environ.get(PASSWORD_ENV):
        # Kept off command lines and process lists, as MYSQL_PASSWORD is.
        options["password"] = os.environ[PASSWORD_ENV]
    if not retries:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client.connection_pool.connection_kwargs.update(retry=Retry(NoBackoff(), 0), retry_on_timeout=False)
    return client


def check_server(settings: BaseSettings) -> None:
    """Raise :class:`ConfigError` unless the Redis server answers, and is recent enough
    (6.2: ``LPOP`` with a count, ``ZADD`` options in scripts)."""
    url = redis_url(settings)
    check_redis_url(url)
    from redis.exceptions import RedisError

    try:
        client = connect(settings)
        version = client.info("server").get("redis_version", "0")
        client.close()
    except RedisError as exc:
        raise ConfigError(f"cannot use Redis at {mask_url(url)}: {exc}") from None
    if tuple(int(part) for part in str(version).split(".")[:2]) < (6, 2):
        raise ConfigError(f"Redis at {mask_url(url)} is version {version}; 6.2 or later is needed")


def check_queue(settings: BaseSettings, spider_name: str = "topic") -> None:
    """Raise :class:`ConfigError` if the crawl's Redis queue holds an earlier version's
    requests (pickles, which this one never reads): set aside one by one, they would
    leave their levels counted for ever, and the crawl's deeper levels waiting."""
    keys = ClusterKeys.from_settings(settings, spider_name)
    client = connect(settings)
    try:
        head = [*client.zrange(keys.queue, 0, QUEUE_PROBE - 1), *client.zrange(keys.leases, 0, QUEUE_PROBE - 1)]
    finally:
        client.close()
    if any(entry.startswith(PICKLE_MAGIC) for entry in head):
        raise ConfigError(f"the Redis queue {keys.queue!r} holds requests of an earlier version (pickles), which"
                          " this one does not read: finish that crawl with the earlier version, or start it afresh"
                          " with `scrapy push-seeds --reset` (which empties the crawl's keys)")


@dataclass(frozen=True)
class ClusterKeys:
    """The Redis keys of one distributed crawl."""

    queue: str  # sorted set: encoded request (JSON, topicspider.requestcodec) -> score
    dupefilter: str  # set: hex fingerprints of every request ever queued
    start_urls: str  # list: seed URLs pushed by `scrapy push-seeds` or anyone
    leases: str  # sorted set: encoded request -> lease expiry (server time)
    scores: str  # hash: encoded request -> its queue score, to put it back
    ranks: str  # hash: "host|priority" -> requests queued so far, for round robin
    levels: str  # hash: "site|depth" -> requests queued, or leased and not finished, for the level barrier
    released: str  # hash: encoded request -> its level field, once finished (no longer counted there)
    owners: str  # hash: encoded request -> the worker whose lease it is
    deliveries: str  # hash: encoded request -> times popped (a give-back takes its pop back)
    dead_letters: str  # list: JSON records of queue entries set aside, each with its reason
    ledger: str  # hash: ledger entry (queued, done, error/<reason>...) -> URLs, cluster-wide
    copies: str  # hash: hex fingerprint -> copies of that URL queued or leased (retries, redirects home)
    discovered: str  # hash: hex fingerprint -> the reason a link was left, for links no worker queued
    outcomes: str  # hash: hex fingerprint -> a copy's outcome, kept until the URL's last copy ends
    contents: str  # hash: hex content digest -> "1" or "0" (a copy's links followed) + its first page's URL

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> ClusterKeys:
        names = {"spider": spider_name, "name": spider_name}
        queue = (settings.get("SCHEDULER_QUEUE_KEY") or QUEUE_KEY) % names
        return cls(
            queue=queue,
            dupefilter=(settings.get("SCHEDULER_DUPEFILTER_KEY") or DUPEFILTER_KEY) % names,
            start_urls=(settings.get("REDIS_START_URLS_KEY") or START_URLS_KEY) % names,
            leases=f"{queue}:leases",
            scores=f"{queue}:scores",
            ranks=f"{queue}:ranks",
            levels=f"{queue}:levels",
            released=f"{queue}:released",
            owners=f"{queue}:owners",
            deliveries=f"{queue}:deliveries",
            dead_letters=f"{queue}:dead_letters",
            ledger=f"{queue}:ledger",
            copies=f"{queue}:copies",
            discovered=f"{queue}:discovered",
            outcomes=f"{queue}:outcomes",
            contents=f"{queue}:contents",
        )

    def all(self) -> list[str]:
        return [self.queue, self.dupefilter, self.start_urls, self.leases, self.scores, self.ranks, self.levels,
                self.released, self.owners, self.deliveries, self.dead_letters, self.ledger, self.copies,
                self.discovered, self.outcomes, self.contents]

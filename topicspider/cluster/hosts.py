"""Cluster-wide politeness state in Redis: per host, the earliest time the next request
may start and the requests in flight, updated atomically by a script on the server's
clock, so N workers together keep one host's delay and connection limit.

Pure Redis logic (blocking calls, run on a worker thread by
:class:`topicspider.middlewares.clusterpacing.ClusterPacingMiddleware`). Keys:
``topicspider:host:<host>`` (hash: ``next``) and ``topicspider:host:<host>:flight``
(sorted set: ticket -> expiry, so a worker that dies mid-request frees its place when
the ticket runs out). Both expire when a host has been left alone for a while.
"""

from __future__ import annotations

from typing import Any

from topicspider.cluster import HOST_KEY_PREFIX

# KEYS: host hash, in-flight set. ARGV: delay, in-flight limit, ticket, ticket lifetime,
# key lifetime. Returns "0" once the ticket is taken, else the seconds to wait (a
# string: Redis truncates Lua numbers to integers).
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local next_start = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
if next_start > now then return tostring(next_start - now) end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return '-1' end
redis.call('HSET', KEYS[1], 'next', tostring(now + tonumber(ARGV[1])))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return '0'
"""

# KEYS: host hash. ARGV: seconds, key lifetime. Nobody starts on the host before now + seconds.
PAUSE = """
local t = redis.call('TIME')
local until_time = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
local next_start = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
if until_time > next_start then redis.call('HSET', KEYS[1], 'next', tostring(until_time)) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# A host's keys outlive its last request by this much beyond its delay.
KEY_LIFETIME = 3600


class HostTickets:
    def __init__(self, server: Any) -> None:
        self.server = server
        self._acquire = server.register_script(ACQUIRE)
        self._pause = server.register_script(PAUSE)

    @staticmethod
    def _keys(host: str) -> list[str]:
        return [f"{HOST_KEY_PREFIX}{host}", f"{HOST_KEY_PREFIX}{host}:flight"]

    @staticmethod
    def _lifetime(seconds: float) -> int:
        return int(KEY_LIFETIME + seconds)

    def acquire(self, host: str, delay: float, limit: int, ticket: str, lifetime: float) -> float | None:
        """Take a place on ``host`` for at most ``lifetime`` seconds and push its next
        start ``delay`` seconds on; None when taken, else the seconds to wait before
        asking again (-1: the host has ``limit`` requests in flight)."""
        wait = float(self._acquire(keys=self._keys(host),
                                   args=[delay, limit, ticket, lifetime, self._lifetime(delay + lifetime)]))
        return None if wait == 0 else wait

    def release(self, host: str, ticket: str) -> None:
        self.server.zrem(self._keys(host)[1], ticket)

    def pause(self, host: str, seconds: float) -> None:
        """No worker starts a request on ``host`` for ``seconds`` (a 429 or 503 back-off)."""
        self._pause(keys=self._keys(host)[:1], args=[seconds, self._lifetime(seconds)])

"""Cluster-wide politeness state in Redis: per host, the earliest time the next request
may start and the requests in flight or booked to start, updated atomically by a script on the server's
clock, so N workers together keep one host's delay and connection limit.

Pure Redis logic (blocking calls, run on a worker thread by
:class:`topicspider.middlewares.clusterpacing.ClusterPacingMiddleware`). Keys:
``topicspider:host:<host>`` (hash: ``next``) and ``topicspider:host:<host>:flight``
(sorted set: ticket -> expiry, so a worker that dies mid-request frees its place when
the ticket runs out). Both expire when a host has been left alone for a while.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topicspider.cluster import HOST_KEY_PREFIX

FOREVER = 1e9  # seconds: no longest wait


@dataclass(frozen=True)
class Booking:
    booked: bool  # the ticket is taken
    # Seconds until the booked start (negative: past, the ticket asked again), or until
    # the host's next start; -1 and not booked: the host is full.
    wait: float
    start: str = ""  # booked: the start and the host's next start after it, as Redis has them
    next_start: str = ""

    @property
    def full(self) -> bool:
        return not self.booked and self.wait < 0

# KEYS: host hash, in-flight set. ARGV: delay, in-flight limit, ticket, ticket lifetime,
# key lifetime, longest wait. Takes the ticket, booking the host's next start, and
# returns {1, seconds until that start ("0": now), the start, the next start it set};
# or takes nothing and returns {0, "-1"} when the host has its limit of requests in
# flight or booked, {0, seconds} when its next start is further off than the longest
# wait. Booking, rather than asking again when the time has come, keeps each host's
# bookings first come, first served across the workers: a worker that waited cannot
# lose the start to one that asks just then. Asking again with a ticket already taken
# (its reply was lost) returns its booking, its wait negative once its start is past:
# the asker can tell that its request would leave late, too close to the next booked
# start, and book again. (Strings: Redis truncates Lua numbers.)
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local taken = redis.call('ZSCORE', KEYS[2], ARGV[3])
if taken then
  local start = tonumber(taken) - tonumber(ARGV[4])
  return {1, tostring(start - now), tostring(start), ''}
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return {0, '-1'} end
local start = math.max(now, tonumber(redis.call('HGET', KEYS[1], 'next') or '0'))
if start - now > tonumber(ARGV[6]) then return {0, tostring(start - now)} end
local next_start = tostring(start + tonumber(ARGV[1]))
redis.call('HSET', KEYS[1], 'next', next_start)
redis.call('ZADD', KEYS[2], start + tonumber(ARGV[4]), ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return {1, tostring(start - now), tostring(start), next_start}
"""

# KEYS: host hash, in-flight set. ARGV: ticket, its start, the next start it set. Hands
# a booked ticket back unused; the host's next start goes back to the ticket's start
# unless someone booked or paused after it.
UNBOOK = """
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'next') == ARGV[3] then
  redis.call('HSET', KEYS[1], 'next', ARGV[2])
end
return 1
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

# KEYS: host hashes. Returns, for each, the seconds until its next start (a string, "0"
# when it may start now).
WAITS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local waits = {}
for i, key in ipairs(KEYS) do
  local next_start = tonumber(redis.call('HGET', key, 'next') or '0')
  waits[i] = tostring(math.max(0, next_start - now))
end
return waits
"""

# A host's keys outlive its last request by this much beyond its delay.
KEY_LIFETIME = 3600


class HostTickets:
    def __init__(self, server: Any) -> None:
        self.server = server
        self._acquire = server.register_script(ACQUIRE)
        self._pause = server.register_script(PAUSE)
        self._waits = server.register_script(WAITS)
        self._unbook = server.register_script(UNBOOK)

    @staticmethod
    def _keys(host: str) -> list[str]:
        return [f"{HOST_KEY_PREFIX}{host}", f"{HOST_KEY_PREFIX}{host}:flight"]

    @staticmethod
    def _lifetime(seconds: float) -> int:
        return int(KEY_LIFETIME + seconds)

    def acquire(self, host: str, delay: float, limit: int, ticket: str, lifetime: float,
                longest_wait: float = FOREVER) -> Booking:
        """Take a place on ``host`` for at most ``lifetime`` seconds (counted from its
        start) and book its start, pushing the host's next start ``delay`` seconds past
        it; unless the host already has ``limit`` requests in flight or booked, or its
        next start is more than ``longest_wait`` seconds off."""
        booked, wait, *times = self._acquire(keys=self._keys(host), args=[
            delay, limit, ticket, lifetime, self._lifetime(delay + lifetime), longest_wait])
        return Booking(bool(booked), float(wait), *(time.decode() for time in times))

    def unbook(self, host: str, ticket: str, booking: Booking) -> None:
        """Hand back a booked ticket unused, and its start if nobody booked after it."""
        self._unbook(keys=self._keys(host), args=[ticket, booking.start, booking.next_start])

    def waits(self, hosts: list[str], client: Any = None) -> Any:
        """Seconds until each host's next start may be (queued on ``client``, a
        pipeline, if given; read them with :meth:`read_waits`)."""
        return self._waits(keys=[self._keys(host)[0] for host in hosts], client=client)

    @staticmethod
    def read_waits(hosts: list[str], reply: list[bytes]) -> dict[str, float]:
        return {host: float(wait) for host, wait in zip(hosts, reply)}

    def release(self, host: str, ticket: str) -> None:
        self.server.zrem(self._keys(host)[1], ticket)

    def pause(self, host: str, seconds: float) -> None:
        """No worker starts a request on ``host`` for ``seconds`` (a 429 or 503 back-off)."""
        self._pause(keys=self._keys(host)[:1], args=[seconds, self._lifetime(seconds)])

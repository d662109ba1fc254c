"""The shared frontier in Redis: scrapy-redis's priority queue, with an atomic claim of
each URL, round robin among hosts, and leases so that no request is lost when a worker dies.

Pure Redis logic, no Scrapy engine: every method makes blocking calls and runs on a
worker thread (:class:`topicspider.cluster.scheduler.ClusterScheduler` calls it). The
whole exchange of one round (new requests, finished ones, leases to renew, requests
wanted) is one pipeline (two round trips: redis-py checks the script cache first).

* **Claim.** A new request's fingerprint is added to the crawl's set (``SADD``) and, only
  if it was not there, its encoded request to the queue, in one script: two workers
  finding one URL queue it once.
* **Order.** The score is ``order * 10^6 + rank``: ``order`` is ``-priority`` as in
  scrapy-redis (``DEPTH_PRIORITY`` makes it the depth), or, under the level barrier,
  ``depth * 1000 - priority``, so that a retry's lowered priority does not put it
  among deeper requests; rank counts the requests of that host and order queued so far,
  so that within a level the hosts take turns and a batch popped by one worker spreads
  over many hosts instead of one host's pages.
* **Levels.** A hash counts each site's requests by depth, queued or leased and not yet
  finished, so that each worker's level barrier (see :mod:`topicspider.scheduler`) holds
  a site's depth d+1 until no worker has any of its depth <= d left: the depth a page is
  reached at is its link distance from the seeds, as in a single-process crawl. A
  request is *released* from its level when its callback has ended and the requests it
  produced are queued, as a single-process crawl's barrier lets go of it, not when its
  page is stored; should its lease run out before the acknowledgement, it counts again.
* **Leases.** A pop moves requests to a lease set with an expiry (``REDIS_LEASE``) held on
  the server's clock; the worker renews them while it holds them and acknowledges each
  once its page is stored. Leases that expire (a worker killed) go back to the queue at
  the next pop of any worker; a graceful stop gives back what it did not start.
* **Owners.** Each lease names its worker (``owners``), and only that worker's
  acknowledgement, release, renewal or give-back acts on it: after an outage longer than
  the lease, a worker's late word cannot touch the copy another worker leased since.
* **Deliveries.** Each pop of a request counts a delivery (a give-back takes its own
  back: never started). A request popped more than ``REDIS_MAX_DELIVERIES`` times, a
  poison pill that kills the workers that take it, is handed over marked as such, for
  the worker to set aside unread (dead letters) instead of crawling it again.
* **Ledger.** The crawl's ledger (:mod:`topicspider.ledger`) is kept in Redis for every
  worker at once, in the same scripts: a hash counts each URL's live copies (queued or
  leased: a retry or a redirect back to its URL is a second copy), and a URL is queued
  when its first live copy is, and ends, with the outcome its worker gives, when its last
  copy is acknowledged by the worker whose lease it is (a copy that handed its URL on to
  a retry leaves the outcome to it, whichever is acknowledged first). A link a worker will not request
  is counted once, by its first reason, unless the URL is or gets queued. What is still
  waiting is the URLs with a live copy.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from topicspider.cluster import ClusterKeys
from topicspider.cluster.hosts import HostTickets
from topicspider.ledger import DROPPED, NOT_QUEUED, QUEUED, WAITING

RANK_LIMIT = 999_999  # ranks above share a score; order among them is by bytes
RECLAIM_PER_POP = 1000
DEAD_LETTERS_KEPT = 10_000  # the latest entries set aside; older ones are trimmed
DEAD_LETTER_ENTRY_BYTES = 65_536  # of a set-aside entry, kept for a look at what it was

# Shared by the scripts. A level count of 0 is removed, so the hash holds live levels only.
# requeue() expects the KEYS of LEASED_POP, ACK and GIVE_BACK: queue, leases, scores, released,
# levels, owners, deliveries.
FUNCTIONS = """
local function count_level(levels, level, by)
  if level == '' or by == 0 then return end
  if redis.call('HINCRBY', levels, level, by) <= 0 then redis.call('HDEL', levels, level) end
end
local function requeue(data)
  local score = redis.call('HGET', KEYS[3], data)
  if not score then score = 0 end
  local added = redis.call('ZADD', KEYS[1], score, data)
  redis.call('HDEL', KEYS[3], data)
  redis.call('HDEL', KEYS[6], data)
  local level = redis.call('HGET', KEYS[4], data)
  if level then
    -- released: it counts again, unless the same bytes are queued already (and counted)
    count_level(KEYS[5], level, added)
    redis.call('HDEL', KEYS[4], data)
  end
end
"""

# The ledger (see "Ledger" above). A copy of a URL queued while none is live counts the
# URL as queued; a link left by some worker and queued after all is no longer counted as
# left. KEYS: copies, ledger, discovered.
LEDGER_FUNCTIONS = """
local function copy_queued(fingerprint, copies, ledger, discovered)
  if fingerprint == '' or redis.call('HINCRBY', copies, fingerprint, 1) ~= 1 then return end
  redis.call('HINCRBY', ledger, '%(queued)s', 1)
  local reason = redis.call('HGET', discovered, fingerprint)
  if reason then
    redis.call('HDEL', discovered, fingerprint)
    redis.call('HINCRBY', ledger, '%(not_queued)s', -1)
    redis.call('HINCRBY', ledger, '%(dropped)s' .. reason, -1)
  end
end
local function copy_ended(fingerprint, outcome, copies, ledger, outcomes)
  if fingerprint == '' then return end
  local left = redis.call('HINCRBY', copies, fingerprint, -1)
  if left > 0 then
    -- Another copy is live: this one's outcome waits for it, unless that one brings its own.
    if outcome ~= '' then redis.call('HSET', outcomes, fingerprint, outcome) end
    return
  end
  redis.call('HDEL', copies, fingerprint)
  -- No copy was counted: an entry the crawl did not queue (someone else's, or from
  -- before the ledger), in no ledger line either way.
  if left < 0 then return end
  if outcome == '' then outcome = redis.call('HGET', outcomes, fingerprint) or '' end
  redis.call('HDEL', outcomes, fingerprint)
  if outcome ~= '' then redis.call('HINCRBY', ledger, outcome, 1) end
end
""" % {"queued": QUEUED, "not_queued": NOT_QUEUED, "dropped": DROPPED}

# KEYS: dupefilter, queue, ranks, levels, copies, ledger, discovered, leases. ARGV: claim
# (1/0), fingerprint, host, order, level, data, ... A request not claimed (a dont_filter
# one: a retry, a redirect back to its URL) is queued whether its URL was seen or not, and
# its URL is seen from then on; not when the same bytes are leased already (this push
# sent again after an error). An empty fingerprint keeps it out of the ledger. Returns
# 1/0 per request.
CLAIM_AND_PUSH = FUNCTIONS + LEDGER_FUNCTIONS + """
local claimed = {}
for i = 1, #ARGV, 6 do
  local added = 1
  if ARGV[i] == '1' then
    added = redis.call('SADD', KEYS[1], ARGV[i + 1])
  else
    if ARGV[i + 1] ~= '' then redis.call('SADD', KEYS[1], ARGV[i + 1]) end
    if redis.call('ZSCORE', KEYS[8], ARGV[i + 5]) then added = 0 end
  end
  if added == 1 then
    local order = tonumber(ARGV[i + 3])
    local rank = redis.call('HINCRBY', KEYS[3], ARGV[i + 2] .. '|' .. ARGV[i + 3], 1)
    if rank > %(rank_limit)d then rank = %(rank_limit)d end
    if redis.call('ZADD', KEYS[2], order * 1000000 + rank, ARGV[i + 5]) == 1 then
      count_level(KEYS[4], ARGV[i + 4], 1)
      copy_queued(ARGV[i + 1], KEYS[5], KEYS[6], KEYS[7])
    end
  end
  claimed[#claimed + 1] = added
end
return claimed
""" % {"rank_limit": RANK_LIMIT}

# KEYS: dupefilter, discovered, ledger. ARGV: fingerprint, reason, ... Links a worker will
# not request: each URL no worker queued is counted once, for the first reason given.
DISCOVER = """
for i = 1, #ARGV, 2 do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 and redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('HINCRBY', KEYS[3], '%(not_queued)s', 1)
    redis.call('HINCRBY', KEYS[3], '%(dropped)s' .. ARGV[i + 1], 1)
  end
end
return 0
""" % {"not_queued": NOT_QUEUED, "dropped": DROPPED}

# KEYS: queue, leases, scores, released, levels, owners, deliveries. ARGV: how many, lease
# seconds, owner, most deliveries (0: no limit). Returns {reclaimed count, {data, ...},
# {data, deliveries, ...} of those past the limit}. A reclaimed request counts in its
# level again.
LEASED_POP = FUNCTIONS + """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, %(reclaim)d)
for _, data in ipairs(expired) do
  redis.call('ZREM', KEYS[2], data)
  requeue(data)
end
local popped = {}
local poisoned = {}
local wanted = tonumber(ARGV[1])
if wanted > 0 then
  local items = redis.call('ZRANGE', KEYS[1], 0, wanted - 1, 'WITHSCORES')
  local expiry = now + tonumber(ARGV[2])
  local most = tonumber(ARGV[4])
  for i = 1, #items, 2 do
    redis.call('ZREM', KEYS[1], items[i])
    redis.call('ZADD', KEYS[2], expiry, items[i])
    redis.call('HSET', KEYS[3], items[i], items[i + 1])
    redis.call('HSET', KEYS[6], items[i], ARGV[3])
    local deliveries = redis.call('HINCRBY', KEYS[7], items[i], 1)
    if most > 0 and deliveries > most then
      poisoned[#poisoned + 1] = items[i]
      poisoned[#poisoned + 1] = deliveries
    else
      popped[#popped + 1] = items[i]
    end
  end
end
return {#expired, popped, poisoned}
""" % {"reclaim": RECLAIM_PER_POP}

# KEYS: leases, released, levels, owners. ARGV: owner, data, level, ... Requests whose callback has
# ended (their new requests are queued) stop counting in their level while still leased
# until their page is stored: the next level need not wait for storage. One whose lease
# ran out already counts again as queued, and is left so.
RELEASE = FUNCTIONS + """
for i = 2, #ARGV, 2 do
  local holder = redis.call('HGET', KEYS[4], ARGV[i])
  if ARGV[i + 1] ~= '' and (not holder or holder == ARGV[1]) and redis.call('ZSCORE', KEYS[1], ARGV[i])
      and redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    count_level(KEYS[3], ARGV[i + 1], -1)
  end
end
return 0
"""

# KEYS: queue, leases, scores, released, levels, owners, deliveries, copies, ledger,
# outcomes. ARGV: owner, then data, level, fingerprint, outcome for each request (an empty
# outcome: a copy that handed its URL on to another, a retry, whose outcome counts).
# Returns how many were still this worker's: a request whose lease had run out is taken
# off the queue again, so it is not fetched twice; one leased since by another worker is
# that worker's to acknowledge, and to count in the ledger. Each copy removed, leased or
# queued, ends.
ACK = FUNCTIONS + LEDGER_FUNCTIONS + """
local held = 0
for i = 2, #ARGV, 4 do
  local data = ARGV[i]
  local holder = redis.call('HGET', KEYS[6], data)
  if not holder or holder == ARGV[1] then
    local leased = redis.call('ZREM', KEYS[2], data)
    held = held + leased
    redis.call('HDEL', KEYS[3], data)
    redis.call('HDEL', KEYS[6], data)
    redis.call('HDEL', KEYS[7], data)
    local queued = redis.call('ZREM', KEYS[1], data)
    local counted = queued
    if redis.call('HDEL', KEYS[4], data) == 0 then counted = counted + leased end
    count_level(KEYS[5], ARGV[i + 1], -counted)
    for _ = 1, leased + queued do copy_ended(ARGV[i + 2], ARGV[i + 3], KEYS[8], KEYS[9], KEYS[10]) end
  end
end
return held
"""

# KEYS: queue, leases, scores, released, levels, owners, deliveries. ARGV: owner, data,
# ... Puts this worker's leased requests back in the queue, not counted as delivered.
GIVE_BACK = FUNCTIONS + """
for i = 2, #ARGV do
  local data = ARGV[i]
  local holder = redis.call('HGET', KEYS[6], data)
  if (not holder or holder == ARGV[1]) and redis.call('ZREM', KEYS[2], data) == 1 then
    requeue(data)
    if redis.call('HINCRBY', KEYS[7], data, -1) <= 0 then redis.call('HDEL', KEYS[7], data) end
  end
end
return #ARGV - 1
"""

# KEYS: contents. ARGV: digest (hex), URL, whether its links would be followed (1/0).
# Duplicate content across the cluster: the first page with a text claims its digest;
# a later page with it learns that page's URL, and is told to follow its links when no
# copy's were followed yet (topicspider.duplicates.ContentIndex.exact_verdict, alike).
# The value is the URL whose links were followed ("" for none yet), a newline, and the
# first page's URL: a copy whose worker died before its links reached the queue is told
# again to follow them when it is read again.
CLAIM_CONTENT = """
local prior = redis.call('HGET', KEYS[1], ARGV[1])
local url, follows = ARGV[2], ARGV[3] == '1'
if not prior then
  redis.call('HSET', KEYS[1], ARGV[1], (follows and url or '') .. '\\n' .. url)
  return false
end
local cut = string.find(prior, '\\n', 1, true)
local follower, first = string.sub(prior, 1, cut - 1), string.sub(prior, cut + 1)
if follower == '' and follows then
  follower = url
  redis.call('HSET', KEYS[1], ARGV[1], follower .. '\\n' .. first)
end
if first == url then
  return false
end
return {first, follower == url and 1 or 0}
"""

# KEYS: leases, owners. ARGV: lease seconds, owner, data, ... Extends this worker's
# leases still held; returns those no longer held (run out and put back, or leased since
# by another worker, while this worker could not renew them).
RENEW = """
local t = redis.call('TIME')
local expiry = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
local lost = {}
for i = 3, #ARGV do
  local holder = redis.call('HGET', KEYS[2], ARGV[i])
  if (holder and holder ~= ARGV[2]) or redis.call('ZADD', KEYS[1], 'XX', 'CH', expiry, ARGV[i]) == 0 then
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""


@dataclass
class Outgoing:
    """A request on its way to the shared queue."""

    fingerprint: str  # hex; "" keeps it out of the ledger (and queues it without a claim)
    host: str
    order: int  # lower goes first, see queue_order
    level: str  # "site|depth", see level_field
    data: bytes
    claim: bool = True  # False: queued whether its URL was seen or not (dont_filter), a copy in the ledger


class Ack(NamedTuple):
    """A finished request to acknowledge: its queue entry and level field, and for the
    ledger its URL's hex fingerprint ("" for none) and its outcome (:func:`topicspider.ledger.outcome_of`)."""

    data: bytes
    level: str
    fingerprint: str = ""
    outcome: str = ""


def queue_order(priority: int, depth: int, by_level: bool) -> int:
    """Where a request goes in the shared queue: by priority, or by depth first."""
    return depth * 1000 - priority if by_level else -priority


def level_field(site: Any, depth: int) -> str:
    """The levels hash's field for a request of ``site`` at ``depth``."""
    return f"{site}|{depth}" if site is not None else ""


@dataclass
class Exchange:
    """What one round trip sends."""

    outgoing: list[Outgoing] = field(default_factory=list)
    released: list[tuple[bytes, str]] = field(default_factory=list)  # (entry, level field): callback ended
    finished: list[Ack] = field(default_factory=list)  # to acknowledge
    renew: list[bytes] = field(default_factory=list)
    wanted: int = 0
    seeds_wanted: int = 0
    levels: list[str] = field(default_factory=list)  # level fields to read
    hosts: list[str] = field(default_factory=list)  # hosts whose next start to read
    dead_letters: list[bytes] = field(default_factory=list)  # records of entries set aside
    discovered: list[tuple[str, str]] = field(default_factory=list)  # (hex fingerprint, reason): links left


def dead_letter(data: bytes, reason: str, worker: str) -> bytes:
    """A dead-letter record (JSON): why an entry was set aside, by whom and when, and
    the entry itself (base64; its first DEAD_LETTER_ENTRY_BYTES) with its size."""
    return json.dumps({
        "reason": reason, "worker": worker, "at": time.time(), "size": len(data),
        "entry": base64.b64encode(data[:DEAD_LETTER_ENTRY_BYTES]).decode("ascii"),
    }).encode("utf-8")


@dataclass(frozen=True)
class DeadLetter:
    """A dead-letter record as the console shows it; what a record does not say is empty."""

    at: float
    worker: str
    reason: str
    size: int
    url: str  # the entry's URL, when it is JSON that names one


def read_dead_letter(record: bytes) -> DeadLetter:
    """A record of the dead-letter list, read as data: anyone who can write to Redis may
    have written it, so whatever it holds gives a :class:`DeadLetter`, never an error."""
    try:
        fields = json.loads(record)
        if not isinstance(fields, dict):
            raise TypeError("not an object")
        entry = base64.b64decode(str(fields.get("entry", "")), validate=False)
        return DeadLetter(_number(fields.get("at")), str(fields.get("worker", ""))[:200],
                          str(fields.get("reason", ""))[:500], int(_number(fields.get("size"))), entry_url(entry))
    except Exception:  # noqa: BLE001 - a record that is not ours is shown as such
        return DeadLetter(0.0, "", f"not a dead-letter record ({len(record)} bytes)", len(record), "")


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def entry_url(entry: bytes) -> str:
    """The URL a queue entry's JSON names, or "" (anything else: a pickle, cut JSON...)."""
    try:
        url = json.loads(entry).get("url", "")
    except Exception:  # noqa: BLE001 - a pickle, cut JSON, anything: no URL to show
        return ""
    return url[:2000] if isinstance(url, str) else ""


@dataclass
class ExchangeResult:
    claimed: list[bool]
    acked_late: int  # finished requests whose lease had already run out
    renewed: int
    lost: list[bytes]  # leases asked to renew that had run out
    reclaimed: int
    popped: list[bytes]
    seeds: list[bytes]
    queued: int  # in the shared queue after this round
    leased: int  # held by some worker after this round
    seeds_queued: int
    levels: dict[str, int]  # the fields asked for -> requests queued or leased
    host_waits: dict[str, float]  # the hosts asked for -> seconds until their next start
    poisoned: list[tuple[bytes, int]] = field(default_factory=list)  # popped past the most deliveries, with their count


class RedisFrontier:
    def __init__(self, server: Any, keys: ClusterKeys, lease: float, owner: str = "", max_deliveries: int = 0) -> None:
        """``owner`` names this worker's leases (unique per worker process); a request
        popped more than ``max_deliveries`` times (0: no limit) comes back as poisoned."""
        self.server = server
        self.keys = keys
        self.lease = lease
        self.owner = owner
        self.max_deliveries = max_deliveries
        self._claim = server.register_script(CLAIM_AND_PUSH)
        self._discover = server.register_script(DISCOVER)
        self._release = server.register_script(RELEASE)
        self._pop = server.register_script(LEASED_POP)
        self._ack = server.register_script(ACK)
        self._give_back = server.register_script(GIVE_BACK)
        self._renew = server.register_script(RENEW)
        self._claim_content = server.register_script(CLAIM_CONTENT)
        self.tickets = HostTickets(server)

    def exchange(self, work: Exchange) -> ExchangeResult:
        """One round trip. Scripts run in this order, so a page's new links are in the
        queue before the page is acknowledged."""
        keys = self.keys
        pipe = self.server.pipeline(transaction=False)
        if work.outgoing:
            arguments: list[Any] = []
            for entry in work.outgoing:
                claim = "1" if entry.claim and entry.fingerprint else "0"
                arguments += [claim, entry.fingerprint, entry.host, entry.order, entry.level, entry.data]
            self._claim(keys=[keys.dupefilter, keys.queue, keys.ranks, keys.levels, keys.copies, keys.ledger,
                              keys.discovered, keys.leases], args=arguments, client=pipe)
        if work.discovered:
            links = [part for link in work.discovered for part in link]
            self._discover(keys=[keys.dupefilter, keys.discovered, keys.ledger], args=links, client=pipe)
        if work.released:
            pairs = [part for released in work.released for part in released]
            self._release(keys=[keys.leases, keys.released, keys.levels, keys.owners], args=[self.owner, *pairs],
                          client=pipe)
        if work.dead_letters:
            # Before the entries' acknowledgement: an entry set aside is never lost.
            pipe.rpush(keys.dead_letters, *work.dead_letters)
            pipe.ltrim(keys.dead_letters, -DEAD_LETTERS_KEPT, -1)
        if work.finished:
            fields: list[Any] = [part for ack in work.finished for part in ack]
            self._ack(keys=[*self._lease_keys(), keys.copies, keys.ledger, keys.outcomes], args=[self.owner, *fields],
                      client=pipe)
        if work.renew:
            self._renew(keys=[keys.leases, keys.owners], args=[self.lease, self.owner, *work.renew], client=pipe)
        self._pop(keys=self._lease_keys(), args=[work.wanted, self.lease, self.owner, self.max_deliveries], client=pipe)
        if work.seeds_wanted:
            pipe.lpop(keys.start_urls, work.seeds_wanted)
        if work.levels:
            pipe.hmget(keys.levels, work.levels)
        if work.hosts:
            self.tickets.waits(work.hosts, client=pipe)
        pipe.zcard(keys.queue)
        pipe.zcard(keys.leases)
        pipe.llen(keys.start_urls)
        replies = pipe.execute()
        claimed = [bool(flag) for flag in replies.pop(0)] if work.outgoing else []
        if work.discovered:
            replies.pop(0)
        if work.released:
            replies.pop(0)
        if work.dead_letters:
            del replies[:2]
        held = replies.pop(0) if work.finished else len(work.finished)
        lost = list(replies.pop(0)) if work.renew else []
        reclaimed, popped, poisoned = replies.pop(0)
        seeds = (replies.pop(0) or []) if work.seeds_wanted else []
        counts = replies.pop(0) if work.levels else []
        host_waits = HostTickets.read_waits(work.hosts, replies.pop(0)) if work.hosts else {}
        queued, leased, seeds_queued = replies
        levels = {name: int(count or 0) for name, count in zip(work.levels, counts)}
        return ExchangeResult(claimed, len(work.finished) - held, len(work.renew) - len(lost), lost, reclaimed,
                              list(popped), list(seeds), queued, leased, seeds_queued, levels, host_waits,
                              [(bytes(poisoned[i]), int(poisoned[i + 1])) for i in range(0, len(poisoned), 2)])

    def dead_letters(self, limit: int) -> tuple[int, list[DeadLetter]]:
        """How many records the dead-letter list holds, and the latest ``limit``, latest first."""
        pipe = self.server.pipeline(transaction=False)
        pipe.llen(self.keys.dead_letters)
        pipe.lrange(self.keys.dead_letters, -limit, -1)
        total, records = pipe.execute()
        return int(total), [read_dead_letter(record) for record in reversed(records)]

    def ledger(self) -> dict[str, int]:
        """The crawl's ledger across every worker: its entries, and ``waiting`` (URLs with a
        copy still queued or leased)."""
        pipe = self.server.pipeline(transaction=True)  # both read at one moment
        pipe.hgetall(self.keys.ledger)
        pipe.hlen(self.keys.copies)
        entries, waiting = pipe.execute()
        ledger = {_text(name): int(count) for name, count in entries.items() if int(count)}
        ledger[WAITING] = int(waiting)
        return ledger

    def give_back(self, data: list[bytes]) -> None:
        """Return leased requests to the queue, unstarted."""
        if data:
            self._give_back(keys=self._lease_keys(), args=[self.owner, *data])

    def _lease_keys(self) -> list[str]:
        keys = self.keys
        return [keys.queue, keys.leases, keys.scores, keys.released, keys.levels, keys.owners, keys.deliveries]

    def claim_content(self, digest: bytes, url: str, follows: bool) -> tuple[str, bool] | None:
        """None if no page stored before had the text whose digest this is (``url``'s
        page is now its first), else that page's URL and whether ``url``'s links are to
        be followed: no other copy's were (``follows``: whether they would be), or
        ``url`` is the copy whose were, read again after its worker was lost."""
        found = self._claim_content(keys=[self.keys.contents], args=[digest.hex(), url, "1" if follows else "0"])
        if not found:
            return None
        first, follow = found
        return _text(first), bool(int(follow))

    def return_seeds(self, urls: list[str]) -> None:
        """Put seeds taken but not used back at the head of the start-URL list."""
        if urls:
            self.server.lpush(self.keys.start_urls, *reversed(urls))

    def push_seeds(self, urls: list[str]) -> int:
        """Append ``urls`` to the start-URL list; its length after."""
        return int(self.server.rpush(self.keys.start_urls, *urls)) if urls else 0

    def clear(self) -> int:
        """Delete the crawl's keys (queue, seen set, start URLs, leases); how many existed."""
        return int(self.server.delete(*self.keys.all()))

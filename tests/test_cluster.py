"""Distributed mode against a real Redis server: the shared frontier's scripts, the
cluster-wide host tickets, and real crawls by several worker processes (exactly once,
politeness across workers, a stop and restart of every worker, seeds pushed by command)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import patched_command, run_project
from tests.services import RedisCrawl, query
from topicspider.cluster import ClusterKeys
from topicspider.cluster.frontier import Ack, Exchange, Outgoing, RedisFrontier, level_field, queue_order
from topicspider.cluster.hosts import HostTickets
from topicspider.ledger import imbalance, ledger_line, ledger_of
from topicspider.localsite import generate_site, page_html
from topicspider.runner import crawl_command, opened, project_env, push_seeds_command

# Each worker is a real `scrapy crawl` process; on page-analysis workers they would
# only add start-up time here.
WORKER_SETTINGS = {"PAGE_PROCESSES": 0, "REDIS_IDLE_TIMEOUT": 3, "DOWNLOAD_DELAY_JITTER": 0}


class Worker:
    def __init__(self, workdir: Path, redis_crawl: RedisCrawl, seeds: str = "", depth: int = 3,
                 patch: str = "", **settings: Any) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.redis_crawl = redis_crawl
        command = crawl_command(seeds, depth, {**WORKER_SETTINGS, **redis_crawl.settings(), **settings})
        if patch:
            command = patched_command(command, patch)
        with (workdir / "stdout.txt").open("a") as out, (workdir / "stderr.txt").open("a") as err:
            self.process = subprocess.Popen(command, cwd=workdir, env=project_env(), stdout=out, stderr=err)

    def wait(self, timeout: float = 180) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"worker in {self.workdir} did not finish: {self.log()[-3000:]}") from None

    def wait_until_open(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not opened(self.workdir / "stderr.txt"):
            assert self.process.poll() is None and time.monotonic() < deadline, self.log()[-3000:]
            time.sleep(0.1)

    def log(self) -> str:
        return (self.workdir / "stderr.txt").read_text()

    @property
    def stats(self) -> dict[str, Any]:
        return json.loads((self.workdir / "stats.json").read_text())["stats"]

    def stored_paths(self) -> set[str]:
        return stored_paths(self.workdir)


def stored_paths(workdir: Path) -> set[str]:
    """The paths of the pages a worker (running, finished or killed) stored in ``workdir``."""
    return {urlsplit(url).path or "/" for url in _stored_urls(workdir)}


def crawl_together(tmp_path: Path, redis_crawl: RedisCrawl, count: int, seeds: str, **settings: Any) -> list[Worker]:
    """``count`` workers started in ``tmp_path``/w0... and, once all have opened, the
    seeds pushed to them."""
    workers = [Worker(tmp_path / f"w{n}", redis_crawl, **settings) for n in range(count)]
    for worker in workers:
        worker.wait_until_open()
    pushed = run_project(push_seeds_command(seeds, redis_crawl.settings()), tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    return workers


def finish(workers: list[Worker], clean: bool = True) -> dict[str, int]:
    """Wait for every worker: each must succeed, and, if ``clean``, log no error. The
    crawl's ledger, across the workers, must add up with nothing left waiting: returned."""
    codes = [worker.wait() for worker in workers]
    for worker, code in zip(workers, codes):
        assert code == 0, worker.log()[-3000:]
        errors = [line for line in worker.log().splitlines() if " ERROR: " in line]
        assert not clean or not errors, errors[:5]
    return finished_ledger(workers[0].redis_crawl.client, workers[0].redis_crawl.settings())


def finished_ledger(client: Any, settings: dict[str, str]) -> dict[str, int]:
    """The cluster's ledger in Redis, checked: it adds up, and nothing waits."""
    from scrapy.settings import Settings

    ledger = RedisFrontier(client, ClusterKeys.from_settings(Settings(settings), "topic"), lease=60.0).ledger()
    assert imbalance(ledger) == 0 and ledger["waiting"] == 0, ledger_line(ledger)
    return ledger


def page_paths(site: Any) -> list[str]:
    return [record["path"] for record in site.requests() if record["path"] != "/robots.txt"]


def canonical_path(path: str) -> str:
    return "/" if path in ("/", "/index.html") else path


@pytest.fixture
def frontier(redis_crawl: RedisCrawl) -> RedisFrontier:
    from scrapy.settings import Settings

    keys = ClusterKeys.from_settings(Settings(redis_crawl.settings()), "topic")
    return RedisFrontier(redis_crawl.client, keys, lease=60.0)


def entry(name: str, host: str = "a", priority: int = 0, fingerprint: str | None = None, site: str = "s") -> Outgoing:
    """A request of depth -priority (DEPTH_PRIORITY = 1), queued by priority."""
    return Outgoing(name if fingerprint is None else fingerprint, host, queue_order(priority, -priority, False),
                    level_field(site, -priority), name.encode())


def test_a_url_is_claimed_once_across_workers(frontier: RedisFrontier) -> None:
    first = frontier.exchange(Exchange(outgoing=[entry("x"), entry("y")]))
    second = frontier.exchange(Exchange(outgoing=[entry("x"), entry("z"), entry("z")]))
    assert first.claimed == [True, True]
    assert second.claimed == [False, True, False]
    assert second.queued == 3
    # dont_filter requests (no fingerprint) are queued without a claim
    again = frontier.exchange(Exchange(outgoing=[entry("x", fingerprint="")]))
    assert again.claimed == [True]


def test_a_text_is_claimed_once_and_a_copys_links_followed_once(frontier: RedisFrontier) -> None:
    """The cluster's content claims answer as topicspider.duplicates.ContentIndex does."""
    from topicspider.duplicates import ContentIndex

    digest, other = bytes(range(16)), bytes(16)
    steps = [(digest, "http://a/1", False), (digest, "http://a/1", False), (digest, "http://a/2", True),
             (digest, "http://a/3", True), (digest, "http://a/4", False), (other, "http://a/3", True)]
    local = ContentIndex(capacity=10)
    answers = [frontier.claim_content(*step) for step in steps]
    assert answers == [None, None, ("http://a/1", True), ("http://a/1", False), ("http://a/1", False), None]
    for (found, (text, url, follows)) in zip(answers, steps):
        verdict = local.exact_verdict(url, text, follows)
        assert (verdict.duplicate_of, verdict.follow_links) == (found or (None, False))
    # The copy whose links were followed, read again (its worker was killed before they
    # were queued), is told again to follow them; another copy still is not.
    assert frontier.claim_content(digest, "http://a/2", True) == ("http://a/1", True)
    assert frontier.claim_content(digest, "http://a/5", True) == ("http://a/1", False)


def test_the_cluster_ledger_counts_each_url_once_across_workers(frontier: RedisFrontier,
                                                               redis_crawl: RedisCrawl) -> None:
    """Every worker's URLs end in one ledger in Redis: each URL queued once, ended once
    (when its last copy is acknowledged by its lease's holder), and each link never
    queued counted once, unless some worker queues it after all."""
    a = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="a")
    b = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="b")
    a.exchange(Exchange(outgoing=[entry("x")], discovered=[("y", "offsite"), ("z", "too_deep"), ("x", "offsite")]))
    b.exchange(Exchange(outgoing=[entry("x"), entry("y")], discovered=[("z", "nofollow")]))
    assert a.ledger() == {"queued": 2, "not_queued": 1, "dropped/too_deep": 1, "waiting": 2}
    assert a.exchange(Exchange(wanted=2)).popped == [b"x", b"y"]
    retry = Outgoing("x", "a", queue_order(0, 0, False), "s|0", b"x-retry", claim=False)
    a.exchange(Exchange(outgoing=[retry], finished=[Ack(b"x", "s|0", "x", "done")]))
    assert a.ledger()["waiting"] == 2  # x's retry is queued: x has not ended
    assert b.exchange(Exchange(wanted=1)).popped == [b"x-retry"]
    a.exchange(Exchange(finished=[Ack(b"x-retry", "s|0", "x", "done")]))  # not a's lease
    b.exchange(Exchange(finished=[Ack(b"x-retry", "s|0", "x", "error/http_404")]))
    b.exchange(Exchange(finished=[Ack(b"x-retry", "s|0", "x", "error/http_404")]))  # once only
    a.exchange(Exchange(finished=[Ack(b"y", "s|0", "y", "dropped/irrelevant")]))
    ledger = a.ledger()
    assert ledger == {"queued": 2, "not_queued": 1, "dropped/too_deep": 1, "error/http_404": 1,
                      "dropped/irrelevant": 1, "waiting": 0}
    assert imbalance(ledger) == 0


def test_the_cluster_ledger_through_resent_pushes_and_acknowledgements_out_of_order(
        frontier: RedisFrontier, redis_crawl: RedisCrawl) -> None:
    """Regressions found in review: (1) a retry's push sent again after a Redis error,
    while another worker held it, queued it twice and its URL never ended; (2) a URL
    first queued by a copy that was not claimed (a retry's redirect) was not seen, so a
    later link queued it again; (3) a retry acknowledged before the request it replaced
    lost its outcome to that request's."""
    a = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="a")
    b = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="b")
    order = queue_order(0, 0, False)
    a.exchange(Exchange(outgoing=[entry("x")]))
    assert a.exchange(Exchange(wanted=1)).popped == [b"x"]
    retry = Outgoing("x", "a", order, "s|0", b"x-retry", claim=False)
    a.exchange(Exchange(outgoing=[retry]))
    assert b.exchange(Exchange(wanted=1)).popped == [b"x-retry"]
    a.exchange(Exchange(outgoing=[retry]))  # (1) sent again: B holds it
    assert a.exchange(Exchange()).queued == 0
    b.exchange(Exchange(finished=[Ack(b"x-retry", "s|0", "x", "error/http_404")]))  # (3) before x's
    a.exchange(Exchange(finished=[Ack(b"x", "s|0", "x", "")]))  # x handed its URL on: no outcome
    assert a.ledger() == {"queued": 1, "error/http_404": 1, "waiting": 0}
    redirected = Outgoing("y", "a", order, "s|0", b"y-from-a-retry", claim=False)
    a.exchange(Exchange(outgoing=[redirected]))
    assert b.exchange(Exchange(outgoing=[entry("y")], discovered=[("y", "offsite")])).claimed == [False]  # (2)
    assert a.ledger() == {"queued": 2, "error/http_404": 1, "waiting": 1}


def test_pops_go_breadth_first_and_take_hosts_in_turn(frontier: RedisFrontier) -> None:
    outgoing = [entry(f"a{i}", "a", -1) for i in range(3)] + [entry("b0", "b", -1), entry("deep", "b", -2)]
    outgoing.insert(0, entry("seed", "c", 0))
    frontier.exchange(Exchange(outgoing=outgoing))
    popped = frontier.exchange(Exchange(wanted=6)).popped
    assert popped[0] == b"seed"
    assert [item[0:1] for item in popped[1:5]] == [b"a", b"b", b"a", b"a"]  # a, b alternate at depth 1
    assert popped[5] == b"deep"


def test_leases_are_acknowledged_renewed_and_reclaimed(frontier: RedisFrontier, redis_crawl: RedisCrawl) -> None:
    frontier.exchange(Exchange(outgoing=[entry("x"), entry("y")]))
    result = frontier.exchange(Exchange(wanted=2))
    assert result.popped == [b"x", b"y"] and result.queued == 0 and result.leased == 2
    assert result.levels == {}
    levels = frontier.exchange(Exchange(levels=[level_field("s", 0)])).levels
    assert levels == {"s|0": 2}  # queued or leased
    done = frontier.exchange(Exchange(finished=[Ack(b"x", "s|0")], levels=["s|0"]))
    assert done.acked_late == 0 and done.leased == 1 and done.levels == {"s|0": 1}
    # A worker that stops renewing (killed) loses its lease; the next pop puts it back.
    short = RedisFrontier(redis_crawl.client, frontier.keys, lease=0.2)
    assert short.exchange(Exchange(renew=[b"y"])).renewed == 1
    time.sleep(0.3)
    back = frontier.exchange(Exchange(wanted=1))
    assert back.reclaimed == 1 and back.popped == [b"y"]
    assert frontier.exchange(Exchange(renew=[b"y", b"x"])).lost == [b"x"]  # acknowledged, not held
    # A late acknowledgement takes a reclaimed request off the queue, and counts it once.
    short.exchange(Exchange(renew=[b"y"]))
    time.sleep(0.3)
    assert frontier.exchange(Exchange()).reclaimed == 1
    late = frontier.exchange(Exchange(finished=[Ack(b"y", "s|0")], levels=["s|0"]))
    assert late.queued == 0 and late.leased == 0 and late.levels == {"s|0": 0}


def test_a_lease_is_its_workers_alone_after_an_outage(frontier: RedisFrontier, redis_crawl: RedisCrawl) -> None:
    """Worker A's lease runs out while it cannot reach Redis; B leases the request again.
    A's late acknowledgement, release, renewal and give-back leave B's lease alone."""
    a = RedisFrontier(redis_crawl.client, frontier.keys, lease=0.2, owner="a")
    b = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="b")
    a.exchange(Exchange(outgoing=[entry("x")]))
    assert a.exchange(Exchange(wanted=1)).popped == [b"x"]
    time.sleep(0.3)
    taken = b.exchange(Exchange(wanted=1, levels=["s|0"]))
    assert taken.reclaimed == 1 and taken.popped == [b"x"] and taken.levels == {"s|0": 1}
    late = a.exchange(Exchange(released=[(b"x", "s|0")], finished=[Ack(b"x", "s|0")], renew=[b"x"], levels=["s|0"]))
    assert late.acked_late == 1 and late.lost == [b"x"]
    assert late.leased == 1 and late.levels == {"s|0": 1}  # still B's, still counted
    a.give_back([b"x"])
    assert frontier.exchange(Exchange()).leased == 1
    assert b.exchange(Exchange(renew=[b"x"])).renewed == 1
    done = b.exchange(Exchange(finished=[Ack(b"x", "s|0")], levels=["s|0"]))
    assert done.acked_late == 0 and done.leased == 0 and done.queued == 0 and done.levels == {"s|0": 0}
    assert not redis_crawl.client.exists(frontier.keys.owners, frontier.keys.deliveries)


def test_a_request_popped_too_often_comes_back_poisoned(frontier: RedisFrontier, redis_crawl: RedisCrawl) -> None:
    dying = RedisFrontier(redis_crawl.client, frontier.keys, lease=0.1, owner="dies", max_deliveries=2)
    dying.exchange(Exchange(outgoing=[entry("x")]))
    for _ in range(2):  # each worker that takes it dies: its lease runs out
        taken = dying.exchange(Exchange(wanted=1))
        assert taken.popped == [b"x"] and taken.poisoned == []
        time.sleep(0.15)
    # A give-back is no delivery: the request was never started.
    steady = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="steady", max_deliveries=2)
    third = steady.exchange(Exchange(wanted=1))
    assert third.popped == [] and third.poisoned == [(b"x", 3)] and third.leased == 1
    steady.exchange(Exchange(finished=[Ack(b"x", "s|0")]))
    unlimited = RedisFrontier(redis_crawl.client, frontier.keys, lease=60.0, owner="u", max_deliveries=1)
    unlimited.exchange(Exchange(outgoing=[entry("y")]))
    assert unlimited.exchange(Exchange(wanted=1)).popped == [b"y"]
    unlimited.give_back([b"y"])
    assert unlimited.exchange(Exchange(wanted=1)).popped == [b"y"]  # the give-back took its pop back


def test_a_finished_request_leaves_its_level_before_its_acknowledgement(frontier: RedisFrontier,
                                                                          redis_crawl: RedisCrawl) -> None:
    frontier.exchange(Exchange(outgoing=[entry("x"), entry("y"), entry("z")]))
    frontier.exchange(Exchange(wanted=3))
    released = frontier.exchange(Exchange(released=[(b"x", "s|0"), (b"x", "s|0")], levels=["s|0"]))
    assert released.levels == {"s|0": 2} and released.leased == 3  # once, however often it is told
    acked = frontier.exchange(Exchange(finished=[Ack(b"x", "s|0")], levels=["s|0"]))
    assert acked.levels == {"s|0": 2} and acked.leased == 2  # not counted off twice
    # Released, then its worker is killed before the page is stored: it counts again.
    short = RedisFrontier(redis_crawl.client, frontier.keys, lease=0.2)
    short.exchange(Exchange(released=[(b"y", "s|0")], renew=[b"y"]))
    time.sleep(0.3)
    back = frontier.exchange(Exchange(levels=["s|0"]))
    assert back.reclaimed == 1 and back.queued == 1 and back.levels == {"s|0": 2}
    # ... and the late acknowledgement of the killed worker's copy counts it off once.
    late = frontier.exchange(Exchange(finished=[Ack(b"y", "s|0")], levels=["s|0"]))
    assert late.queued == 0 and late.acked_late == 1 and late.levels == {"s|0": 1}
    # Given back after its release (never in practice: only unstarted ones are): counts again.
    frontier.exchange(Exchange(released=[(b"z", "s|0")]))
    frontier.give_back([b"z"])
    assert frontier.exchange(Exchange(levels=["s|0"])).levels == {"s|0": 1}
    assert redis_crawl.client.hlen(frontier.keys.released) == 0


def test_under_the_level_barrier_a_retry_stays_in_its_level() -> None:
    retry_of_depth_1 = queue_order(priority=-2, depth=1, by_level=True)  # RetryMiddleware lowered it
    assert retry_of_depth_1 < queue_order(priority=-2, depth=2, by_level=True)
    assert queue_order(priority=-2, depth=1, by_level=False) == queue_order(priority=-2, depth=2, by_level=False)


def test_seeds_taken_but_not_used_go_back_first(frontier: RedisFrontier) -> None:
    frontier.push_seeds(["http://a/", "http://b/", "http://c/"])
    taken = frontier.exchange(Exchange(seeds_wanted=2)).seeds
    assert taken == [b"http://a/", b"http://b/"]
    frontier.return_seeds([url.decode() for url in taken])
    assert frontier.exchange(Exchange(seeds_wanted=5)).seeds == [b"http://a/", b"http://b/", b"http://c/"]


def test_give_back_returns_leased_requests_in_their_place(frontier: RedisFrontier) -> None:
    frontier.exchange(Exchange(outgoing=[entry("shallow", priority=0), entry("deep", priority=-3)]))
    frontier.exchange(Exchange(wanted=1))
    frontier.give_back([b"shallow"])
    assert frontier.exchange(Exchange(wanted=2)).popped == [b"shallow", b"deep"]


def test_host_tickets_book_spaced_starts_and_cap_requests_in_flight(redis_crawl: RedisCrawl) -> None:
    tickets = HostTickets(redis_crawl.client)
    host = "127.0.0.9"
    first = tickets.acquire(host, 0.5, 3, "w1:1", 60)
    assert first.booked and first.wait == 0
    # Asked again with the same ticket (its reply was lost): the same booking, no other.
    again = tickets.acquire(host, 0.5, 3, "w1:1", 60)
    assert again.booked and -0.05 < again.wait <= 0 and again.start == first.start
    # Further off than the longest wait asked for: nothing booked, the wait told.
    refused = tickets.acquire(host, 0.5, 3, "w2:1", 60, longest_wait=0.1)
    assert not refused.booked and not refused.full and 0.4 < refused.wait <= 0.5
    booked = tickets.acquire(host, 0.5, 3, "w2:1", 60)  # booked: the start after w1's
    assert booked.booked and 0.4 < booked.wait <= 0.5
    after = tickets.acquire(host, 0.0, 3, "w3:1", 60)  # first come, first served: after w2's
    assert after.booked and booked.wait < after.wait <= 1.0
    assert tickets.acquire(host, 0.0, 3, "w4:1", 60).full  # three in flight or booked
    tickets.release(host, "w1:1")
    assert tickets.acquire(host, 0.0, 3, "w4:1", 60).wait > 0.4
    assert tickets.acquire(host, 0.0, 3, "w5:1", 60).full
    # A ticket runs out its lifetime after its booked start (its worker died).
    other = "127.0.0.10"
    assert tickets.acquire(other, 0.2, 1, "w1:2", 0.3).booked
    assert tickets.acquire(other, 0.2, 1, "w2:2", 60).full
    time.sleep(0.4)
    assert tickets.acquire(other, 0.2, 1, "w2:2", 60).wait == 0
    tickets.release(other, "w2:2")
    tickets.pause(other, 1.0)
    paused = tickets.acquire(other, 0.0, 5, "w3:2", 60)
    assert 0.8 < paused.wait <= 1.0
    waits = HostTickets.read_waits([other, "never-seen"], tickets.waits([other, "never-seen"]))
    assert 0.8 < waits[other] <= 1.0 and waits["never-seen"] == 0


def test_a_ticket_asked_again_after_its_start_says_how_late_it_is(redis_crawl: RedisCrawl) -> None:
    # Its first reply was lost (a Redis restart; redis-py sends the script again after a
    # back-off): by the second answer its start is past, and its request would leave too
    # close to the next one booked. Found by the cluster crawl through a Redis restart.
    tickets = HostTickets(redis_crawl.client)
    host = "127.0.0.12"
    first = tickets.acquire(host, 0.3, 3, "w1:1", 60)
    time.sleep(0.2)
    again = tickets.acquire(host, 0.3, 3, "w1:1", 60)
    assert again.booked and again.start == first.start and -0.3 < again.wait <= -0.2


def test_a_ticket_handed_back_unused_gives_back_its_start(redis_crawl: RedisCrawl) -> None:
    tickets = HostTickets(redis_crawl.client)
    host = "127.0.0.11"
    tickets.acquire(host, 0.5, 3, "w1:1", 60)
    late = tickets.acquire(host, 0.5, 3, "w2:1", 60)
    tickets.unbook(host, "w2:1", late)  # nobody booked after it: its start is free again
    retaken = tickets.acquire(host, 0.5, 3, "w3:1", 60)
    assert retaken.start == late.start
    after = tickets.acquire(host, 0.5, 3, "w4:1", 60)
    tickets.unbook(host, "w3:1", retaken)  # booked after: the host's next start stays
    assert tickets.acquire(host, 0.5, 3, "w5:1", 60).wait > after.wait


def test_three_workers_fetch_every_page_once_and_store_what_one_worker_stores(tmp_path, serve, crawl, redis_crawl):
    generate_site(tmp_path / "site", 90, 3, seed=7)
    alone = serve(tmp_path / "site")
    reference = crawl(f"{alone.url}/", depth=3)
    assert reference.returncode == 0, reference.stderr[-2000:]
    expected = {canonical_path(urlsplit(url).path) for url in reference.pages()}

    shared = serve(tmp_path / "site")
    # A small prefetch, so that one worker does not lease the whole of this small site.
    workers = crawl_together(tmp_path, redis_crawl, 3, f"{shared.url}/", DOWNLOAD_DELAY=0.05, REDIS_PREFETCH=4)
    ledger = finish(workers)
    # One ledger for the cluster, each URL once: as the single crawl's.
    assert {entry: count for entry, count in ledger.items() if count} == \
        {entry: count for entry, count in ledger_of(reference.stats).items() if count}

    requested = Counter(page_paths(shared))
    assert requested and max(requested.values()) == 1, requested.most_common(3)
    stored = set().union(*(worker.stored_paths() for worker in workers))
    assert {canonical_path(path) for path in stored} == expected
    fetched = [worker.stats.get("pages/fetched", 0) for worker in workers]
    assert all(count >= 3 for count in fetched), fetched  # each did real work
    assert sum(fetched) == len(requested)
    assert sum(worker.stats.get("seeds/from_redis", 0) for worker in workers) == 1


def test_the_same_text_is_stored_once_across_workers(tmp_path, serve, redis_crawl):
    """Each worker kept its own memory of texts: two workers that each read one copy
    of a page stored both."""
    root = tmp_path / "site"
    copies = 16
    texts = [" ".join(f"word{n}x{k} text{k % 7}" for k in range(40)) for n in range(copies)]
    links = [f"/{half}/p{n}.html" for n in range(copies) for half in ("a", "b")]
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "index.html").write_text(page_html("Home", "the home page of two mirrored halves " * 3, links))
    for n, text in enumerate(texts):
        for half in ("a", "b"):
            (root / half / f"p{n}.html").write_text(page_html(f"Page {n}", text, []))
    site = serve(root)
    workers = crawl_together(tmp_path, redis_crawl, 2, f"{site.url}/", DOWNLOAD_DELAY=0.02, REDIS_PREFETCH=2)
    ledger = finish(workers)

    assert sorted(page_paths(site)) == sorted(["/", *links]), "every copy fetched once"
    stored = [path for worker in workers for path in worker.stored_paths()]
    assert sorted(path.split("/")[-1] for path in stored if path != "/") == sorted(f"p{n}.html" for n in range(copies))
    assert all(worker.stats.get("pages/fetched", 0) >= 5 for worker in workers), "both did real work"
    assert sum(worker.stats.get("duplicates/exact", 0) for worker in workers) == copies == ledger["dropped/duplicate"]
    aliases = [row for worker in workers for row in sqlite3.connect(worker.workdir / "topicspider.db").execute(
        "SELECT url, duplicate_of FROM page_aliases")]
    assert len(aliases) == copies and all(urlsplit(alias).path.split("/")[-1] == urlsplit(of).path.split("/")[-1]
                                          for alias, of in aliases)


def test_the_per_host_delay_holds_across_workers(tmp_path, serve, redis_crawl):
    sites = []
    for number in range(3):
        generate_site(tmp_path / f"site{number}", 10, 2, seed=number)
        sites.append(serve(tmp_path / f"site{number}", host=f"127.0.0.{number + 2}"))
    seeds = ",".join(f"{site.url}/" for site in sites)
    delay = 0.4
    workers = [Worker(tmp_path / f"w{n}", redis_crawl, seeds, DOWNLOAD_DELAY=delay, REDIS_PREFETCH=2,
                      USER_AGENT=f"worker{n}/1.0 (+http://example.com/bot)") for n in range(2)]
    finish(workers)
    served_both = 0
    for site in sites:
        records = [record for record in site.requests() if record["path"] != "/robots.txt"]
        assert len(records) == len({record["path"] for record in records}) == 10
        starts = sorted(record["start"] for record in records)
        gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
        assert min(gaps) >= delay - 0.05, gaps
        served_both += len({record["user_agent"] for record in records}) == 2
    assert served_both >= 2  # the workers shared hosts, and still kept their delays
    # A request whose host another worker had just booked went back to its scheduler
    # rather than wait in a download slot, and was still crawled and stored, once.
    assert sum(worker.stats.get("pacing/cluster_declined", 0) for worker in workers) > 0
    stored = []
    for worker in workers:
        with sqlite3.connect(worker.workdir / "topicspider.db") as connection:
            stored += [url for (url,) in connection.execute("SELECT url FROM pages")]
    assert len(stored) == len(set(stored)) == 30


def test_a_retried_page_keeps_its_level_and_nothing_waits_for_it_forever(tmp_path, serve, crawl, redis_crawl):
    depths = generate_site(tmp_path / "site", 60, 3, seed=11)
    first_level = sorted(path for path, depth in depths.items() if depth == 1)
    for path in first_level[:2]:  # a 500 first: RetryMiddleware queues them again, lower
        (tmp_path / "site" / (path.lstrip("/") + ".headers")).write_text("Status-First: 500 1\n")
    alone = serve(tmp_path / "site")
    reference = crawl(f"{alone.url}/", depth=3)
    expected = {canonical_path(urlsplit(url).path) for url in reference.pages()}
    shared = serve(tmp_path / "site")
    workers = [Worker(tmp_path / f"w{n}", redis_crawl, f"{shared.url}/", DOWNLOAD_DELAY=0, REDIS_PREFETCH=2)
               for n in range(2)]
    started = time.monotonic()
    finish(workers)
    stored = set().union(*(worker.stored_paths() for worker in workers))
    assert {canonical_path(path) for path in stored} == expected
    assert sum(worker.stats.get("retry/count", 0) for worker in workers) == 2
    assert time.monotonic() - started < 60


def test_without_the_level_barrier_workers_crawl_by_priority_alone(tmp_path, serve, redis_crawl):
    depths = generate_site(tmp_path / "site", 40, 3, seed=5)
    site = serve(tmp_path / "site")
    workers = [Worker(tmp_path / f"w{n}", redis_crawl, f"{site.url}/", depth=20, DOWNLOAD_DELAY=0,
                      SCHEDULER_LEVEL_SYNC=False, REDIS_PREFETCH=4) for n in range(2)]
    finish(workers)
    requested = Counter(page_paths(site))
    assert set(requested) == set(depths) and max(requested.values()) == 1


def wait_for_requests(site: Any, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(page_paths(site)) < count:
        assert time.monotonic() < deadline, f"only {len(page_paths(site))} requests served"
        time.sleep(0.1)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["graceful", "killed"])
def test_every_worker_stopped_mid_crawl_then_restarted_finishes_the_crawl(tmp_path, serve, crawl, redis_crawl, stop):
    generate_site(tmp_path / "site", 80, 3, seed=3)
    alone = serve(tmp_path / "site")
    reference = crawl(f"{alone.url}/", depth=3)
    expected = {canonical_path(urlsplit(url).path) for url in reference.pages()}
    site = serve(tmp_path / "site")
    # Short leases, so that a killed worker's requests come back soon.
    settings = {"DOWNLOAD_DELAY": 0.1, "REDIS_LEASE": 5}
    first = [Worker(tmp_path / f"w{n}", redis_crawl, f"{site.url}/" if n == 0 else "", **settings) for n in range(2)]
    wait_for_requests(site, 20)
    for worker in first:
        worker.process.send_signal(stop)
    for worker in first:
        worker.process.wait(timeout=60)
    before = Counter(page_paths(site))
    assert len(before) < len(expected)  # stopped mid-crawl

    second = [Worker(tmp_path / f"w{n}", redis_crawl, **settings) for n in range(2)]
    finish(second)
    requested = Counter(page_paths(site))
    stored = set().union(*(worker.stored_paths() for worker in second))
    assert {canonical_path(path) for path in stored} == expected  # nothing lost
    refetched = [path for path, count in requested.items() if count > 1]
    if stop == signal.SIGINT:
        assert refetched == []
    else:
        # Only what was in flight when the process died: leased, not yet acknowledged.
        assert len(refetched) <= 2 * 32
        assert all(count == 2 for count in requested.values() if count > 1)
    assert set(requested) >= {path for path in before}


def test_a_request_that_kills_every_worker_taking_it_is_dead_lettered(tmp_path, serve, redis_crawl):
    """A poison pill: each worker that fetches /poison.html dies (here: SIGKILL as the
    page is asked for). After REDIS_MAX_DELIVERIES deliveries the next worker sets it
    aside, unread, and the crawl ends with every other page stored."""
    root = tmp_path / "site"
    root.mkdir()
    pages = ["/a.html", "/b.html", "/c.html", "/poison.html"]
    (root / "index.html").write_text(page_html("home", "start", pages))
    for path in pages:
        (root / path.lstrip("/")).write_text(page_html(path, "text", []))
    site = serve(root)
    settings = {"REDIS_LEASE": 5, "REDIS_MAX_DELIVERIES": 2, "REDIS_PREFETCH": 1, "CONCURRENT_REQUESTS": 1}
    redis_crawl.client.rpush(f"{redis_crawl.prefix}:start_urls", f"{site.url}/")
    for attempt in range(2):
        worker = Worker(tmp_path / f"dies{attempt}", redis_crawl, depth=1, **settings)
        deadline = time.monotonic() + 60
        while page_paths(site).count("/poison.html") <= attempt:
            assert worker.process.poll() is None and time.monotonic() < deadline, worker.log()[-3000:]
            time.sleep(0.005)
        worker.process.kill()
        worker.process.wait(timeout=10)
    last = Worker(tmp_path / "last", redis_crawl, depth=1, **settings)
    ledger = finish([last], clean=False)
    assert ledger["error/over_delivered"] == 1 and ledger["done"] == 4, ledger_line(ledger)
    assert page_paths(site).count("/poison.html") == 2  # never fetched a third time
    stored = set().union(*(stored_paths(tmp_path / name) for name in ("last", "dies0", "dies1")))
    assert {canonical_path(path) for path in stored} == {"/", "/a.html", "/b.html", "/c.html"}
    assert last.stats["scheduler/cluster/over_delivered"] == 1
    letters = [json.loads(raw) for raw in redis_crawl.client.lrange(f"{redis_crawl.prefix}:requests:dead_letters", 0, -1)]
    assert len(letters) == 1 and "delivered 3 times" in letters[0]["reason"]
    assert b"/poison.html" in base64.b64decode(letters[0]["entry"])


# The database refuses the first batch holding /b.html, and the spill file cannot be
# written: that batch's pages are lost (storage/pages_lost); later batches are stored.
LOSES_ONE_BATCH = """
from topicspider.pipelines import storage
from topicspider.storage import StorageError
real_write = storage.write_isolating
refused = []
def refuse_once(store, batch):
    if not refused and any(page.url.endswith("/b.html") for page in batch):
        refused.append(batch)
        raise StorageError("the database is gone")
    return real_write(store, batch)
def cannot_spill(path, pages):
    raise OSError("No space left on device")
storage.write_isolating = refuse_once
storage.spill_pages = cannot_spill
"""


def test_a_page_neither_stored_nor_spilled_is_fetched_again_not_acknowledged(tmp_path, serve, redis_crawl):
    """It was acknowledged as done: the cluster never fetched it again, and its ledger
    said done for a page no database holds."""
    root = tmp_path / "site"
    root.mkdir()
    pages = ["/a.html", "/b.html", "/c.html"]
    (root / "index.html").write_text(page_html("home", "start", pages))
    for path in pages:
        (root / path.lstrip("/")).write_text(page_html(path, "text", []))
    site = serve(root)
    worker = Worker(tmp_path / "w0", redis_crawl, f"{site.url}/", depth=1, patch=LOSES_ONE_BATCH,
                    REDIS_LEASE=5, STORAGE_RETRY_TIMES=0, STORAGE_BATCH_SIZE=1)
    ledger = finish([worker], clean=False)
    assert {canonical_path(path) for path in worker.stored_paths()} == {"/", *pages}
    assert Counter(page_paths(site))["/b.html"] == 2, "its lease ran out, and it was fetched again"
    assert ledger["done"] == 4, ledger_line(ledger)
    stats = worker.stats
    assert stats["storage/pages_lost"] == 1 == stats["scheduler/cluster/lost_pages_unacked"]


def test_a_worker_with_nothing_to_do_exits_after_the_idle_timeout(tmp_path, redis_crawl):
    started = time.monotonic()
    worker = Worker(tmp_path / "w", redis_crawl, REDIS_IDLE_TIMEOUT=1)
    finish([worker])
    assert time.monotonic() - started < 60
    assert "Shared frontier empty" in worker.log()


def test_bad_seeds_in_the_start_list_are_counted_not_fatal(tmp_path, serve, redis_crawl):
    generate_site(tmp_path / "site", 5, 1)
    site = serve(tmp_path / "site")
    key = f"{redis_crawl.prefix}:start_urls"
    nested = '{"url": ' + "[" * 5_000 + "]" * 5_000 + "}"  # json.loads: RecursionError
    bad = ["not a url", "ftp://x/", nested, b"\xff\xfehttp://127.0.0.1/\xff", f"{site.url}/{'a' * 1_000_000}"]
    redis_crawl.client.rpush(key, *bad, json.dumps({"url": f"{site.url}/"}))
    worker = Worker(tmp_path / "w", redis_crawl, depth=1)
    finish([worker], clean=False)
    assert worker.stats["seeds/bad_redis_message"] == len(bad)
    assert worker.stats["seeds/from_redis"] == 1  # taken after the bad ones: intake went on
    assert worker.stored_paths()
    assert worker.log().count("Ignored a bad entry in the Redis start-URL list") == len(bad)


def test_a_queue_entry_that_is_not_a_request_runs_no_code_and_is_dead_lettered(tmp_path, serve, redis_crawl):
    """Whatever can write to Redis reaches every worker: a crafted pickle (which would
    run a command if unpickled) and crafted JSON requests are set aside, and the crawl
    goes on."""
    generate_site(tmp_path / "site", 5, 1)
    site = serve(tmp_path / "site")
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    crafted = {
        pickle.dumps({"url": f"{site.url}/x", "callback": Payload()}, protocol=4): "pickle",
        json.dumps({"url": f"{site.url}/y", "_class": "os.system"}).encode(): "class",
        json.dumps({"url": f"{site.url}/z", "callback": "_private"}).encode(): "callback",
        json.dumps({"url": "file:///etc/passwd"}).encode(): "scheme",
        # Requests whose meta would break the frontier far from here: a site it cannot
        # hash, a depth of a billion levels.
        json.dumps({"url": f"{site.url}/s", "meta": {"site": ["x"], "depth": 1}}).encode(): "site",
        json.dumps({"url": f"{site.url}/d", "meta": {"site": "x", "depth": 10 ** 9}}).encode(): "depth",
    }
    queue = f"{redis_crawl.prefix}:requests"
    worker = Worker(tmp_path / "w", redis_crawl, depth=2)
    worker.wait_until_open()
    redis_crawl.client.zadd(queue, {data: -1 for data in crafted})  # as an attacker would: no claim, no level
    redis_crawl.client.rpush(f"{redis_crawl.prefix}:start_urls", f"{site.url}/")
    finish([worker], clean=False)
    assert not marker.exists(), "a queue entry ran code"
    assert worker.stats["scheduler/cluster/bad_entries"] == len(crafted)
    letters = [json.loads(raw) for raw in redis_crawl.client.lrange(f"{queue}:dead_letters", 0, -1)]
    assert sorted(base64.b64decode(letter["entry"]) for letter in letters) == sorted(crafted)
    assert all(letter["reason"] and letter["worker"] for letter in letters)
    assert redis_crawl.client.zcard(queue) == 0 and redis_crawl.client.zcard(f"{queue}:leases") == 0
    assert len(worker.stored_paths()) == 5


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:6379/0", "must start with redis://"),
    ("redis://127.0.0.1:6379/x", "the database must be a number"),
    ("redis://:secret@127.0.0.1:1/0", "cannot use Redis at redis://:***@127.0.0.1:1/0"),
])
def test_a_bad_or_unreachable_redis_gets_one_line_and_exit_2(tmp_path, url, message):
    done = run_project(crawl_command("http://127.0.0.1:1/", 1, {"REDIS_URL": url}), tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("topicspider: error: ") and message in errors[0], done.stderr
    assert "secret" not in done.stderr + done.stdout
    pushed = run_project([sys.executable, "-m", "scrapy", "push-seeds", "http://example.com/", "-s", f"REDIS_URL={url}"],
                         tmp_path)
    assert pushed.returncode == 2 and message in pushed.stderr


@pytest.mark.parametrize("network", ["loopback", "namespaces"])
def test_three_workers_through_a_redis_restart_and_a_killed_worker(tmp_path, serve, request, network):
    """Faults: three workers; Redis restarted mid-crawl; one worker SIGKILLed and another
    started in its place. Every page is stored, re-fetches stay within what was in
    flight, and no host sees two requests closer than its delay (less 50 ms).

    ``loopback``: every worker on this machine's loopback, each storing into SQLite.
    ``namespaces``: each worker in a network namespace of its own, as a machine of its
    own, reaching Redis, MariaDB and the sites over a veth link and a bridge (the
    replacement runs on the killed worker's "machine"), all storing into one MariaDB."""
    delay, pages = 0.2, 40
    net = request.getfixturevalue("veth_network") if network == "namespaces" else None
    private_redis = request.getfixturevalue("private_redis")  # after the network: it listens there too
    host_of = net.site_address if net is not None else (lambda number: f"127.0.0.{number + 2}")
    sites, depth = [], 0
    for number in range(3):
        depths = generate_site(tmp_path / f"site{number}", pages, 3, seed=20 + number)
        depth = max(depth, *depths.values())
        sites.append(serve(tmp_path / f"site{number}", host=host_of(number)))
    redis_host = net.hub if net is not None else "127.0.0.1"
    settings = {"REDIS_URL": private_redis.url(private_redis.password, host=redis_host),
                "SCHEDULER_QUEUE_KEY": "f:requests", "SCHEDULER_DUPEFILTER_KEY": "f:dupefilter",
                "REDIS_START_URLS_KEY": "f:start_urls", "REDIS_LEASE": 5, "REDIS_PREFETCH": 4,
                "DOWNLOAD_DELAY": delay, "STORAGE_FLUSH_INTERVAL": 0.5}
    database = None
    if net is not None:
        database = _database_for_other_machines(request.getfixturevalue("private_mariadb"), net.hub)
        settings["DATABASE_URL"] = database
    seeds = ",".join(f"{site.url}/" for site in sites)
    command = [crawl_command(seeds if n == 0 else "", depth, {**WORKER_SETTINGS, **settings}) for n in range(3)]

    def start(number: int, machine: int, arguments: list[str]) -> subprocess.Popen[bytes]:
        (tmp_path / f"w{number}").mkdir()
        with (tmp_path / f"w{number}" / "stderr.txt").open("w") as err:
            return subprocess.Popen(net.command(machine, arguments) if net is not None else arguments,
                                    cwd=tmp_path / f"w{number}", env=project_env(), stdout=subprocess.DEVNULL,
                                    stderr=err)

    workers = [start(n, n, command[n]) for n in range(3)]

    def served() -> int:
        return sum(len(page_paths(site)) for site in sites)

    def wait_until(count: int) -> None:
        deadline = time.monotonic() + 90
        while served() < count:
            assert time.monotonic() < deadline and all(w.poll() is None for w in workers[:3]), served()
            time.sleep(0.01)

    try:
        wait_until(20)
        private_redis.restart()
        wait_until(50)
        workers[0].kill()
        workers[0].wait(timeout=10)
        workers.append(start(3, 0, command[1]))
        for worker, name in zip(workers[1:], ("w1", "w2", "w3")):
            assert worker.wait(timeout=180) == 0, (tmp_path / name / "stderr.txt").read_text()[-3000:]
    finally:  # none left behind, in a namespace about to be deleted least of all
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)

    urls = ([url for (url,) in query(database, "SELECT url FROM pages")] if database is not None
            else [url for n in range(4) for url in _stored_urls(tmp_path / f"w{n}")])
    stored = {(urlsplit(url).hostname, canonical_path(urlsplit(url).path or "/")) for url in urls}
    for number, site in enumerate(sites):
        host = host_of(number)
        expected = {canonical_path(path) for path in _site_paths(tmp_path / f"site{number}")}
        assert len(expected) == pages
        assert {canonical_path(path) for path in page_paths(site)} == expected  # every page fetched
        assert {path for stored_host, path in stored if stored_host == host} == expected  # and stored
        starts = sorted(record["start"] for record in site.requests() if record["path"] != "/robots.txt")
        gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
        assert min(gaps) >= delay - 0.05, (host, sorted(gaps)[:5])
    refetched = sum(len(page_paths(site)) for site in sites) - 3 * pages
    # The killed worker's leases: its buffer (REDIS_PREFETCH), its slots (3 hosts, 2 each)
    # and the pages read but not yet stored (half a second's, at most 5 a second here).
    assert refetched <= 4 + 3 * 2 + 3, refetched
    import redis

    client = redis.Redis.from_url(private_redis.url(private_redis.password))
    ledger = finished_ledger(client, settings)  # one ledger, through the restart and the kill
    client.close()
    assert ledger["done"] == 3 * pages and not [entry for entry in ledger if entry.startswith("error/")], ledger
    if net is not None:  # each worker reached the sites from its own address
        clients = {record["client"] for site in sites for record in site.requests()}
        assert clients == {net.worker_address(n) for n in range(3)}, clients


def _database_for_other_machines(server: Any, hub: str) -> str:
    """A database on ``server`` and a user allowed in from any address, as a crawl's
    database server on a LAN would have: its URL through ``hub``."""
    password = f"pw-{os.urandom(6).hex()}"
    admin = server.url("root", "")
    query(admin, "CREATE DATABASE crawl")
    query(admin, "CREATE USER 'crawler'@'%%' IDENTIFIED BY %s", password)
    query(admin, "GRANT ALL ON crawl.* TO 'crawler'@'%%'")
    return server.url("crawler", password, "crawl", host=hub)


def _site_paths(root: Path) -> set[str]:
    return {"/" + path.relative_to(root).as_posix() for path in root.rglob("*.html")}


def _stored_urls(workdir: Path) -> list[str]:
    with sqlite3.connect(workdir / "topicspider.db") as connection:
        return [url for (url,) in connection.execute("SELECT url FROM pages")]


@pytest.mark.parametrize("given", ["url", "params", "env", "acl_user"])
def test_redis_with_a_password_over_tls_and_the_password_shown_nowhere(tmp_path, serve, private_redis, given):
    """``acl_user``: a user of Redis 6's ACLs, with a password of its own, in the URL."""
    generate_site(tmp_path / "site", 5, 2)
    site = serve(tmp_path / "site")
    secret, user = private_redis.password, None
    if given == "acl_user":
        import redis

        secret, user = f"acl-{os.urandom(6).hex()}", "crawler"
        admin = redis.Redis.from_url(private_redis.url(private_redis.password))
        admin.execute_command("ACL", "SETUSER", user, "on", f">{secret}", "~*", "&*", "+@all")
        admin.close()
    url = private_redis.url(secret if given in ("url", "acl_user") else None, tls=True, user=user)
    settings: dict[str, Any] = {**WORKER_SETTINGS, "REDIS_URL": url}
    if given == "params":
        settings["REDIS_PARAMS"] = json.dumps({"password": secret})
    env = {**project_env(), **({"REDIS_PASSWORD": secret} if given == "env" else {})}
    workdir = tmp_path / "w"
    workdir.mkdir()
    done = subprocess.run(crawl_command(f"{site.url}/", 2, settings), cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(stored_paths(workdir)) == 5
    shown = done.stdout + done.stderr + "".join(
        path.read_text(errors="replace") for path in workdir.iterdir() if path.suffix in (".json", ".log", ".txt"))
    assert secret not in shown
    wrong = subprocess.run(crawl_command(f"{site.url}/", 2, {**settings, "REDIS_URL": private_redis.url("wrong-password")}),
                           cwd=workdir, env=project_env(), capture_output=True, text=True, timeout=120)
    errors = [line for line in wrong.stderr.splitlines() if "error" in line.lower()]
    assert wrong.returncode == 2 and len(errors) == 1 and "cannot use Redis" in errors[0], wrong.stderr[-2000:]
    assert secret not in wrong.stdout + wrong.stderr


def test_without_redis_url_nothing_of_redis_is_imported(tmp_path, serve):
    generate_site(tmp_path / "site", 3, 1)
    site = serve(tmp_path / "site")
    script = (
        "import sys\n"
        "from scrapy.cmdline import execute\n"
        "try:\n"
        f"    execute(['scrapy', 'crawl', 'topic', '-a', 'seeds={site.url}/', '-a', 'depth=1',"
        " '-s', 'DOWNLOAD_DELAY=0', '-s', 'PAGE_PROCESSES=0'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('redis imported:', sorted(name for name in sys.modules if name.split('.')[0] in ('redis', 'scrapy_redis')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=project_env(),
                          capture_output=True, text=True, timeout=120)
    assert "redis imported: []" in done.stdout, done.stdout + done.stderr[-2000:]


def test_a_queue_of_an_earlier_version_stops_the_crawl_before_it_starts(tmp_path, serve, redis_crawl):
    """An earlier version queued pickles: this one would set each aside, and leave its
    level counted for ever. It says so and exits 2, until the crawl is reset."""
    depths = generate_site(tmp_path / "site", 3, 1)
    site = serve(tmp_path / "site")
    queue = f"{redis_crawl.prefix}:requests"
    redis_crawl.client.zadd(queue, {pickle.dumps({"url": f"{site.url}/old", "meta": {"depth": 1}}, protocol=4): 0})
    command = crawl_command(f"{site.url}/", max(depths.values()), {**WORKER_SETTINGS, **redis_crawl.settings()})
    refused = run_project(command, tmp_path)
    errors = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert refused.returncode == 2 and len(errors) == 1 and "earlier version (pickles)" in errors[0], refused.stderr
    assert page_paths(site) == []
    reset = run_project(push_seeds_command(f"{site.url}/", redis_crawl.settings()) + ["--reset"], tmp_path)
    assert reset.returncode == 0, reset.stderr[-2000:]
    assert run_project(command, tmp_path).returncode == 0
    assert "/old" not in page_paths(site) and len(stored_paths(tmp_path)) == 3


def test_the_queue_encoding_keeps_what_the_topic_spider_puts_in_a_request() -> None:
    from topicspider.requestcodec import decode_request, encode_request
    from topicspider.spiders.topic import TopicSpider

    spider = TopicSpider(seeds="http://example.com/")
    request = spider._request("http://example.com/a", "example.com", depth=2)
    request.priority = -2
    request.cb_kwargs["note"] = "kept"
    decoded = decode_request(encode_request(request, spider), spider)
    assert decoded.url == request.url and decoded.priority == -2
    assert decoded.callback == spider.parse and decoded.errback == spider.on_error
    assert decoded.meta == {"site": "example.com", "depth": 2} and decoded.cb_kwargs == {"note": "kept"}


def test_a_booking_read_late_counts_as_late() -> None:
    from topicspider.middlewares.clusterpacing import STALE_TICKET, lateness

    # Asked at 0, Redis answered within a millisecond (the quickest round trip: 1 ms)
    # with a start 0.2 s on, and the request leaves at 0.2: on time.
    assert abs(lateness(0.2005, 0.0, 0.001, 0.2)) < STALE_TICKET
    # Asked at 0 with the start due at once, but the answer was read 0.13 s later (the
    # reactor held the GIL): leaving then is 0.13 s late, whenever the answer was read.
    assert lateness(0.131, 0.0, 0.001, 0.0) > 0.12


# A round of the shared frontier asked for (a level timer's kick) while the close reads the
# cluster's ledger; what reached Redis, in order, printed as the process exits.
KICKED_AT_CLOSE = """
import atexit, sys, time
from topicspider.cluster import frontier, scheduler
schedulers, calls = [], []
atexit.register(lambda: print("REDIS CALLS", " ".join(calls), file=sys.stderr))
real_open = scheduler.ClusterScheduler.open
def remember(self, spider):
    schedulers.append(self)
    return real_open(self, spider)
real_exchange = frontier.RedisFrontier.exchange
def exchange(self, work):
    calls.append("exchange")
    return real_exchange(self, work)
real_ledger = frontier.RedisFrontier.ledger
def kicked_meanwhile(self):
    from twisted.internet import reactor  # the crawl's, installed by now
    calls.append("ledger")
    reactor.callFromThread(schedulers[0]._kick)
    time.sleep(0.3)
    return real_ledger(self)
scheduler.ClusterScheduler.open = remember
frontier.RedisFrontier.exchange = exchange
frontier.RedisFrontier.ledger = kicked_meanwhile
"""


def test_no_round_starts_once_the_closing_worker_has_drained(tmp_path, serve, redis_crawl):
    """A round asked for after the close's last one (a timer's kick) queued a Redis call
    behind the close's own, on a pool the close then stopped: when the stop came first,
    the round never ended, and asyncio logged "Task was destroyed but it is pending!"."""
    generate_site(tmp_path / "site", 5, 1)
    site = serve(tmp_path / "site")
    worker = Worker(tmp_path / "w0", redis_crawl, f"{site.url}/", depth=1, patch=KICKED_AT_CLOSE)
    finish([worker])
    calls = next(line for line in worker.log().splitlines() if line.startswith("REDIS CALLS")).split()[2:]
    assert calls[-1] == "ledger" and "exchange" in calls, calls

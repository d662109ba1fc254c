"""Scaling of a distributed crawl: pages per second with 1, 2 and 3 workers sharing one
crawl through Redis, on a site spread over several local hosts.

Usage (from the repository root, with the project's virtualenv and a Redis server)::

    .venv/bin/python bench/bench_cluster.py [--redis redis://127.0.0.1:6379/0] [--rounds 2]
        [--hosts 12] [--pages 100] [--delay 0.1] [--latency 0.1] [--concurrency 2] [--netns] [--keep]
        [--plot docs/scaling.svg]

Each host is a :mod:`topicspider.localsite` server on its own loopback address
(127.0.0.40 and up), serving a generated linked site of ``--pages`` pages whose every
answer is ``--latency`` seconds late (a ``Delay:`` sidecar header; the server answers
many requests at once), as a remote server would be. Each worker is a real
``scrapy crawl topic`` process joining the crawl without seeds; once all have opened, the
hosts' seed URLs are pushed with ``scrapy push-seeds``, and the crawl runs to its end.

``--netns`` runs each worker as a machine of its own would be: in a network namespace
with a veth link to a bridge (:mod:`topicspider.netns`; needs root), where the hosts
and a Redis server of the benchmark's own listen, so that every request and every Redis
call crosses a network interface rather than the loopback. Each worker still stores
into a SQLite file of its own.

Why the workers are capped. This machine has 2 cores; workers on it share them, so a
worker bound by CPU cannot show what another machine would add. Each worker is instead
bound by ``CONCURRENT_REQUESTS`` (``--concurrency``, 2) against the servers' latency, the
way one machine is bound by its own capacity: one worker can do at most concurrency /
latency pages per second (20), and three together (60/s) leave most of the 2 cores idle
(about 70 % in ``vmstat``), so the scaling shows what coordination costs, not a CPU shared
by three workers, twelve servers and Redis (the 40/s of ``--concurrency 4`` saturated
them). The politeness bound of the whole crawl is hosts / (delay + the 20 ms hand-off
margin) starts per second (100), and hosts * ``CONCURRENT_REQUESTS_PER_DOMAIN`` / latency
in flight (240), so while hosts outnumber workers, throughput should grow near-linearly
with the workers. A second configuration has 2 hosts and a delay of 0.2 s, where
politeness is the bound: more workers must not make it faster.

Rate: pages (robots.txt excluded) over the span from the first request start to the
last request end, from the servers' logs. Every page must be fetched exactly once and
no host may see two request starts closer than its delay (less 10 ms, the server's
timing resolution); otherwise the benchmark fails (exit status 1). Rounds alternate 1,
2, 3 workers, so that drift on the machine touches all alike; the figure is the median
over rounds, and the scaling is each worker count's rate over the 1-worker rate of the
same round.
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from common import REPO, BenchFailure, header_lines, run_in_scratch, write_svg

sys.path.insert(0, str(REPO))

from topicspider.localsite import generate_site, spawn  # noqa: E402
from topicspider.middlewares.clusterpacing import HANDOFF_MARGIN  # noqa: E402
from topicspider.netns import VethNetwork, unavailable_reason  # noqa: E402
from topicspider.urls import mask_url  # noqa: E402

Machines = Callable[[int, list[str]], list[str]]  # worker number, command -> the command that runs it there
from topicspider.runner import crawl_command, opened, project_env, push_seeds_command  # noqa: E402

TOLERANCE = 0.010
WORKER_COUNTS = (1, 2, 3)


@dataclass(frozen=True)
class Config:
    name: str
    hosts: int
    pages: int
    delay: float
    latency: float
    concurrency: int

    def bounds(self, workers: int) -> str:
        worker_bound = workers * self.concurrency / self.latency
        polite_bound = min(self.hosts / (self.delay + HANDOFF_MARGIN), self.hosts * 2 / self.latency)
        return f"worker bound {worker_bound:.0f}/s, politeness bound {polite_bound:.0f}/s"

    def describe(self) -> str:
        return f"{self.hosts} hosts, delay {self.delay} s, {self.concurrency} requests per worker"


@dataclass
class Host:
    address: str
    url: str
    log: Path
    process: subprocess.Popen[str]

    def requests(self, skip: int) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()[skip:] if self.log.exists() else []
        return [json.loads(line) for line in lines]


def start_hosts(config: Config, scratch: Path, address_of: Callable[[int], str]) -> list[Host]:
    hosts = []
    for index in range(config.hosts):
        root = scratch / config.name / f"site{index}"
        generate_site(root, config.pages, 3, seed=index)
        for page in [root / "index.html", *root.glob("p*.html")]:
            page.with_name(page.name + ".headers").write_text(f"Delay: {config.latency}\n")
        address = address_of(index)
        log = scratch / config.name / f"server{index}.log"
        process, port = spawn(root, "--log", str(log), "--host", address)
        hosts.append(Host(address, f"http://{address}:{port}/", log, process))
    return hosts


def settings_for(config: Config, redis_url: str, prefix: str, extra: dict[str, str]) -> dict[str, object]:
    return {
        "REDIS_URL": redis_url, "SCHEDULER_QUEUE_KEY": f"{prefix}:requests",
        "SCHEDULER_DUPEFILTER_KEY": f"{prefix}:dupefilter", "REDIS_START_URLS_KEY": f"{prefix}:start_urls",
        "DOWNLOAD_DELAY": config.delay, "DOWNLOAD_DELAY_JITTER": 0, "CONCURRENT_REQUESTS": config.concurrency,
        "REDIS_PREFETCH": 2 * config.concurrency, "REDIS_IDLE_TIMEOUT": 2, "CRAWL_LOG": "", "LOG_LEVEL": "INFO",
        **extra,
    }


def run_workers(config: Config, workers: int, hosts: list[Host], scratch: Path, redis_url: str,
                timeout: float, extra: dict[str, str], machine: Machines) -> float:
    prefix = f"bench-cluster-{secrets.token_hex(4)}"
    settings = settings_for(config, redis_url, prefix, extra)
    skips = [len(host.requests(0)) for host in hosts]
    processes: list[tuple[Path, subprocess.Popen[bytes]]] = []
    for number in range(workers):
        workdir = scratch / config.name / f"run-{prefix}-w{number}"
        workdir.mkdir(parents=True)
        with (workdir / "stderr.txt").open("w") as err:
            processes.append((workdir, subprocess.Popen(machine(number, crawl_command("", 40, settings)), cwd=workdir,
                                                        env=project_env(), stdout=subprocess.DEVNULL, stderr=err)))
    try:
        wait_for_workers(processes, timeout, settings, hosts, scratch)
    finally:  # none left behind (in a network namespace about to be deleted least of all)
        for _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    rate = measure(config, hosts, skips)
    forget(redis_url, prefix)
    return rate


def wait_for_workers(processes: list[tuple[Path, subprocess.Popen[bytes]]], timeout: float,
                     settings: dict[str, object], hosts: list[Host], scratch: Path) -> None:
    """Once every worker has opened, push the hosts' seeds; then wait for each to end well."""
    deadline = time.monotonic() + timeout
    for workdir, process in processes:
        while not opened(workdir / "stderr.txt"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchFailure(f"worker in {workdir} did not start")
            time.sleep(0.1)
    push = push_seeds_command(",".join(host.url for host in hosts), settings)
    subprocess.run(push, cwd=scratch, env=project_env(), check=True, capture_output=True)
    for workdir, process in processes:
        try:
            if process.wait(timeout=max(1.0, deadline - time.monotonic())) != 0:
                raise BenchFailure(f"worker in {workdir} failed")
        except subprocess.TimeoutExpired:
            process.kill()
            raise BenchFailure(f"worker in {workdir} did not finish in time") from None


def forget(redis_url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)
    client.close()


def measure(config: Config, hosts: list[Host], skips: list[int]) -> float:
    starts, ends, pages = [], [], 0
    for host, skip in zip(hosts, skips):
        records = [record for record in host.requests(skip) if record["path"] != "/robots.txt"]
        counts = Counter(record["path"] for record in records)
        if len(counts) != config.pages or max(counts.values()) != 1:
            raise BenchFailure(f"{host.address}: {len(counts)} distinct pages of {config.pages},"
                               f" most requested {counts.most_common(1)}")
        times = sorted(record["start"] for record in host.requests(skip))
        short = [later - earlier for earlier, later in zip(times, times[1:]) if later - earlier < config.delay - TOLERANCE]
        if short:
            raise BenchFailure(f"{host.address}: {len(short)} gaps shorter than {config.delay} s: {short[:5]}")
        starts += [record["start"] for record in records]
        ends += [record["end"] for record in records]
        pages += len(records)
    return pages / (max(ends) - min(starts))


def on_this_machine(number: int, command: list[str]) -> list[str]:
    return command


@contextmanager
def network(options: argparse.Namespace, scratch: Path) -> Iterator[tuple[Callable[[int], str], str, Machines]]:
    """Where the hosts listen, the Redis URL and how a worker is started: on loopback
    with ``--redis``, or (``--netns``) each worker in a network namespace of its own with a
    Redis server of the benchmark's own on the veth network's hub."""
    if not options.netns:
        yield (lambda index: f"127.0.0.{options.first_address + index}"), options.redis, on_this_machine
        return
    reason = unavailable_reason()
    if reason is not None:
        raise BenchFailure(f"--netns: {reason}")
    with VethNetwork(workers=max(WORKER_COUNTS), sites=max(options.hosts, 2)) as net:
        with socket.socket() as probe:
            probe.bind((net.hub, 0))
            port = probe.getsockname()[1]
        # A password, as Redis on a network wants (it refuses other hosts without one).
        password = secrets.token_hex(8)
        log = (scratch / "redis.log").open("w")
        redis = subprocess.Popen(["redis-server", "--bind", net.hub, "--port", str(port), "--requirepass", password,
                                  "--save", "", "--appendonly", "no", "--dir", str(scratch)], stdout=log, stderr=log)
        try:
            url = f"redis://:{password}@{net.hub}:{port}/0"
            wait_for_redis(url, redis)
            yield net.site_address, url, net.command
        finally:
            redis.terminate()
            redis.wait(timeout=10)
            log.close()


def wait_for_redis(url: str, process: subprocess.Popen[bytes]) -> None:
    import redis

    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=1).ping()
            return
        except redis.ConnectionError:
            time.sleep(0.1)
    raise BenchFailure(f"the benchmark's Redis server at {url} did not start")


def benchmark(options: argparse.Namespace, scratch: Path) -> None:
    with network(options, scratch) as (address_of, redis_url, machine):
        run_configs(options, scratch, address_of, redis_url, machine)


def run_configs(options: argparse.Namespace, scratch: Path, address_of: Callable[[int], str], redis_url: str,
                machine: Machines) -> None:
    configs = [
        Config("workers", options.hosts, options.pages, options.delay, options.latency, options.concurrency),
        Config("polite", 2, options.pages, 0.2, options.latency, options.concurrency),
    ]
    print("\n".join(header_lines("topicspider distributed crawl scaling", ["scrapy", "scrapy-redis", "redis"])))
    where = ("each worker in a network namespace of its own, over a veth link and a bridge to Redis and the hosts"
             if options.netns else "every worker on this machine's loopback")
    print(f"  network       {where}")
    print(f"  redis         {mask_url(redis_url)}; rounds {options.rounds}; extra settings {options.set or 'none'}")
    medians: dict[str, dict[int, float]] = {}
    for config in configs:
        if options.only and config.name != options.only:
            continue
        print(f"\n{config.name}: {config.hosts} hosts x {config.pages} pages, delay {config.delay} s, latency"
              f" {config.latency} s, CONCURRENT_REQUESTS {config.concurrency} per worker")
        hosts = start_hosts(config, scratch, address_of)
        rates: dict[int, list[float]] = {count: [] for count in WORKER_COUNTS}
        try:
            for round_ in range(options.rounds):
                for count in WORKER_COUNTS:
                    rate = run_workers(config, count, hosts, scratch, redis_url, options.timeout,
                                       dict(item.split("=", 1) for item in options.set), machine)
                    rates[count].append(rate)
                    print(f"  round {round_ + 1}: {count} worker(s) {rate:7.1f} pages/s ({config.bounds(count)})",
                          flush=True)
        finally:
            for host in hosts:
                host.process.terminate()
        for count in WORKER_COUNTS:
            scaling = [rate / one for rate, one in zip(rates[count], rates[1])]
            print(f"  {count} worker(s): median {statistics.median(rates[count]):7.1f} pages/s,"
                  f" {statistics.median(scaling):.2f}x one worker (rounds: "
                  + ", ".join(f"{x:.2f}" for x in scaling) + ")")
        medians[f"{config.name}: {config.describe()}"] = {count: statistics.median(rates[count]) for count in WORKER_COUNTS}
    if options.plot and medians:
        plot_scaling(medians, options.plot, f"{options.rounds} round(s), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


PLOT_COLOURS = ("#1f77b4", "#d62728", "#2ca02c")


def plot_scaling(medians: dict[str, dict[int, float]], path: Path, when: str) -> None:
    """An SVG of each configuration's median pages/s against the workers, with the
    linear scaling of its one-worker rate dashed beside it."""
    width, height, left, top = 420, 260, 50, 40
    top_rate = max(max(*rates.values(), rates[1] * len(WORKER_COUNTS)) for rates in medians.values()) * 1.05
    most = max(WORKER_COUNTS)

    def point(workers: float, rate: float) -> str:
        return f"{left + width * (workers - 1) / (most - 1):.1f},{top + height * (1 - rate / top_rate):.1f}"

    parts = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>',
             f'<text x="{left}" y="{top - 14}" font-size="13">pages/s of one crawl shared by 1, 2 and 3 workers</text>',
             f'<text x="{left - 40}" y="{top + 4}" font-size="10">{top_rate:.0f}</text>',
             f'<text x="{left - 12}" y="{top + height}" font-size="10">0</text>']
    for count in WORKER_COUNTS:
        x, _ = point(count, 0).split(",")
        parts.append(f'<text x="{x}" y="{top + height + 14}" font-size="10" text-anchor="middle">'
                     f'{count} worker{"s" if count > 1 else ""}</text>')
    for index, (label, rates) in enumerate(medians.items()):
        colour = PLOT_COLOURS[index % len(PLOT_COLOURS)]
        points = " ".join(point(count, rates[count]) for count in WORKER_COUNTS)
        linear = " ".join(point(count, rates[1] * count) for count in WORKER_COUNTS)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1" stroke-dasharray="4 3" points="{linear}"/>')
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        scaling = rates[most] / rates[1]
        parts.append(f'<text x="{left}" y="{top + height + 32 + 14 * index}" font-size="11" fill="{colour}">'
                     f'{escape(label)}: {scaling:.2f}x with {most} (dashed: linear)</text>')
    parts.append(f'<text x="{left}" y="{top + height + 32 + 14 * len(medians)}" font-size="10" fill="#555">'
                 f'bench/bench_cluster.py, median of {escape(when)}</text>')
    write_svg(path, width + left + 40, height + top + 50 + 14 * len(medians), "".join(parts))
    print(f"\nscaling plot written to {path}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis server (default local, db 0)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=12)
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--delay", type=float, default=0.1, help="DOWNLOAD_DELAY (default 0.1 s)")
    parser.add_argument("--latency", type=float, default=0.1, help="server answer delay (default 0.1 s)")
    parser.add_argument("--concurrency", type=int, default=2, help="CONCURRENT_REQUESTS per worker (default 2)")
    parser.add_argument("--first-address", type=int, default=40, help="first host is 127.0.0.N (default 40)")
    parser.add_argument("--netns", action="store_true",
                        help="each worker in a network namespace of its own (needs root; see topicspider.netns)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--only", default="", help="run only this configuration (workers or polite)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a further setting for every worker (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--plot", type=Path, default=None, help="write the scaling plot (SVG) here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_in_scratch("bench_cluster", "topicspider-bench-cluster-", options.keep,
                          lambda scratch: benchmark(options, scratch))


if __name__ == "__main__":
    sys.exit(main())

"""Politeness efficiency of topicspider: how close a crawl of many delayed hosts in
parallel comes to the time the per-host delay alone imposes.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_politeness.py [--rounds 1] [--only A,B] [--links 3]
        [--first-address 10] [--keep]

For each configuration it generates one linked static site per host with
:func:`topicspider.localsite.generate_site` (seed = host index), serves each with its own
:mod:`topicspider.localsite` process on its own loopback address (127.0.0.10,
127.0.0.11...; each is a separate Scrapy downloader slot, and a separate site to the
spider), and crawls all hosts at once with ``scrapy crawl topic`` as the tests run it
(:mod:`topicspider.runner`; project settings, every feature on) from a fresh working
directory, one seed URL per host, to a depth that reaches every page.

Counting. The crawler fetches ``/robots.txt`` first on every host (404 here: no rules,
no Crawl-delay); it is paced like a page, so it is counted: R = pages + 1 requests per
host, R - 1 delays between them.

Ideals, with f = 1 + DOWNLOAD_DELAY_JITTER / 2 the mean factor of the upward-only jitter
(1 with jitter 0, 1.25 with the default 0.5):

* ``ideal p*d``   = pages * d * f, the spec's formula;
* ``ideal exact`` = (R - 1) * d * f + t_last, where t_last is the server time of a
  host's last request (median over hosts, from the server log): the (pages - 1) * d +
  last fetch of a crawl without robots.txt, with robots.txt counted as a request. As
  (R - 1) = pages, it exceeds p*d only by t_last (a millisecond or so). With
  jitter, each host's sum of delays is random and the crawl waits for the slowest
  host: the expected maximum over H hosts (Monte Carlo) is printed as well, both for
  one draw per gap and for gaps that are the larger of two successive draws (what
  Scrapy's downloader makes of a per-request delay: after a request goes out it
  re-arms the host's timer with the delay then in force, and a later, shorter draw
  cannot cut that wait short; mean factor 1 + 2 * jitter / 3).

``actual`` is ``report.elapsed_seconds`` of the run's stats.json: spider opened to
spider closed, inside the crawler process (interpreter start-up excluded). The goal is
ideal / actual >= 0.9. From the server logs, per host: span = first request start to
last request start, against (R - 1) * d * f; the gaps between consecutive request
starts on a host (the minimum must be >= d minus TOLERANCE, any shorter gap is a
politeness violation and is flagged); and the time lost, gap by gap, above d,
attributed to the kind of step (robots.txt -> seed, seed -> first depth-1 page, within
a depth level, across a later level barrier of
``topicspider.scheduler.FrontierScheduler``). The breakdown of
``actual`` is: start-up (spider opened -> first request start on any host), the window
(first start -> last end, over all hosts) and the tail (last end -> spider closed).

Configurations: H=4 x 20 pages, d=0.5 s; H=16 x 10, d=1 s; H=24 x 8, d=1 s, also with
CONCURRENT_REQUESTS=16 (fewer slots than hosts: each host holds one while it waits out
its delay); D: H=4 x 20 at the project's defaults (``DOWNLOAD_DELAY`` 2 s,
``DOWNLOAD_DELAY_JITTER`` 0: the ratio to reach there is 0.95); H=4 x 20, d=0.5 s and
H=24 x 8, d=1 s with jitter 0.5, the default until 2026-12-03 (the
jitter takes the hosts out of phase, so that more of them wait at any one time). The
pacing middleware adds a send margin of a twentieth of the delay, at most 50 ms, which
the ideals leave out: it caps the ratio at about 0.95. Any failed
crawl, missing page or non-200 answer stops the benchmark with exit status 1, keeping its
files. A politeness violation is printed loudly but does not stop it. One round takes
about 2.5 minutes.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from common import REPO, BenchFailure, header_lines, run_in_scratch

sys.path.insert(0, str(REPO))

from topicspider import settings as defaults  # noqa: E402
from topicspider.localsite import generate_site  # noqa: E402
from topicspider.runner import crawl_command, project_env  # noqa: E402

GOAL = 0.9
# Request starts are taken by the server when it reads the request line, a little after
# the crawler wrote it (strace of the crawler's send calls against the server log, 24
# hosts at once on 2 CPUs: median 0.1 ms later, at most 8 ms), so a gap may look up to
# that much shorter than it was on the wire. Shorter still is a violation.
TOLERANCE = 0.010
JITTER_TRIALS = 2000


@dataclass(frozen=True)
class Config:
    name: str
    hosts: int
    pages: int
    delay: float
    jitter: float = 0.0
    concurrency: int = 64  # CONCURRENT_REQUESTS (the project default)
    per_domain: int = 2  # CONCURRENT_REQUESTS_PER_DOMAIN
    note: str = ""

    @property
    def factor(self) -> float:
        """The mean of the jitter's factor ``1 + uniform(0, jitter)``."""
        return 1 + self.jitter / 2

    @property
    def requests(self) -> int:
        return self.pages + 1  # robots.txt counted

    def settings(self) -> dict[str, object]:
        return {"DOWNLOAD_DELAY": self.delay, "DOWNLOAD_DELAY_JITTER": self.jitter,
                "CONCURRENT_REQUESTS": self.concurrency,
                "CONCURRENT_REQUESTS_PER_DOMAIN": self.per_domain}


CONFIGS = (
    Config("A", 4, 20, 0.5),
    Config("B", 16, 10, 1.0),
    Config("C", 24, 8, 1.0),
    Config("C16", 24, 8, 1.0, concurrency=16, note="more hosts than CONCURRENT_REQUESTS=16"),
    Config("D", 4, 20, defaults.DOWNLOAD_DELAY, jitter=defaults.DOWNLOAD_DELAY_JITTER,
           note="the project's defaults: DOWNLOAD_DELAY and DOWNLOAD_DELAY_JITTER"),
    Config("Aj", 4, 20, 0.5, jitter=0.5, note="jitter 0.5 (the default until 2026-12-03): mean factor 1.25"),
    Config("Cj", 24, 8, 1.0, jitter=0.5, note="C with jitter: hosts drift out of phase"),
)


@dataclass
class HostResult:
    address: str
    starts: list[float]
    span: float  # first start to last start
    gaps: list[float]
    last_service: float  # server time of the last request
    excess: dict[str, float]  # seconds above d per kind of step
    short: list[tuple[str, float]]  # (kind of step, gap) of the gaps shorter than d


@dataclass
class Run:
    config: Config
    round: int
    elapsed: float
    wall: float
    startup: float  # spider opened -> first request start, any host
    window: float  # first request start -> last request end, all hosts
    tail: float  # last request end -> spider closed
    depth: int  # -a depth, the deepest page of the sites
    stats: dict[str, Any]  # the crawler's stats
    hosts: list[HostResult] = field(default_factory=list)

    @property
    def t_last(self) -> float:
        return statistics.median(h.last_service for h in self.hosts)

    @property
    def ideal_spec(self) -> float:
        return self.config.pages * self.config.delay * self.config.factor

    @property
    def ideal_exact(self) -> float:
        return (self.config.requests - 1) * self.config.delay * self.config.factor + self.t_last

    @property
    def min_gap(self) -> float:
        return min(min(h.gaps) for h in self.hosts)

    def spans(self) -> list[float]:
        return [h.span for h in self.hosts]

    def all_gaps(self) -> list[float]:
        return [g for h in self.hosts for g in h.gaps]


# --- servers ---------------------------------------------------------------------------

class Server:
    """One generated site on its own loopback address, served by ``topicspider.localsite``."""

    def __init__(self, root: Path, log_path: Path, address: str, depths: dict[str, int]) -> None:
        self.root, self.log_path, self.address, self.depths = root, log_path, address, depths
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def launch(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "topicspider.localsite", str(self.root), "--port", "0",
             "--log", str(self.log_path), "--host", self.address],
            stdout=subprocess.PIPE, text=True, cwd=REPO, env=project_env(),
        )

    def wait_ready(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            raise BenchFailure(f"localsite on {self.address} did not print its port (got {line!r})")
        self.url = f"http://{self.address}:{int(line)}/"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]


def read_logs(servers: Sequence[Server]) -> dict[str, list[dict[str, Any]]]:
    """Every server's requests, once the logs have stopped growing (a line is written
    just after its response has been sent)."""
    sizes: list[int] = []
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        current = [server.log_size() for server in servers]
        if current == sizes:
            break
        sizes = current
        time.sleep(0.1)
    return {server.address: server.requests() for server in servers}


def start_servers(config: Config, scratch: Path, first_address: int, links: int) -> list[Server]:
    servers = []
    for index in range(config.hosts):
        root = scratch / "sites" / f"{config.pages}p-{index}"
        depths = generate_site(root, config.pages, links, seed=index)
        address = f"127.0.0.{first_address + index}"
        servers.append(Server(root, scratch / f"server-{address}.log", address, depths))
    for server in servers:
        server.launch()
    try:
        for server in servers:
            server.wait_ready()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


# --- one run -----------------------------------------------------------------------------

def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def command_for(config: Config, servers: Sequence[Server], depth: int) -> list[str]:
    return crawl_command(",".join(s.url for s in servers), depth=depth, settings=config.settings())


def run_config(config: Config, round_: int, scratch: Path, options: argparse.Namespace) -> Run:
    base = scratch / f"{config.name}-round{round_}"
    servers = start_servers(config, base, options.first_address, options.links)
    try:
        depth = max(max(s.depths.values()) for s in servers)
        workdir = base / "crawl"
        workdir.mkdir(parents=True)
        command = command_for(config, servers, depth)
        started = time.monotonic()
        with (workdir / "stdout.txt").open("w") as out, (workdir / "stderr.txt").open("w") as err:
            try:
                done = subprocess.run(command, cwd=workdir, env=project_env(), stdout=out, stderr=err,
                                      timeout=options.timeout, check=False)
            except subprocess.TimeoutExpired:
                raise BenchFailure(f"{config.name}: no finish in {options.timeout:g}s; see {workdir}") from None
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise BenchFailure(f"{config.name}: exit status {done.returncode}:\n{_tail(workdir / 'stderr.txt')}")
        stats_path = workdir / "stats.json"
        if not stats_path.exists():
            raise BenchFailure(f"{config.name}: no stats.json:\n{_tail(workdir / 'stderr.txt')}")
        document = json.loads(stats_path.read_text())
        report, stats = document["report"], document["stats"]
        expected = config.hosts * config.pages
        if report["pages_fetched"] != expected or report["errors"] or report["finish_reason"] != "finished":
            raise BenchFailure(
                f"{config.name}: {report['pages_fetched']} pages fetched of {expected}, "
                f"{report['errors']} errors, finish reason {report['finish_reason']!r}; see {workdir}")
        logs = read_logs(servers)
    finally:
        for server in servers:
            server.stop()

    hosts = [_host_result(config, server, logs[server.address], workdir) for server in servers]
    first_start = min(r["start"] for log in logs.values() for r in log)
    last_end = max(r["end"] for log in logs.values() for r in log)
    opened, closed = _timestamp(stats["start_time"]), _timestamp(stats["finish_time"])
    return Run(config, round_, report["elapsed_seconds"], wall, first_start - opened,
               last_end - first_start, closed - last_end, depth, stats, hosts)


def _host_result(config: Config, server: Server, log: list[dict[str, Any]], workdir: Path) -> HostResult:
    log = sorted(log, key=lambda r: r["start"])
    paths = [r["path"] for r in log]
    robots = [r for r in log if r["path"] == "/robots.txt"]
    pages = [r for r in log if r["path"] != "/robots.txt"]
    problems = []
    if len(robots) != 1 or log[0]["path"] != "/robots.txt":
        problems.append(f"robots.txt asked {len(robots)} time(s), first request {paths[:1]}")
    if sorted(r["path"] for r in pages) != sorted(server.depths):
        missing = set(server.depths) - set(paths)
        problems.append(f"{len(pages)} page requests for {len(server.depths)} pages, missing {sorted(missing)[:3]}")
    bad = [r for r in pages if r["status"] != 200]
    if bad:
        problems.append(f"{len(bad)} non-200 answers, e.g. {bad[0]['path']} {bad[0]['status']}")
    if problems:
        raise BenchFailure(f"{config.name}, host {server.address}: " + "; ".join(problems) + f"; see {workdir}")

    starts = [r["start"] for r in log]
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    excess: dict[str, float] = defaultdict(float)
    short = []
    for earlier, later, gap in zip(log, log[1:], gaps):
        if earlier["path"] == "/robots.txt":
            kind = "robots->seed"
        elif earlier["path"] == "/":
            kind = "seed->next"
        elif server.depths[earlier["path"]] == server.depths[later["path"]]:
            kind = "same level"
        else:
            kind = "level change"
        excess[kind] += max(0.0, gap - config.delay)
        if gap < config.delay:
            short.append((kind, gap))
    return HostResult(server.address, starts, starts[-1] - starts[0], gaps,
                      log[-1]["end"] - log[-1]["start"], dict(excess), short)


def expected_max_jitter(config: Config, paired: bool, trials: int = JITTER_TRIALS) -> float:
    """E[max over hosts of the sum of the R - 1 jittered gaps of a host], by Monte Carlo.

    ``paired``: each gap is the larger of two successive requests' draws, instead of a
    draw of its own.
    """
    rng = random.Random(0)
    steps, d, j = config.requests - 1, config.delay, config.jitter
    total = 0.0
    for _ in range(trials):
        slowest = 0.0
        for _ in range(config.hosts):
            draws = [d * (1 + rng.uniform(0, j)) for _ in range(steps + 1)]
            gaps = [max(a, b) for a, b in zip(draws, draws[1:])] if paired else draws[1:]
            slowest = max(slowest, sum(gaps))
        total += slowest
    return total / trials


# --- printing ----------------------------------------------------------------------------

def print_conditions(options: argparse.Namespace, configs: Sequence[Config]) -> None:
    import topicspider.settings as project_settings

    print("\n".join(header_lines("topicspider politeness benchmark", ("scrapy", "twisted"))))
    print(f"  sites         one per host: generate_site(pages, links_per_page={options.links}, seed=host index); "
          f"topicspider.localsite on 127.0.0.{options.first_address} and up, one process per host")
    print(f"  rounds        {options.rounds}; fresh servers, logs and working directory per run")
    print("  counting      robots.txt (404) counted: R = pages + 1 requests per host, R - 1 delays")
    print("  ideal p*d     pages * d * f, f = 1 + jitter/2 (the spec's)")
    print("  ideal exact   (R - 1) * d * f + t_last (median server time of a host's last request)")
    print("  actual        report.elapsed_seconds: spider opened -> spider closed, in the crawler")
    print(f"  goal          ideal / actual >= {GOAL}; "
          f"min gap between starts on a host >= d - {TOLERANCE * 1000:.0f} ms")
    print("  project       " + ", ".join(
        f"{name}={getattr(project_settings, name)!r}" for name in
        ("ROBOTSTXT_OBEY", "SCHEDULER", "SCHEDULER_LEVEL_SYNC", "CONCURRENT_REQUESTS",
         "CONCURRENT_REQUESTS_PER_DOMAIN", "DOWNLOAD_DELAY", "DOWNLOAD_DELAY_JITTER")))
    print("  crawl         python -m scrapy crawl topic -a seeds=<one URL per host> -a depth=<deepest page> "
          "<-s below>,\n                with SCRAPY_SETTINGS_MODULE=topicspider.settings, in a fresh directory")
    print("  configs")
    for config in configs:
        settings = " ".join(f"-s {k}={v}" for k, v in config.settings().items())
        print(f"    {config.name:<4} H={config.hosts} x {config.pages} pages, {settings}"
              + (f"  ({config.note})" if config.note else ""))
    print(flush=True)


def print_run_line(run: Run) -> None:
    held = ", ".join(f"{reason} {run.stats.get(f'scheduler/held/{reason}', 0)}" for reason in ("host", "level"))
    print(f"{run.elapsed:.2f}s (ideal exact {run.ideal_exact:.2f}s, ratio {run.ideal_exact / run.elapsed:.3f}; "
          f"depth {run.depth}; robots.txt fetched {run.stats.get('robots/fetched', 0)}; "
          f"requests held by the scheduler: {held})", flush=True)


def print_table(runs: Sequence[Run]) -> None:
    header = (f"{'cfg':<4} {'rnd':>3} {'H':>3} {'pg':>3} {'d':>4} {'jit':>4} {'CR':>3} | "
              f"{'ideal':>6} {'ideal':>6} {'actual':>6} | {'span':>7} {'span':>6} {'span':>6} | "
              f"{'ratio':>6} {'ratio':>6} | {'min gap':>7} {'med gap':>7} | goal\n"
              f"{'':<4} {'':>3} {'':>3} {'':>3} {'s':>4} {'':>4} {'':>3} | "
              f"{'p*d':>6} {'exact':>6} {'s':>6} | {'(R-1)df':>7} {'med':>6} {'max':>6} | "
              f"{'p*d':>6} {'exact':>6} | {'s':>7} {'s':>7} |")
    width = len(header.splitlines()[0])
    print(header)
    print("-" * width)
    for run in runs:
        c = run.config
        ratio = run.ideal_exact / run.elapsed
        violation = run.min_gap < c.delay - TOLERANCE
        print(f"{c.name:<4} {run.round:>3} {c.hosts:>3} {c.pages:>3} {c.delay:>4.1f} {c.jitter:>4.2f} "
              f"{c.concurrency:>3} | "
              f"{run.ideal_spec:>6.2f} {run.ideal_exact:>6.2f} {run.elapsed:>6.2f} | "
              f"{(c.requests - 1) * c.delay * c.factor:>7.2f} {statistics.median(run.spans()):>6.2f} "
              f"{max(run.spans()):>6.2f} | {run.ideal_spec / run.elapsed:>6.3f} {ratio:>6.3f} | "
              f"{run.min_gap:>7.3f} {statistics.median(run.all_gaps()):>7.3f} | "
              f"{'met' if ratio >= GOAL else 'MISSED'}{'  !!! DELAY VIOLATED !!!' if violation else ''}")
    print("-" * width)
    print("span = first to last request start on a host (server log), median and max over hosts; (R-1)df = its\n"
          "ideal; ratio = ideal / actual; min/med gap = between consecutive request starts on one host")


KINDS = ("robots->seed", "seed->next", "same level", "level change")


def print_details(runs: Sequence[Run]) -> None:
    print("\nwhere the time goes (s): actual = start-up + window + tail")
    header = (f"{'cfg':<4} {'rnd':>3} | {'start-up':>8} {'window':>7} {'tail':>6} {'wall':>6} {'late':>5} | "
              f"{'req/s':>6} {'H/df':>6} {'CR/df':>6} | " + " ".join(f"{kind:>13}" for kind in KINDS))
    print(header)
    print("-" * len(header))
    for run in runs:
        c = run.config
        starts = sorted(s for h in run.hosts for s in h.starts)
        rate = (len(starts) - 1) / (starts[-1] - starts[0])
        firsts = [h.starts[0] for h in run.hosts]

        def per_host(kind: str) -> str:
            values = [host.excess.get(kind, 0.0) for host in run.hosts]
            return f"{statistics.mean(values):.2f}/{max(values):.2f}"

        print(f"{c.name:<4} {run.round:>3} | {run.startup:>8.2f} {run.window:>7.2f} {run.tail:>6.2f} {run.wall:>6.2f} "
              f"{max(firsts) - min(firsts):>5.2f} | "
              f"{rate:>6.1f} {c.hosts / (c.delay * c.factor):>6.1f} {c.concurrency / (c.delay * c.factor):>6.1f} | "
              + " ".join(f"{per_host(kind):>13}" for kind in KINDS))
    print("start-up = spider opened -> first request start; window = first request start -> last request end (all\n"
          "hosts); tail = last request end -> spider closed; wall = the whole process; late = last host's first\n"
          "request (robots.txt) start - first host's. req/s = request starts per second over all hosts; H/df = what\n"
          "the delays allow; CR/df = the cap if every request held one of the CONCURRENT_REQUESTS slots for a whole\n"
          "delay. Last four: seconds of gap above d, summed over a host's steps of that kind, mean/max over hosts\n"
          "(with jitter this includes the jitter itself); seed->next is the step from the seed to the first depth-1\n"
          "page, level change a later step to the next depth (the level barrier of FrontierScheduler).")

    print(f"\ngaps between consecutive request starts on one host (server clock; violation = below d - "
          f"{TOLERANCE * 1000:.0f} ms):")
    for run in runs:
        c = run.config
        gaps = run.all_gaps()
        short = [item for host in run.hosts for item in host.short]
        violations = [(kind, gap) for kind, gap in short if gap < c.delay - TOLERANCE]
        kinds: dict[str, int] = defaultdict(int)
        for kind, _ in violations:
            kinds[kind] += 1
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        shortest = min(gaps)
        line = (f"  {c.name:<4} round {run.round}: mean gap {statistics.mean(gaps):.4f}s = d x "
                f"{statistics.mean(gaps) / c.delay:.3f} (f = {c.factor:.3f}); {len(short)} of {len(gaps)} below d, "
                f"{len(violations)} below d - tolerance{f' ({shown})' if shown else ''}; shortest {shortest:.4f}s "
                f"= d {'-' if shortest < c.delay else '+'} {1000 * abs(c.delay - shortest):.1f} ms")
        if c.jitter:
            repeats = sum(1 for h in run.hosts for g1, g2 in zip(h.gaps, h.gaps[1:]) if abs(g1 - g2) < 0.002)
            pairs = sum(max(0, len(h.gaps) - 1) for h in run.hosts)
            line += (f"; consecutive gaps equal within 2 ms: {repeats} of {pairs} (independent draws: "
                     f"~{pairs * 2 * 0.002 / (c.delay * c.jitter):.0f})")
        if violations:
            line += "   !!! DELAY VIOLATED !!!"
        print(line)

    jittered = sorted({run.config for run in runs if run.config.jitter}, key=lambda c: c.name)
    for config in jittered:
        group = [r for r in runs if r.config == config]
        t_last = statistics.median(r.t_last for r in group)
        actual = statistics.median(r.elapsed for r in group)
        own = expected_max_jitter(config, paired=False) + t_last
        paired = expected_max_jitter(config, paired=True) + t_last
        mean_ideal = (config.requests - 1) * config.delay * config.factor + t_last
        print(f"\n{config.name}: jitter {config.jitter}. Ideal with the mean factor {config.factor}: {mean_ideal:.2f}s "
              f"(ratio {mean_ideal / actual:.3f}). The crawl waits for the slowest host: expected slowest of "
              f"{config.hosts} hosts' delay sums, one draw per gap: {own:.2f}s (ratio {own / actual:.3f}); if each "
              f"gap were the larger of its own and the previous request's draw (mean factor "
              f"{1 + 2 * config.jitter / 3:.3f}): {paired:.2f}s (ratio {paired / actual:.3f}).")


def print_summary(runs: Sequence[Run]) -> None:
    print("\nper configuration (median over rounds):")
    by_config: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_config[run.config.name].append(run)
    violated = False
    for name, group in by_config.items():
        ratio = statistics.median(r.ideal_exact / r.elapsed for r in group)
        spec = statistics.median(r.ideal_spec / r.elapsed for r in group)
        min_gap = min(r.min_gap for r in group)
        delay = group[0].config.delay
        flag = ""
        if min_gap < delay - TOLERANCE:
            violated = True
            flag = f"   !!! POLITENESS VIOLATED: a gap of {min_gap:.3f}s < d = {delay}s !!!"
        print(f"  {name:<4} ideal/actual exact {ratio:.3f}, p*d {spec:.3f}: goal {GOAL} "
              f"{'met' if ratio >= GOAL else 'MISSED'}; min gap {min_gap:.3f}s for d = {delay}s{flag}")
    if violated:
        print("\n!!! AT LEAST ONE HOST WAS ASKED FOR TWO REQUESTS LESS THAN THE DELAY APART !!!")
    sys.stdout.flush()


# --- main --------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each configuration (default 1)")
    parser.add_argument("--only", default="", help="comma-separated configuration names (default all: "
                        + ",".join(c.name for c in CONFIGS) + ")")
    parser.add_argument("--links", type=int, default=3, help="random links per page (default 3)")
    parser.add_argument("--first-address", type=int, default=10, help="first host is 127.0.0.N (default 10)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds allowed per crawl (default 120)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args(argv)
    names = [n.strip() for n in options.only.split(",") if n.strip()]
    unknown = set(names) - {c.name for c in CONFIGS}
    if unknown:
        parser.error(f"unknown configuration(s) {sorted(unknown)}")
    options.configs = [c for c in CONFIGS if not names or c.name in names]
    if options.rounds < 1 or options.links < 1:
        parser.error("--rounds and --links must be at least 1")
    if not 2 <= options.first_address <= 255 - max(c.hosts for c in options.configs):
        parser.error("--first-address leaves no room for the hosts on 127.0.0.x")
    return options


def benchmark(options: argparse.Namespace, scratch: Path) -> None:
    print_conditions(options, options.configs)
    runs: list[Run] = []
    for round_ in range(1, options.rounds + 1):
        for config in options.configs:
            print(f"round {round_}: {config.name} (H={config.hosts} x {config.pages} pages, d={config.delay}, "
                  f"jitter {config.jitter}, CONCURRENT_REQUESTS={config.concurrency})...", end=" ", flush=True)
            run = run_config(config, round_, scratch, options)
            print_run_line(run)
            runs.append(run)
    print()
    print_table(runs)
    print_details(runs)
    print_summary(runs)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_in_scratch("bench_politeness", "topicspider-politeness-", options.keep,
                          lambda scratch: benchmark(options, scratch))


if __name__ == "__main__":
    sys.exit(main())

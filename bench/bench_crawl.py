"""Crawl throughput of topicspider against a hand-written Scrapy baseline, on one local site.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_crawl.py [--pages 1000] [--links 5] [--rounds 3]
        [--concurrency 16] [--backlog 128] [--profile [--profile-out FILE]] [--keep]

It generates a linked static site with :func:`topicspider.localsite.generate_site` in a
temporary directory, serves it with :mod:`topicspider.localsite` on 127.0.0.1, and
then, for each round, crawls the whole site once with each of:

* **topicspider**: ``scrapy crawl topic`` as the tests run it (:mod:`topicspider.runner`),
  with the project's settings, so every feature is on (robots.txt, site scope, encoding
  fix, SQLite storage, crawl log, report, level scheduler...), but with no politeness
  delay and the baseline's concurrency, to a depth that reaches every page;
* **baseline**: ``scrapy runspider bench/baseline_spider.py``, a minimal breadth-first
  link follower on stock Scrapy, run outside the project (no ``scrapy.cfg``, no
  ``SCRAPY_SETTINGS_MODULE``).

The two alternate, and their order flips every round (T,B then B,T...) so that drift of
the machine does not favour one. Each crawl runs in a fresh working directory. A run's
rate is pages fetched / crawl seconds, both as measured inside the crawler process from
spider opened to spider closed (start-up and imports excluded; the "wall" column has
the whole process). The site's request log checks independently that each crawl asked
for every page; any missing page, error or failed run stops the benchmark with exit
status 1, keeping its files for inspection. Linux's listen-overflow counter is read
around each run, and a warning printed if a connection was dropped.

``--profile`` then runs topicspider once more under cProfile and prints the costliest
functions by cumulative and by own time, own time per package, and topicspider's own
functions. cProfile sees the reactor thread only (the SQLite writes run on the storage
pipeline's thread), and slows the crawl, so its pages/s is not comparable.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pstats
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from common import REPO, BenchFailure, header_lines, run_in_scratch

BASELINE_SPIDER = REPO / "bench" / "baseline_spider.py"
sys.path.insert(0, str(REPO))

from topicspider.localsite import generate_site  # noqa: E402
from topicspider.runner import crawl_command, project_env  # noqa: E402

# Project settings that make up "every feature on"; printed with the results.
TOPICSPIDER_SETTINGS_SHOWN = (
    "ROBOTSTXT_OBEY", "DEPTH_PRIORITY", "SCHEDULER", "SCHEDULER_LEVEL_SYNC",
    "SCHEDULER_MEMORY_QUEUE", "REQUEST_FINGERPRINTER_CLASS", "DUPEFILTER_CLASS",
    "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS", "DATABASE_URL",
    "STORAGE_BATCH_SIZE", "STORAGE_FLUSH_INTERVAL", "CRAWL_LOG", "STATS_FILE", "LOG_LEVEL",
)
TOP_FUNCTIONS = 25


@dataclass(frozen=True)
class Run:
    crawler: str
    pages: int  # pages fetched, as the crawler counts them
    elapsed: float  # crawl seconds, spider opened to spider closed, inside the process
    wall: float  # the whole subprocess, interpreter start-up included
    requests: int  # page requests the server saw (robots.txt excluded)
    overflows: int | None = None  # listen queue overflows during the run, machine-wide

    @property
    def rate(self) -> float:
        return self.pages / self.elapsed


def listen_overflows() -> int | None:
    """Linux's count of connections dropped because a listen queue was full, machine-wide."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split(), values.split()))
            return int(table["ListenOverflows"]) if "ListenOverflows" in table else None
    return None


class Site:
    """The generated site, served by a ``topicspider.localsite`` subprocess."""

    def __init__(self, root: Path, log_path: Path, depths: Mapping[str, int], backlog: int) -> None:
        self.root = root
        self.log_path = log_path
        self.depths = dict(depths)
        self.backlog = backlog
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self._log_offset = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "topicspider.localsite", str(self.root), "--port", "0",
             "--log", str(self.log_path), "--backlog", str(self.backlog)],
            stdout=subprocess.PIPE, text=True, cwd=REPO, env=project_env(),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            raise BenchFailure(f"localsite did not print its port (got {line!r})")
        self.url = f"http://127.0.0.1:{int(line)}/"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def new_requests(self) -> list[dict[str, Any]]:
        """Requests logged since the last call, once the log has stopped growing."""
        size, deadline = -1, time.monotonic() + 2.0
        while time.monotonic() < deadline:
            current = self.log_path.stat().st_size if self.log_path.exists() else 0
            if current == size:
                break
            size = current
            time.sleep(0.1)
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._log_offset += len(complete)
        return [json.loads(line) for line in complete.splitlines()]

    def check_requests(self, crawler: str, workdir: Path) -> int:
        """Raise unless every page was requested and answered 200; return the count."""
        pages = [r for r in self.new_requests() if r["path"] != "/robots.txt"]
        bad = [r for r in pages if r["status"] != 200]
        missing = set(self.depths) - {r["path"] for r in pages}
        if bad or missing:
            raise BenchFailure(
                f"{crawler}: the server saw {len(bad)} non-200 answers and "
                f"{len(missing)} of {len(self.depths)} pages were never requested "
                f"(e.g. {sorted(missing)[:3]}); see {workdir}"
            )
        return len(pages)


def _baseline_env() -> dict[str, str]:
    """The environment for the baseline: nothing that would find the project's settings
    (no ``SCRAPY_*`` variables, the repository off ``PYTHONPATH``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _setting_args(settings: Mapping[str, object]) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


def _run(command: Sequence[str], workdir: Path, env: Mapping[str, str], timeout: float,
         crawler: str) -> float:
    """Run a crawl in ``workdir`` with its output in files there; return wall seconds."""
    workdir.mkdir(parents=True)
    started = time.monotonic()
    with (workdir / "stdout.txt").open("w") as out, (workdir / "stderr.txt").open("w") as err:
        try:
            done = subprocess.run(command, cwd=workdir, env=env, stdout=out, stderr=err,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BenchFailure(f"{crawler} did not finish in {timeout:g}s; see {workdir}") from None
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise BenchFailure(f"{crawler} exited with status {done.returncode}:\n{_tail(workdir / 'stderr.txt')}")
    return wall


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def topicspider_command(site: Site, shared: Mapping[str, object], prefix: Sequence[str] = ()) -> list[str]:
    """The tests' ``scrapy crawl topic`` command (:mod:`topicspider.runner`) for the
    whole site; ``prefix`` goes between the interpreter and ``-m scrapy``."""
    command = crawl_command(site.url, depth=max(site.depths.values()), settings=dict(shared))
    return [command[0], *prefix, *command[1:]]


def run_topicspider(site: Site, workdir: Path, shared: Mapping[str, object], timeout: float,
                    *, prefix: Sequence[str] = ()) -> Run:
    command = topicspider_command(site, shared, prefix)
    wall = _run(command, workdir, project_env(), timeout, "topicspider")
    stats_path = workdir / "stats.json"
    if not stats_path.exists():
        raise BenchFailure(f"topicspider wrote no stats.json:\n{_tail(workdir / 'stderr.txt')}")
    report = json.loads(stats_path.read_text())["report"]
    with sqlite3.connect(workdir / "topicspider.db") as db:
        stored = db.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
    expected = len(site.depths)
    if (report["pages_fetched"] != expected or stored != expected or report["errors"]
            or report["finish_reason"] != "finished"):
        raise BenchFailure(
            f"topicspider: {report['pages_fetched']} pages fetched, {stored} stored, "
            f"{report['errors']} errors, finish reason {report['finish_reason']!r}; "
            f"expected {expected} pages; see {workdir}"
        )
    requests = site.check_requests("topicspider", workdir)
    return Run("topicspider", report["pages_fetched"], report["elapsed_seconds"], wall, requests)


def run_baseline(site: Site, workdir: Path, shared: Mapping[str, object], timeout: float) -> Run:
    if workdir.resolve().is_relative_to(REPO):
        raise BenchFailure(f"the baseline must run outside the repository, not in {workdir}")
    result_path = workdir / "result.json"
    command = [sys.executable, "-m", "scrapy", "runspider", str(BASELINE_SPIDER),
               "-a", f"url={site.url}", "-a", f"result={result_path}", *_setting_args(shared)]
    wall = _run(command, workdir, _baseline_env(), timeout, "baseline")
    if not result_path.exists():
        raise BenchFailure(f"baseline wrote no result.json:\n{_tail(workdir / 'stderr.txt')}")
    result = json.loads(result_path.read_text())
    if result["bot_name"] != "scrapybot":
        raise BenchFailure(f"baseline ran with project settings (bot {result['bot_name']!r})")
    if result["items"] < len(site.depths) or result["finish_reason"] != "finished":
        raise BenchFailure(
            f"baseline: {result['items']} items, finish reason {result['finish_reason']!r}; "
            f"expected {len(site.depths)} pages; see {workdir}"
        )
    requests = site.check_requests("baseline", workdir)
    return Run("baseline", result["pages"], result["elapsed_seconds"], wall, requests)


def _load_baseline_settings() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("baseline_spider", BASELINE_SPIDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.BaselineSpider.custom_settings)


def print_conditions(options: argparse.Namespace, site: Site, shared: Mapping[str, object]) -> None:
    import topicspider.settings as project_settings

    print("\n".join(header_lines("topicspider crawl benchmark",
                                 ("scrapy", "twisted", "lxml", "parsel", "w3lib", "tldextract"))))
    depth = max(site.depths.values())
    print(f"  site          {len(site.depths)} pages, {options.links} random links per page + a spanning "
          f"tree, seed {options.seed}, max depth {depth}; topicspider.localsite at {site.url} "
          "(threaded http.server, same machine)")
    print(f"  server        listen backlog {site.backlog} (--backlog)")
    print(f"  rounds        {options.rounds}, order alternating (T,B / B,T); fresh working directory per run")
    print("  rate          pages fetched / crawl seconds (spider opened to spider closed, measured in the "
          "crawler process; start-up excluded)")
    print("  shared        " + " ".join(f"-s {k}={v}" for k, v in shared.items()))
    print("  topicspider   " + " ".join(["python", *topicspider_command(site, shared)[1:]]))
    print("                with SCRAPY_SETTINGS_MODULE=topicspider.settings; project settings in effect:")
    for name in TOPICSPIDER_SETTINGS_SHOWN:
        print(f"                  {name} = {getattr(project_settings, name)!r}")
    print(f"  baseline      python -m scrapy runspider {BASELINE_SPIDER.relative_to(REPO)} -a url={site.url} "
          "-a result=result.json " + " ".join(_setting_args(shared)))
    print("                outside the project (no scrapy.cfg, no SCRAPY_SETTINGS_MODULE); custom_settings:")
    for name, value in _load_baseline_settings().items():
        print(f"                  {name} = {value!r}" + ("  (overridden by -s)" if name in shared else ""))
    print(flush=True)


def print_results(rounds: list[tuple[str, Run, Run]]) -> None:
    header = (f"{'round':<6} {'order':<6}| {'topicspider':^32} | {'baseline':^32} | {'ratio':>6}\n"
              f"{'':<13}| {'pages':>6} {'crawl s':>8} {'wall s':>7} {'pages/s':>8} "
              f"| {'pages':>6} {'crawl s':>8} {'wall s':>7} {'pages/s':>8} | {'T/B':>6}")
    print(header)
    print("-" * len(header.splitlines()[1]))
    ratios = []
    for index, (order, ours, base) in enumerate(rounds, 1):
        ratio = ours.rate / base.rate
        ratios.append(ratio)
        print(f"{index:<6} {order:<6}| {ours.pages:>6} {ours.elapsed:>8.2f} {ours.wall:>7.2f} {ours.rate:>8.1f} "
              f"| {base.pages:>6} {base.elapsed:>8.2f} {base.wall:>7.2f} {base.rate:>8.1f} | {ratio:>6.3f}")
    print("-" * len(header.splitlines()[1]))
    ours_median = statistics.median(r.rate for _, r, _ in rounds)
    base_median = statistics.median(r.rate for _, _, r in rounds)
    print(f"{'median':<13}| {'':>23} {ours_median:>8.1f} | {'':>23} {base_median:>8.1f} "
          f"| {statistics.median(ratios):>6.3f}")
    print(f"\nmedian pages/s: topicspider {ours_median:.1f}, baseline {base_median:.1f}; "
          f"median ratio topicspider/baseline {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    requests = {(r.crawler, r.requests) for _, *runs in rounds for r in runs}
    print("page requests seen by the server per run: "
          + ", ".join(f"{name} {count}" for name, count in sorted(requests)))
    overflows = {name: [run.overflows for _, *runs in rounds for run in runs if run.crawler == name]
                 for name in ("topicspider", "baseline")}
    print("listen queue overflows during each run (machine-wide, Linux): "
          + "; ".join(f"{name} {counts}" for name, counts in overflows.items()))
    if any(count for counts in overflows.values() for count in counts):
        print("WARNING: connections were dropped and retried a second later (raise --backlog, or "
              "another process overflowed its queue); these figures are suspect")
    sys.stdout.flush()


# --- profile -----------------------------------------------------------------------

Key = tuple[str, int, str]


def _short(key: Key) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    text = filename.replace("\\", "/")
    for marker in ("site-packages/", f"/python{sys.version_info.major}.{sys.version_info.minor}/"):
        if marker in text:
            return f"{text.split(marker, 1)[1]}:{line}({function})"
    path = Path(filename)
    if path.is_relative_to(REPO):
        text = str(path.relative_to(REPO))
    return f"{text}:{line}({function})"


def _package(key: Key) -> str:
    """Who a function belongs to: topicspider, a third-party package, the standard
    library, or, for C functions, the module named in their description ("(C)")."""
    filename, _, function = key
    if filename == "~":
        for prefix in ("<method '", "<built-in method ", "<function "):
            function = function.replace(prefix, "")
        owner = function.split(" of '", 1)[1] if " of '" in function else function
        module = owner.split(".", 1)[0].strip("'<>") if "." in owner else "builtins"
        return f"{module} (C)"
    text = filename.replace("\\", "/")
    if "site-packages/" in text:
        return text.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    path = Path(filename)
    if path.is_relative_to(REPO):
        return path.relative_to(REPO).parts[0]
    stdlib = f"/python{sys.version_info.major}.{sys.version_info.minor}/"
    module = text.split(stdlib, 1)[1] if stdlib in text else text.lstrip("<").split(">", 1)[0]
    return "stdlib " + module.split("/", 1)[0].removesuffix(".py")


def _print_functions(title: str, rows: list[tuple[Key, tuple[Any, ...]]], total: float, out: IO[str]) -> None:
    print(f"\n{title}", file=out)
    print(f"{'ncalls':>9} {'tottime':>8} {'cumtime':>8} {'cum %':>6}  function", file=out)
    for key, (_, ncalls, tottime, cumtime, _) in rows:
        print(f"{ncalls:>9} {tottime:>8.3f} {cumtime:>8.3f} {100 * cumtime / total:>5.1f}%  {_short(key)}", file=out)


def print_profile(path: Path, top: int = TOP_FUNCTIONS, out: IO[str] = sys.stdout) -> None:
    stats = pstats.Stats(str(path))
    entries: dict[Key, tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]
    print(f"\nprofile {path}: {total:.2f}s of the reactor thread in total "
          "(idle time is in the selector's poll)", file=out)
    by_cumulative = sorted(entries.items(), key=lambda item: item[1][3], reverse=True)
    by_own = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)
    # Functions run once are the start-up chain (runpy, cmdline, reactor.run...) and
    # module bodies: they would fill the list with ~100% entries that say nothing.
    repeated = [item for item in by_cumulative if item[1][1] > 1]
    _print_functions(f"top {top} by cumulative time (functions called more than once)",
                     repeated[:top], total, out)
    _print_functions(f"top {top} by own time (tottime)", by_own[:top], total, out)

    per_package: dict[str, float] = defaultdict(float)
    for key, (_, _, tottime, _, _) in entries.items():
        per_package[_package(key)] += tottime
    print("\nown time per package", file=out)
    for package, seconds in sorted(per_package.items(), key=lambda item: item[1], reverse=True)[:20]:
        print(f"  {seconds:>8.3f}s {100 * seconds / total:>5.1f}%  {package}", file=out)

    ours = [item for item in by_cumulative if _package(item[0]) == "topicspider"]
    _print_functions("topicspider's own functions by cumulative time (includes the library calls they make)",
                     ours[:top], total, out)


# --- main ----------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pages", type=int, default=1000, help="pages in the site (default 1000)")
    parser.add_argument("--links", type=int, default=5, help="random links per page (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the site (default 0)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both crawlers (default 3)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="CONCURRENT_REQUESTS and CONCURRENT_REQUESTS_PER_DOMAIN of both (default 16)")
    parser.add_argument("--backlog", type=int, default=128,
                        help="listen backlog of the site's server (default 128)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per crawl (default 300)")
    parser.add_argument("--profile", action="store_true", help="then profile one topicspider crawl")
    parser.add_argument("--profile-out", type=Path, help="keep the cProfile output in this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args(argv)
    if min(options.links, options.rounds, options.concurrency, options.backlog) < 1 or options.pages < 2:
        parser.error("--pages must be at least 2; --links, --rounds, --concurrency and --backlog at least 1")
    return options


def _counting_overflows(crawl: Callable[[Site, Path, Mapping[str, object], float], Run], site: Site,
                        workdir: Path, shared: Mapping[str, object], timeout: float) -> Run:
    """``crawl(site, workdir, shared, timeout)``, with the listen overflows it caused."""
    before = listen_overflows()
    run = crawl(site, workdir, shared, timeout)
    after = listen_overflows()
    return run if before is None or after is None else replace(run, overflows=after - before)


def benchmark(options: argparse.Namespace, scratch: Path) -> None:
    shared = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": options.concurrency,
              "CONCURRENT_REQUESTS_PER_DOMAIN": options.concurrency}
    depths = generate_site(scratch / "site", options.pages, options.links, seed=options.seed)
    site = Site(scratch / "site", scratch / "requests.log", depths, options.backlog)
    site.start()
    try:
        print_conditions(options, site, shared)
        rounds: list[tuple[str, Run, Run]] = []
        for index in range(1, options.rounds + 1):
            runs = scratch / "runs" / f"round{index}"
            topicspider_first = index % 2 == 1
            order = ("topicspider", "baseline") if topicspider_first else ("baseline", "topicspider")
            done: dict[str, Run] = {}
            for crawler in order:
                print(f"round {index}: {crawler}...", end=" ", flush=True)
                runner = run_topicspider if crawler == "topicspider" else run_baseline
                done[crawler] = _counting_overflows(runner, site, runs / crawler, shared, options.timeout)
                print(f"{done[crawler].rate:.1f} pages/s", flush=True)
            rounds.append(("T,B" if topicspider_first else "B,T", done["topicspider"], done["baseline"]))
        print()
        print_results(rounds)

        if options.profile:
            profile_path = options.profile_out or scratch / "topicspider.prof"
            profile_path = profile_path.resolve()
            prefix = ("-m", "cProfile", "-o", str(profile_path))
            print("\nprofiling topicspider:", " ".join(topicspider_command(site, shared, prefix)))
            run = run_topicspider(site, scratch / "runs" / "profile", shared, options.timeout * 3,
                                  prefix=prefix)
            print(f"profiled crawl: {run.pages} pages in {run.elapsed:.2f}s ({run.rate:.1f} pages/s under the profiler)")
            print_profile(profile_path)
    finally:
        site.stop()


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_in_scratch("bench_crawl", "topicspider-bench-", options.keep,
                          lambda scratch: benchmark(options, scratch))


if __name__ == "__main__":
    sys.exit(main())

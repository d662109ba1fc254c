"""Memory and speed of topicspider's de-duplication against Scrapy's stock one, on a
million URLs.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_dupefilter.py [--urls 1000000] [--capacities 100000,default]
        [--resolve-batch 500] [--sample-every 100000] [--seed 1] [--tracemalloc] [--tmpdir DIR]

Filters compared, each in a fresh Python process of its own (so that its RSS is its
own), one after the other, on exactly the same sequence of requests:

* **stock**: ``scrapy.dupefilters.RFPDupeFilter`` with Scrapy's default
  ``scrapy.utils.request.RequestFingerprinter`` (SHA1 of ``canonicalize_url``), built
  by ``from_crawler`` on a crawler from ``scrapy.utils.test.get_crawler`` with Scrapy's
  default settings and no JOBDIR: an in-memory set of every fingerprint.
* **topicspider**: ``topicspider.dupefilter.LRUDupeFilter`` with
  ``topicspider.fingerprint.CanonicalURLFingerprinter`` (MD5 of the canonical URL),
  once per LRU capacity (``--capacities``; ``default`` = ``DUPEFILTER_LRU_CAPACITY``
  of topicspider/settings.py), with its SQLite store (``open_seen_store(jobdir)``) in a
  fresh directory under ``--tmpdir``.

Workload: ``--urls`` distinct URLs ``http://host{i%10}.example.com/path/{i}?q={i%7}``,
offered in order; after URL i, with probability 10% a "nav" repeat (one of the first
100 URLs, as menus repeat on every page), 5% a recent repeat (one of the last 2,000)
and 5% an old repeat (uniform over all URLs so far): 1.2 offers per URL, one offer in
six a duplicate. The sequence is fixed by ``--seed``. The truth of every offer is known
(only the first offer of a URL is new), and each filter's verdicts are compared with
it and with each other: any mismatch makes the benchmark exit with status 1.

What a crawl would do, per offer, is timed (``time.perf_counter``); building the
``Request`` objects is not (it is the same for both, and done by the spider):

* stock: ``fingerprinter.fingerprint(request)``, then ``df.request_seen(request)`` (whose
  own fingerprint call is then a hit in the fingerprinter's cache) and ``df.log`` for
  duplicates, as ``scrapy.core.scheduler.Scheduler.enqueue_request`` does;
* topicspider: ``FrontierScheduler.enqueue_request``'s path, replayed here with the
  filter's own methods: ``df.fingerprint``, ``redirect_within_identity``, ``verdict``,
  ``remember`` (which triggers the real ``flush()`` every ``DUPEFILTER_FLUSH_SIZE`` new
  fingerprints: one ``store.add_many`` transaction), ``log``; UNKNOWN verdicts wait in a
  batch, as in the scheduler's ``unresolved``, resolved ``--resolve-batch`` at a time
  by the real ``check()`` (``store.contains_many``) then ``verdict``/``remember``, as in
  ``FrontierScheduler._resolve``; and at the end the last batch and the last flush.
  The filter's ``_in_thread`` is replaced by a direct call, so the store's reads and
  writes run synchronously on the timed thread: in a crawl they run on the filter's
  thread pool, off the reactor (SQLite releases the GIL while it works), so the
  topicspider figure is its whole CPU cost, more than what the reactor thread pays.
  ``open()`` is bypassed: the store is opened directly (not timed).

Time is reported split into fingerprinting, in-memory filtering, store writes and
store look-ups. Look-ups per second = offers / timed seconds. Last, the per-URL cost
of the links' normaliser and filters (session ids, trap filters, a five-line
``URL_FILTER_FILE``), which every link of a page goes through before it is
fingerprinted, beside the cost of the canonical form itself.

Memory, sampled every ``--sample-every`` distinct URLs, is reported in two ways:

* **RSS**: the process's resident set (``/proc/self/statm``) minus its value just
  before the first URL (after imports, set-up, generating the sequence, and building
  and dropping one batch of requests). It includes everything: the filter, allocator
  slack, SQLite's page cache (which tracemalloc cannot see), transient requests.
* **structures**: ``sys.getsizeof`` of the filter's containers and of every
  fingerprint in them (stock: the set; topicspider: the LRU, the unflushed set and
  batches in flight), i.e. what the filter itself keeps in Python objects.

``--tracemalloc`` also records ``tracemalloc``'s traced memory (Python allocations
only) in the curve; it slows everything several times, so the times of such a run
mean nothing. The SQLite file is disk, not memory, and is reported separately.
"""

from __future__ import annotations

import argparse
import array
import gc
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, header_lines

sys.path.insert(0, str(REPO))

HOSTS = 10
NAV_URLS = 100
RECENT_WINDOW = 2000
P_NAV, P_RECENT, P_OLD = 0.10, 0.05, 0.05
# Distinct URLs whose offers are built into requests and timed at once.
CHUNK = 1000
MB = 1024 * 1024


def url_of(i: int) -> str:
    return f"http://host{i % HOSTS}.example.com/path/{i}?q={i % 7}"


def offer_sequence(urls: int, seed: int) -> tuple[array.array, array.array]:
    """The URL index of every offer, and where the offers of each distinct URL start."""
    rng = random.Random(seed)
    offers = array.array("l")
    starts = array.array("l")
    for i in range(urls):
        starts.append(len(offers))
        offers.append(i)
        r = rng.random()
        if r < P_NAV:
            offers.append(rng.randrange(min(i + 1, NAV_URLS)))
        elif r < P_NAV + P_RECENT:
            offers.append(i - rng.randrange(min(i + 1, RECENT_WINDOW)))
        elif r < P_NAV + P_RECENT + P_OLD:
            offers.append(rng.randrange(i + 1))
    starts.append(len(offers))
    return offers, starts


def truth(offers: array.array) -> bytearray:
    """1 for an offer of a URL offered before (a duplicate), else 0."""
    seen: set[int] = set()
    verdicts = bytearray(len(offers))
    for k, i in enumerate(offers):
        if i in seen:
            verdicts[k] = 1
        else:
            seen.add(i)
    return verdicts


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def deep_size(container: Any) -> int:
    return sys.getsizeof(container) + sum(sys.getsizeof(item) for item in container)


# --- worker: one filter, in a process of its own ------------------------------------


class Timer:
    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, function: Any) -> Any:
        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        return timed


def run_now(coroutine: Any) -> Any:
    """Run a coroutine that never suspends (its thread hops made direct calls)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("coroutine suspended: the store call was not made synchronous")


def worker(options: argparse.Namespace) -> None:
    from scrapy import Request
    from scrapy.dupefilters import RFPDupeFilter
    from scrapy.utils.test import get_crawler
    from twisted.internet import reactor  # noqa: F401  installed so that deferred_from_coro works

    from topicspider.dupefilter import LRUDupeFilter, Verdict
    from topicspider.storage.seen import open_seen_store

    if options.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    offers, starts = offer_sequence(options.urls, options.seed)
    verdicts = bytearray(len(offers))
    kind = options.worker
    write_timer, lookup_timer = Timer(), Timer()
    jobdir = None
    if kind == "stock":
        crawler = get_crawler()
        df: Any = RFPDupeFilter.from_crawler(crawler)
        fingerprinter = crawler.request_fingerprinter
        described = (f"{type(df).__module__}.{type(df).__qualname__} + "
                     f"{type(fingerprinter).__module__}.{type(fingerprinter).__qualname__}")
    else:
        import topicspider.settings as project_settings

        crawler = get_crawler(settings_dict={
            "REQUEST_FINGERPRINTER_CLASS": project_settings.REQUEST_FINGERPRINTER_CLASS,
            "URL_STRIP_TRAILING_SLASH": project_settings.URL_STRIP_TRAILING_SLASH,
            "DUPEFILTER_LRU_CAPACITY": options.capacity,
            "DUPEFILTER_FLUSH_SIZE": project_settings.DUPEFILTER_FLUSH_SIZE,
        })
        df = LRUDupeFilter.from_crawler(crawler)
        fingerprinter = crawler.request_fingerprinter
        described = (f"{type(df).__module__}.{type(df).__qualname__} + "
                     f"{type(fingerprinter).__module__}.{type(fingerprinter).__qualname__}")
        jobdir = tempfile.mkdtemp(prefix="bench-dupefilter-", dir=options.tmpdir)
        df.store = open_seen_store(jobdir)
        df.store_may_know = df.store.count() > 0
        df.store.add_many = write_timer.wrap(df.store.add_many)
        df.store.contains_many = lookup_timer.wrap(df.store.contains_many)

        async def direct(function: Any, *args: Any) -> Any:
            return function(*args)

        df._in_thread = direct  # the store calls run here, synchronously, and are timed
    stats = crawler.stats
    assert stats is not None
    spider = crawler.spidercls.from_crawler(crawler)  # df.log counts duplicates in its crawler's stats

    def structures() -> int:
        if kind == "stock":
            return deep_size(df._fingerprints)
        return deep_size(df.lru.entries) + deep_size(df.unflushed) + sum(deep_size(batch) for batch in df.in_flight)

    # One batch of requests built and dropped before the baseline, so that the
    # allocator's working set for a batch is not counted as the filter's memory.
    warm = [Request(url_of(i)) for i in range(CHUNK)]
    del warm
    gc.collect()
    rss0 = rss_bytes()
    traced0 = tracemalloc.get_traced_memory()[0] if options.tracemalloc else 0

    unresolved: dict[bytes, tuple[int, Any]] = {}  # fingerprint -> (offer, request), as FrontierScheduler's

    def resolve() -> None:
        """FrontierScheduler._resolve, with the store answering synchronously."""
        nonlocal unresolved
        batch, unresolved = unresolved, {}
        known = run_now(df.check(list(batch)))
        for fingerprint, (k, request) in batch.items():
            if fingerprint in known or df.verdict(fingerprint) is Verdict.SEEN:
                verdicts[k] = 1
                df.log(request, spider)
            else:
                df.remember(fingerprint)

    t_fingerprint = t_filter = 0.0
    curve: list[dict[str, Any]] = []
    last_time, last_offers = 0.0, 0
    for first in range(0, options.urls, CHUNK):
        lo, hi = starts[first], starts[min(first + CHUNK, options.urls)]
        requests = [Request(url_of(offers[k])) for k in range(lo, hi)]
        if kind == "stock":
            start = time.perf_counter()
            for request in requests:
                fingerprinter.fingerprint(request)
            middle = time.perf_counter()
            for k, request in enumerate(requests, lo):
                if df.request_seen(request):
                    verdicts[k] = 1
                    df.log(request, spider)
            end = time.perf_counter()
        else:
            start = time.perf_counter()
            fingerprints = [df.fingerprint(request) for request in requests]
            middle = time.perf_counter()
            for k, request, fingerprint in zip(range(lo, hi), requests, fingerprints):
                if df.redirect_within_identity(request):
                    continue
                verdict = df.verdict(fingerprint)
                if verdict is Verdict.SEEN or fingerprint in unresolved:
                    verdicts[k] = 1
                    df.log(request, spider)
                elif verdict is Verdict.UNKNOWN:
                    unresolved[fingerprint] = (k, request)
                    if len(unresolved) >= options.resolve_batch:
                        resolve()
                else:
                    df.remember(fingerprint)
            if first + CHUNK >= options.urls:  # the end of the crawl: the last batch, the last flush
                while unresolved:
                    resolve()
                run_now(df.flush())
            end = time.perf_counter()
            del fingerprints
        t_fingerprint += middle - start
        t_filter += end - middle
        del requests
        done = min(first + CHUNK, options.urls)
        if done % options.sample_every == 0 or done == options.urls:
            gc.collect()
            elapsed = t_fingerprint + t_filter
            point = {
                "urls": done, "offers": hi, "rss": rss_bytes() - rss0, "structures": structures(),
                "rate": (hi - last_offers) / (elapsed - last_time) if elapsed > last_time else 0.0,
            }
            if options.tracemalloc:
                point["traced"] = tracemalloc.get_traced_memory()[0] - traced0
            curve.append(point)
            last_time, last_offers = elapsed, hi

    result: dict[str, Any] = {
        "kind": kind, "described": described, "urls": options.urls, "offers": len(offers),
        "fingerprint_seconds": t_fingerprint, "filter_seconds": t_filter,
        "store_write_seconds": write_timer.seconds, "store_write_calls": write_timer.calls,
        "store_lookup_seconds": lookup_timer.seconds, "store_lookup_calls": lookup_timer.calls,
        "curve": curve, "peak_rss": peak_rss_bytes(), "rss0": rss0,
        "stats": {key: value for key, value in stats.get_stats().items() if key.startswith("dupefilter/")},
    }
    if kind != "stock":
        store = df.store
        assert not df.in_flight and not df.unflushed and not unresolved
        stored = store.count()
        remembered = len(offers) - sum(verdicts)
        if stored != remembered:
            raise SystemExit(f"store holds {stored} fingerprints, the filter remembered {remembered}")
        db = Path(store.path)
        wal = Path(f"{db}-wal")
        result.update({
            "capacity": df.capacity, "flush_size": df.flush_size, "lru_size": len(df.lru),
            "stored": stored, "db_bytes_open": db.stat().st_size,
            "wal_bytes_open": wal.stat().st_size if wal.exists() else 0,
        })
        store.close()  # checkpoints the WAL into the database file
        result["db_bytes_closed"] = db.stat().st_size
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        os.rmdir(jobdir)
    Path(options.verdicts_out).write_bytes(verdicts)
    Path(options.result_out).write_text(json.dumps(result))


# --- driver ---------------------------------------------------------------------------


def print_conditions(options: argparse.Namespace, capacities: list[int], offers: int, duplicates: int) -> None:
    import topicspider.settings as project_settings
    from topicspider.storage.seen import STORE_FILE

    print("\n".join(header_lines("topicspider dupefilter benchmark", ("scrapy", "twisted", "w3lib", "tldextract"),
                                 f", SQLite {sqlite3.sqlite_version}")))
    print(f"  workload      {options.urls:,} distinct URLs http://host{{i%{HOSTS}}}.example.com/path/{{i}}?q={{i%7}}"
          f" + repeats (after each URL: {P_NAV:.0%} one of the first {NAV_URLS}, {P_RECENT:.0%} one of the "
          f"last {RECENT_WINDOW:,}, {P_OLD:.0%} uniform over all so far), seed {options.seed}")
    print(f"                = {offers:,} offers, {duplicates:,} duplicates ({duplicates / offers:.1%}); "
          "same sequence for every filter, each in its own process, run one after the other")
    print("  timed         per offer: fingerprint + filter (+ for topicspider: remember, batched SQLite writes "
          "every DUPEFILTER_FLUSH_SIZE, UNKNOWN verdicts resolved")
    print(f"                {options.resolve_batch} at a time by store.contains_many, all synchronous on one "
          "thread); not timed: building the Request objects")
    print("  memory        RSS = /proc/self/statm resident minus its value before the first URL (whole "
          "process: filter, allocator slack, SQLite cache);")
    print("                structures = sys.getsizeof of the filter's containers + their fingerprints"
          + ("; traced = tracemalloc current minus baseline (times NOT comparable)" if options.tracemalloc else
             "; tracemalloc off"))
    print(f"  topicspider   capacities {', '.join(f'{c:,}' for c in capacities)} (DUPEFILTER_LRU_CAPACITY "
          f"default {project_settings.DUPEFILTER_LRU_CAPACITY:,}), DUPEFILTER_FLUSH_SIZE "
          f"{project_settings.DUPEFILTER_FLUSH_SIZE:,}, URL_STRIP_TRAILING_SLASH "
          f"{project_settings.URL_STRIP_TRAILING_SLASH}; store {options.tmpdir}/bench-dupefilter-*/{STORE_FILE}")
    print("  stock         scrapy.dupefilters.RFPDupeFilter + scrapy.utils.request.RequestFingerprinter, "
          "no JOBDIR")
    print(flush=True)


def run_worker(options: argparse.Namespace, kind: str, capacity: int, workdir: Path) -> tuple[dict, bytes]:
    name = kind if kind == "stock" else f"{kind}-{capacity}"
    verdicts_out, result_out = workdir / f"{name}.verdicts", workdir / f"{name}.json"
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--capacity", str(capacity),
        "--urls", str(options.urls), "--seed", str(options.seed), "--resolve-batch", str(options.resolve_batch),
        "--sample-every", str(options.sample_every), "--tmpdir", options.tmpdir,
        "--verdicts-out", str(verdicts_out), "--result-out", str(result_out),
    ] + (["--tracemalloc"] if options.tracemalloc else [])
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: worker failed with status {done.returncode}")
    result = json.loads(result_out.read_text())
    result["name"] = name
    result["wall"] = time.perf_counter() - start
    print(f"  ran {name:<22} {result['wall']:7.1f} s wall (process, including set-up)", flush=True)
    return result, verdicts_out.read_bytes()


def per_url(value: float, urls: int) -> str:
    return f"{value / urls:7.1f}"


def print_results(results: list[dict], mismatches: dict[str, tuple[int, int]], tracemalloc_on: bool) -> None:
    print()
    print("Results")
    header = (f"  {'filter':<22} {'timed s':>8} {'offers/s':>9} {'fp s':>7} {'filter s':>8} {'writes s':>8} "
              f"{'lookups s':>9} {'RSS MB':>7} {'RSS B/URL':>9} {'struct MB':>9} {'struct B/URL':>12} "
              f"{'peak RSS MB':>11} {'vs truth':>8} {'vs stock':>8}")
    print(header)
    stock_rate = None
    for result in results:
        timed = result["fingerprint_seconds"] + result["filter_seconds"]
        rate = result["offers"] / timed
        if result["kind"] == "stock":
            stock_rate = rate
        end = result["curve"][-1]
        in_memory = result["filter_seconds"] - result["store_write_seconds"] - result["store_lookup_seconds"]
        truth_mismatch, stock_mismatch = mismatches[result["name"]]
        print(f"  {result['name']:<22} {timed:8.1f} {rate:9,.0f} {result['fingerprint_seconds']:7.1f} "
              f"{in_memory:8.1f} {result['store_write_seconds']:8.1f} {result['store_lookup_seconds']:9.1f} "
              f"{end['rss'] / MB:7.1f} {per_url(end['rss'], result['urls']):>9} {end['structures'] / MB:9.1f} "
              f"{per_url(end['structures'], result['urls']):>12} {result['peak_rss'] / MB:11.1f} "
              f"{truth_mismatch:8d} {stock_mismatch:8d}")
    print("  (timed s = fp s + filter s + writes s + lookups s; filter s = in-memory filtering only; "
          "B/URL = bytes per distinct URL; vs = verdict mismatches)")
    if stock_rate:
        for result in results:
            if result["kind"] != "stock":
                timed = result["fingerprint_seconds"] + result["filter_seconds"]
                print(f"  {result['name']}: {result['offers'] / timed / stock_rate:.2f}x the stock filter's "
                      "offers/s")

    print()
    print("Memory curve (after each sample of distinct URLs; RSS and structures in MB; rate = offers/s in "
          "the interval)")
    names = [result["name"] for result in results]
    columns = ["RSS", "struct"] + (["traced"] if tracemalloc_on else []) + ["rate"]
    print("  " + f"{'URLs':>10} " + " ".join(
        f"{name + ' ' + column:>{max(len(name) + len(column) + 1, 10)}}" for name in names for column in columns))
    for row in range(len(results[0]["curve"])):
        cells = []
        for result in results:
            point = result["curve"][row]
            values = {"RSS": f"{point['rss'] / MB:.1f}", "struct": f"{point['structures'] / MB:.1f}",
                      "traced": f"{point.get('traced', 0) / MB:.1f}", "rate": f"{point['rate']:,.0f}"}
            for column in columns:
                cells.append(f"{values[column]:>{max(len(result['name']) + len(column) + 1, 10)}}")
        print("  " + f"{results[0]['curve'][row]['urls']:>10,} " + " ".join(cells))

    print()
    print("topicspider store (stats from the filter; disk, not memory)")
    for result in results:
        if result["kind"] == "stock":
            continue
        stats = result["stats"]
        print(f"  {result['name']}: LRU {result['lru_size']:,}/{result['capacity']:,}; "
              f"lru_hits {stats.get('dupefilter/lru_hits', 0):,}, lru_evictions "
              f"{stats.get('dupefilter/lru_evictions', 0):,}, filtered {stats.get('dupefilter/filtered', 0):,}")
        print(f"      store_lookups {stats.get('dupefilter/store_lookups', 0):,} in "
              f"{result['store_lookup_calls']:,} batches ({result['store_lookup_seconds']:.1f} s), store_hits "
              f"{stats.get('dupefilter/store_hits', 0):,}, store_writes {stats.get('dupefilter/store_writes', 0):,} "
              f"in {result['store_write_calls']:,} transactions ({result['store_write_seconds']:.1f} s); "
              f"{result['stored']:,} rows")
        print(f"      SQLite file: {result['db_bytes_open'] / MB:.1f} MB + WAL {result['wal_bytes_open'] / MB:.1f} MB "
              f"while open, {result['db_bytes_closed'] / MB:.1f} MB after close "
              f"({result['db_bytes_closed'] / result['stored']:.1f} B per URL)")


CHAIN_URLS = 100_000
# A user's rules as a regex-urlfilter.txt would hold them (Nutch's default file's shape).
CHAIN_FILTER = "-^(file|ftp|mailto):\n-\\.(gif|jpg|png|ico|css|zip|gz|exe)$\n-[?*!@=]{4,}\n-.*(/[^/]+)/[^/]+\\1/[^/]+\\1/\n+.\n"


def print_chain_cost(urls: int) -> None:
    """What the links' normaliser and filters cost per URL (analysis.py applies them to
    every link of a page, in the page-analysis process), beside the fingerprint's
    canonical form, on the workload's first ``urls`` URLs with a session id added to
    every third."""
    from topicspider.urls import URLRules, canonical_url, parse_url_filter, strip_session_ids, trap_reason

    rules = URLRules(url_filter=parse_url_filter(CHAIN_FILTER))
    assert rules.url_filter is not None
    links = [url_of(i) + ("&PHPSESSID=abc123" if i % 3 == 0 else "") for i in range(urls)]
    steps = {
        "session ids": lambda url: strip_session_ids(url, rules.session_parameters),
        "trap filters": lambda url: trap_reason(url, rules),
        "user rules (5 lines)": rules.url_filter.accepts,
        "canonical form (for scale)": lambda url: canonical_url.__wrapped__(url, True),
    }
    print(f"\nThe links' normaliser and filters, per URL ({urls:,} URLs, a session id in every third):")
    for name, step in steps.items():
        started = time.perf_counter()
        for url in links:
            step(url)
        print(f"  {name:<28} {(time.perf_counter() - started) / urls * 1e6:6.2f} us")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000, help="distinct URLs (default 1000000)")
    parser.add_argument("--capacities", default="100000,default",
                        help="topicspider LRU capacities, comma-separated; 'default' = DUPEFILTER_LRU_CAPACITY")
    parser.add_argument("--resolve-batch", type=int, default=500,
                        help="UNKNOWN verdicts resolved per store look-up (default 500)")
    parser.add_argument("--sample-every", type=int, default=100_000, help="distinct URLs between memory samples")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also trace Python allocations (slow: times then mean nothing)")
    parser.add_argument("--tmpdir", default=tempfile.gettempdir(), help="where the SQLite stores go")
    parser.add_argument("--worker", choices=("stock", "topicspider"), help=argparse.SUPPRESS)
    parser.add_argument("--capacity", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--verdicts-out", help=argparse.SUPPRESS)
    parser.add_argument("--result-out", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.urls < 1 or options.resolve_batch < 1 or options.sample_every < 1:
        parser.error("--urls, --resolve-batch and --sample-every must be positive")
    if options.sample_every % CHUNK:
        parser.error(f"--sample-every must be a multiple of {CHUNK}")
    if options.worker:
        worker(options)
        return 0

    import topicspider.settings as project_settings

    capacities = [project_settings.DUPEFILTER_LRU_CAPACITY if c.strip() == "default" else int(c)
                  for c in options.capacities.split(",") if c.strip()]
    offers, _ = offer_sequence(options.urls, options.seed)
    expected = truth(offers)
    print_conditions(options, capacities, len(offers), sum(expected))
    results: list[dict] = []
    verdicts: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="bench-dupefilter-", dir=options.tmpdir) as workdir:
        for kind, capacity in [("stock", 0)] + [("topicspider", c) for c in capacities]:
            result, got = run_worker(options, kind, capacity, Path(workdir))
            results.append(result)
            verdicts[result["name"]] = got
    mismatches = {}
    for name, got in verdicts.items():
        against_truth = sum(a != b for a, b in zip(got, expected)) + abs(len(got) - len(expected))
        against_stock = sum(a != b for a, b in zip(got, verdicts["stock"])) + abs(len(got) - len(verdicts["stock"]))
        mismatches[name] = (against_truth, against_stock)
    print_results(results, mismatches, options.tracemalloc)
    print_chain_cost(min(options.urls, CHAIN_URLS))
    bad = {name: counts for name, counts in mismatches.items() if any(counts)}
    print()
    if bad:
        print(f"FAILED: verdict mismatches {bad}")
        return 1
    print(f"Verdicts: all {len(expected):,} offers agree between every filter and the truth (0 mismatches).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A crawl's live view from its workers' status rows (:mod:`topicspider.storage.crawls`):
counts summed, histograms merged, queues added up; pure, for the console's JSON API."""

from __future__ import annotations

from collections import Counter
from typing import Any

from topicspider.storage.crawls import WorkerStatus

# A running worker whose status is older than this many of its intervals (and 10 s) has
# probably died.
STALE_INTERVALS = 3
STALE_MIN_SECONDS = 10.0
SUMMED = ("pages_fetched", "pages_stored", "emails_stored", "pages_relevant", "pages_irrelevant", "errors",
          "robots_denied", "pages_spilled", "pages_lost", "links_insite", "links_offsite", "backoffs")
ROWS = 30


def combine(workers: list[WorkerStatus], now: float) -> dict[str, Any]:
    """The view of one crawl: ``state`` (``running`` while any worker runs and is
    fresh, ``stale`` when the running ones stopped reporting, else ``finished``), the
    summed ``counts``, ``rate`` (pages/s now), ``histogram`` ([score from, pages]),
    ``queue``/``downloading`` ([name, count], largest first), ``errors`` (latest
    failures), ``series`` (each worker's [seconds since start, pages fetched]) and
    ``workers``."""
    counts: Counter[str] = Counter()
    histogram: Counter[str] = Counter()
    queue: Counter[str] = Counter()
    downloading: Counter[str] = Counter()
    errors: list[tuple[str, str]] = []
    series: list[dict[str, Any]] = []
    rate = 0.0
    states = []
    for worker in workers:
        status = worker.status
        report = status.get("report", {})
        interval = float(status.get("interval", 0) or 0)
        fresh = now - worker.updated <= max(STALE_INTERVALS * interval, STALE_MIN_SECONDS)
        states.append(worker.state if worker.state != "running" or fresh else "stale")
        for key in SUMMED:
            counts[key] += int(report.get(key, 0) or 0)
        histogram.update({bucket: int(n) for bucket, n in report.get("relevance_histogram", {}).items()})
        queue.update({str(name): int(n) for name, n in status.get("queue", [])})
        downloading.update({str(name): int(n) for name, n in status.get("downloading", [])})
        errors += [(str(url), str(reason)) for url, reason in status.get("recent_errors", [])]
        if worker.state == "running" and fresh:
            rate += float(status.get("rate", 0.0))
        series.append({"worker": worker.worker,
                       "points": [[float(t), int(fetched)] for t, fetched, *_ in status.get("history", [])]})
    scored = counts["pages_relevant"] + counts["pages_irrelevant"]
    return {
        "state": _state(states),
        "counts": dict(counts),
        "harvest_rate": round(counts["pages_relevant"] / scored, 4) if scored else None,
        "rate": round(rate, 2),
        "histogram": sorted(([bucket, n] for bucket, n in histogram.items()), key=lambda pair: float(pair[0])),
        "queue": queue.most_common(ROWS),
        "queued": sum(queue.values()),
        "downloading": downloading.most_common(ROWS),
        "errors": errors[-ROWS:],
        "series": series,
        "workers": [{"worker": w.worker, "state": s, "updated": w.updated,
                     "finish_reason": w.status.get("report", {}).get("finish_reason", "")}
                    for w, s in zip(workers, states)],
        "updated": max((w.updated for w in workers), default=None),
    }


def _state(states: list[str]) -> str:
    if not states:
        return "waiting"
    if "running" in states:
        return "running"
    if "stale" in states:
        return "stale"
    return "finished"

"""Runs ``scrapy`` with this project's settings from any working directory.

Used by the demo, the tests and the benchmarks, which crawl in scratch directories.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def project_env(settings_module: str = "topicspider.settings", *paths: str) -> dict[str, str]:
    """The environment for a ``scrapy`` subprocess that finds this project (and
    ``paths``, where ``settings_module`` may live)."""
    path = os.pathsep.join(filter(None, [*paths, str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "SCRAPY_SETTINGS_MODULE": settings_module, "PYTHONPATH": path}


def scrapy_command(*arguments: str) -> list[str]:
    """``python -m scrapy ARGUMENTS`` with this interpreter."""
    return [sys.executable, "-m", "scrapy", *arguments]


def crawl_command(
    seeds: str, depth: int | str | None = None, settings: dict[str, object] | None = None, **arguments: str
) -> list[str]:
    """``python -m scrapy crawl topic`` with ``-a`` (``seeds``, ``depth`` and any other
    spider ``arguments``) and ``-s`` options."""
    command = scrapy_command("crawl", "topic", "-a", f"seeds={seeds}")
    if depth is not None:
        command += ["-a", f"depth={depth}"]
    for name, value in arguments.items():
        command += ["-a", f"{name}={value}"]
    for name, value in (settings or {}).items():
        command += ["-s", f"{name}={value}"]
    return command


def push_seeds_command(seeds: str, settings: Mapping[str, object]) -> list[str]:
    """``python -m scrapy push-seeds SEEDS`` with the Redis and queue-key settings
    (``REDIS_*``, ``SCHEDULER_*``) of a worker's ``settings``."""
    command = scrapy_command("push-seeds", seeds)
    for name, value in settings.items():
        if name.startswith(("REDIS_", "SCHEDULER_")):
            command += ["-s", f"{name}={value}"]
    return command


def opened(log: Path) -> bool:
    """Whether the crawl logging to ``log`` (its stderr) has opened its spider."""
    return log.exists() and "Spider opened" in log.read_text()

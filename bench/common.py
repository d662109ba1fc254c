"""What the benchmark scripts of bench/ share: the repository's path, the failure that
stops a benchmark, the header of machine and conditions they print first, and the
scratch directory that ``main()`` runs a benchmark in.

The scripts are run as ``python bench/bench_x.py``, so this directory is on
``sys.path`` and they import this module as ``common``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class BenchFailure(RuntimeError):
    """A crawl failed or missed pages: the figures would mean nothing."""


def git_state() -> str:
    """``git describe --always --dirty`` of the repository, with the uncommitted changes
    under topicspider/ (at most six named)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else ""

    described = git("describe", "--always", "--dirty").strip() or "unknown"
    changed = [line[3:] for line in git("status", "--porcelain", "--", "topicspider").splitlines()]
    if changed:
        shown = ", ".join(changed[:6]) + (" ..." if len(changed) > 6 else "")
        described += f" ({len(changed)} uncommitted change(s) under topicspider/: {shown})"
    return described


def header_lines(title: str, packages: Sequence[str], extra_versions: str = "") -> list[str]:
    """The title line, then date, host (nproc, load average), python, the versions of
    ``packages`` (followed by ``extra_versions`` as given) and the repository's state."""
    try:
        cpus = f"{os.cpu_count()} (usable: {len(os.sched_getaffinity(0))})"
    except AttributeError:
        cpus = str(os.cpu_count())
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return [
        title,
        f"  date          {datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"  host          {platform.platform()}; nproc {cpus}; load average {load}",
        f"  python        {platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "  versions      " + ", ".join(f"{name} {version(name)}" for name in packages) + extra_versions,
        f"  repository    {git_state()}",
    ]


def run_in_scratch(name: str, prefix: str, keep: bool, benchmark: Callable[[Path], None]) -> int:
    """Run ``benchmark`` in a new temporary directory named ``prefix...``; return the exit
    status. On :class:`BenchFailure` say so as ``name`` and keep the directory (status 1);
    otherwise remove it unless ``keep``."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        benchmark(scratch)
    except BenchFailure as exc:
        print(f"\n{name}: FAILED: {exc}\n(files kept in {scratch})", file=sys.stderr)
        return 1
    if keep:
        print(f"\nfiles kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def write_svg(path: Path, width: int, height: int, body: str) -> None:
    """An SVG picture of ``body``'s elements on a white page, for the docs."""
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                    f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>{body}</svg>\n',
                    "utf-8")

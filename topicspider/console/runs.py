"""Crawls started from the console: as local processes it supervises, or as scrapyd
jobs (``schedule.json``) when ``SCRAPYD_URL`` is set.

Each crawl gets an id (``CRAWL_ID``) and a directory under ``CONSOLE_RUNS_DIR`` holding
``run.json`` (what was asked, the process or job), its seed and training URL files, and, for a
local process, its ``JOBDIR`` (``job/``), Scrapy's log (``crawl.log``), the crawl report
(``output.log``), the fetch log and the stats file. A local crawl runs in a session of
its own, so it outlives the console; a console started again finds it by its pid.
Stopping one sends SIGINT, Scrapy's clean stop: the ``JOBDIR`` stays resumable, and
"resume" runs the same command again. A second stop sends SIGINT again (Scrapy's
forced stop).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from time import monotonic
from typing import Any
from urllib.error import URLError
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit
from urllib.request import Request, urlopen

from topicspider.cluster import PASSWORD_ENV
from topicspider.config import ConfigError
from topicspider.console.forms import CrawlRequest
from topicspider.runner import crawl_command, project_env
from topicspider.storage.crawls import is_crawl_id
from topicspider.storage.sqlite import sqlite_path
from topicspider.urls import holds_url_password, mask_url

logger = logging.getLogger(__name__)

TOKEN_ENV = "TOPICSPIDER_CONSOLE_TOKEN"
SCRAPYD_TIMEOUT = 10.0  # seconds for each scrapyd API call
JOBS_TTL = 1.0  # seconds scrapyd's job list is reused
LOG_TAIL_BYTES = 512 * 1024  # the end of a log the console shows


class RunError(RuntimeError):
    """A crawl could not be started, stopped or read; the message is for the page."""


@dataclass
class Run:
    crawl: str
    mode: str  # "local" or "scrapyd"
    created: float
    seeds: list[str]
    depth: int
    keywords: list[str] = field(default_factory=list)
    training: list[str] = field(default_factory=list)
    pid: int | None = None
    job: str | None = None  # the scrapyd job id
    exit_code: int | None = None
    stops: int = 0  # stop requests sent
    resumed: int = 0


def holds_password(value: object) -> bool:
    """Whether a setting's value holds a password: a URL's (``REDIS_URL``), or a key of a
    dictionary setting, given as JSON on the command line (``REDIS_PARAMS``)."""
    if isinstance(value, str):
        if holds_url_password(value):
            return True
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and any("password" in str(key).lower() for key in value)


def child_redis_url(redis_url: str) -> tuple[str, dict[str, str]]:
    """``REDIS_URL`` for a crawl the console starts: a password moved to ``REDIS_PASSWORD``
    (kept off command lines), as :func:`child_database` does for MySQL."""
    try:
        parts = urlsplit(redis_url)
        password = parts.password
    except ValueError:
        return redis_url, {}
    query = parse_qsl(parts.query, keep_blank_values=True)
    in_query = [value for name, value in query if name.lower() == "password"]
    if password is None and not in_query:
        return redis_url, {}
    user = f"{parts.username}@" if parts.username else ""
    bare = urlunsplit(parts._replace(netloc=f"{user}{parts.netloc.rsplit('@', 1)[-1]}",
                                     query=urlencode([(name, value) for name, value in query if name.lower() != "password"])))
    return bare, {PASSWORD_ENV: unquote(password) if password is not None else in_query[-1]}


def topic_arguments(run: Run, training: str) -> dict[str, str]:
    """The spider's ``topic`` or ``train`` argument for ``run``, ``training`` naming its
    training URLs. Keywords go as they are: a topic file's lines would be "term weight"."""
    if run.keywords:
        return {"topic": ",".join(run.keywords)}
    return {"train": training} if run.training else {}


def new_crawl_id() -> str:
    return f"console-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


def child_database(database_url: str) -> tuple[str, dict[str, str]]:
    """``DATABASE_URL`` as a crawl started elsewhere must see it: an SQLite path made
    absolute, a MySQL password moved to ``MYSQL_PASSWORD`` (kept off command lines)."""
    parts = urlsplit(database_url)
    if parts.scheme.lower().startswith("sqlite"):
        return f"sqlite:///{Path(sqlite_path(database_url)).resolve()}", {}
    if parts.password is None:
        return database_url, {}
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    bare = urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))
    return bare, {"MYSQL_PASSWORD": unquote(parts.password)}


class Scrapyd:
    """The few calls of scrapyd's JSON API the console makes."""

    def __init__(self, url: str, project: str) -> None:
        self.url = url.rstrip("/")
        self.project = project
        self.lock = threading.Lock()
        self.jobs: dict[str, Any] = {}
        self.jobs_at = -JOBS_TTL

    def _call(self, endpoint: str, form: dict[str, Any] | None = None) -> Any:
        data = urlencode(form, doseq=True).encode() if form is not None else None
        try:
            with urlopen(Request(f"{self.url}/{endpoint}", data=data), timeout=SCRAPYD_TIMEOUT) as answer:
                body = answer.read()
        except (URLError, OSError) as exc:
            raise RunError(f"scrapyd at {mask_url(self.url)} did not answer: {exc}") from None
        if endpoint.split("?", 1)[0].endswith(".json"):
            document = json.loads(body)
            if document.get("status") != "ok":
                raise RunError(f"scrapyd refused {endpoint}: {document.get('message', document)}")
            return document
        return body.decode("utf-8", "replace")

    def schedule(self, job: str, arguments: dict[str, str], settings: dict[str, str]) -> str:
        form: dict[str, Any] = {"project": self.project, "spider": "topic", "jobid": job, **arguments,
                                "setting": [f"{name}={value}" for name, value in settings.items()]}
        return str(self._call("schedule.json", form)["jobid"])

    def _jobs(self) -> dict[str, Any]:
        """scrapyd's job list, asked at most once a second: a page lists many jobs."""
        with self.lock:
            if monotonic() - self.jobs_at > JOBS_TTL:
                self.jobs = self._call(f"listjobs.json?{urlencode({'project': self.project})}")
                self.jobs_at = monotonic()
            return self.jobs

    def cancel(self, job: str) -> None:
        self._call("cancel.json", {"project": self.project, "job": job})
        self.jobs_at = -JOBS_TTL

    def state(self, job: str) -> str:
        """``pending``, ``running``, ``finished`` or ``unknown``."""
        document = self._jobs()
        for state in ("pending", "running", "finished"):
            if any(entry.get("id") == job for entry in document.get(state, [])):
                return state
        return "unknown"

    def log(self, job: str) -> str:
        return str(self._call(f"logs/{self.project}/topic/{job}.log"))[-LOG_TAIL_BYTES:]


# Settings the launcher gives each crawl itself, never passed on from the console's.
OWN_SETTINGS = frozenset({"CRAWL_ID", "JOBDIR", "DATABASE_URL", "LOG_FILE", "CRAWL_LOG", "STATS_FILE",
                          "STORAGE_SPILL_FILE"})


class Launcher:
    """Starts, stops and resumes the console's crawls. ``settings`` (the console's own
    ``-s`` options, say ``DOWNLOAD_DELAY``) are given to every crawl it starts, but for
    those it sets itself (:data:`OWN_SETTINGS`) and the console's (``CONSOLE_*``)."""

    def __init__(self, runs_dir: Path, database_url: str, scrapyd: Scrapyd | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.runs_dir = runs_dir
        self.database_url = database_url
        self.scrapyd = scrapyd
        self.settings = {name: value for name, value in (settings or {}).items()
                         if name not in OWN_SETTINGS and not name.startswith("CONSOLE_")}
        # A crawl started here gets the Redis password through its environment.
        self.redis_env: dict[str, str] = {}
        if self.settings.get("REDIS_URL"):
            self.settings["REDIS_URL"], self.redis_env = child_redis_url(self.settings["REDIS_URL"])
        for name in [name for name, value in self.settings.items() if holds_password(value)]:
            # A command line (and scrapyd's job list) is readable by others.
            logger.warning("Not passing %s to the crawls: it holds a password; put it in the project's settings",
                           name)
            del self.settings[name]
        self.project_dir = os.getcwd()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        # Held around every read-check-change-save of a run.json, and the processes map:
        # the console serves requests on several threads.
        self.lock = threading.RLock()
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"CONSOLE_RUNS_DIR {str(runs_dir)!r} cannot be made: {exc}") from None

    # -- the registry ------------------------------------------------------------------

    def _dir(self, crawl: str) -> Path:
        if not is_crawl_id(crawl):  # never a path out of runs_dir
            raise RunError(f"no crawl {crawl[:120]!r}")
        return self.runs_dir / crawl

    def _save(self, run: Run) -> None:
        directory = self._dir(run.crawl)
        with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".run-", suffix=".json", delete=False,
                                         encoding="utf-8") as temporary:
            json.dump(asdict(run), temporary, ensure_ascii=False, indent=1)
        Path(temporary.name).replace(directory / "run.json")

    def get(self, crawl: str) -> Run | None:
        if not is_crawl_id(crawl):
            return None
        path = self._dir(crawl) / "run.json"
        try:
            return Run(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None

    def runs(self) -> list[Run]:
        found = [self.get(path.parent.name) for path in self.runs_dir.glob("*/run.json")]
        return sorted((run for run in found if run is not None), key=lambda run: run.created, reverse=True)

    # -- starting ----------------------------------------------------------------------

    def start(self, request: CrawlRequest) -> Run:
        crawl = new_crawl_id()
        run = Run(crawl, "scrapyd" if self.scrapyd else "local", time.time(), request.seeds, request.depth,
                  request.keywords, request.training)
        directory = self._dir(crawl)
        directory.mkdir(parents=True)
        (directory / "seeds.txt").write_text("\n".join(run.seeds) + "\n", encoding="utf-8")
        if run.training:
            (directory / "train.txt").write_text("\n".join(run.training) + "\n", encoding="utf-8")
        if self.scrapyd is not None:
            run.job = self._schedule(run)
            self._save(run)
        else:
            self._save(run)
            self._spawn(run)
        return run

    def _schedule(self, run: Run) -> str:
        assert self.scrapyd is not None
        arguments = {"seeds": ",".join(run.seeds), "depth": str(run.depth),
                     **topic_arguments(run, ",".join(run.training))}
        settings = {**self.settings, "CRAWL_ID": run.crawl}
        if self.redis_env:
            # Its password would show in scrapyd's job list: the project's own REDIS_URL serves.
            settings.pop("REDIS_URL")
        database_url, secret = child_database(self.database_url)
        if not secret:
            # The console's database, if naming it gives nothing away; a password would
            # show in scrapyd's job list, so then the job keeps its project's DATABASE_URL,
            # which must be the console's.
            settings["DATABASE_URL"] = database_url
        return self.scrapyd.schedule(run.crawl, arguments, settings)

    def _command(self, run: Run) -> tuple[list[str], dict[str, str]]:
        database_url, secret_env = child_database(self.database_url)
        settings = {**self.settings, "CRAWL_ID": run.crawl, "JOBDIR": "job", "DATABASE_URL": database_url,
                    "LOG_FILE": "crawl.log", "CRAWL_LOG": "fetch.log", "STATS_FILE": "stats.json",
                    "STORAGE_SPILL_FILE": "spill.jsonl"}
        command = crawl_command("@seeds.txt", run.depth, settings, **topic_arguments(run, "@train.txt"))
        # The console's own project settings, found from its own working directory.
        settings_module = os.environ.get("SCRAPY_SETTINGS_MODULE", "topicspider.settings")
        env = {**project_env(settings_module, self.project_dir), **secret_env, **self.redis_env}
        env.pop(TOKEN_ENV, None)  # the console's, not the crawl's
        return command, env

    def _spawn(self, run: Run) -> None:
        command, env = self._command(run)
        directory = self._dir(run.crawl)
        with open(directory / "output.log", "ab") as output:
            process = subprocess.Popen(command, cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        run.pid, run.exit_code = process.pid, None
        self._save(run)
        with self.lock:
            self.processes[run.crawl] = process
        threading.Thread(target=self._supervise, args=(run.crawl, process), daemon=True,
                         name=f"supervise-{run.crawl}").start()
        logger.info("Started crawl %s (pid %d)", run.crawl, process.pid)

    def _supervise(self, crawl: str, process: subprocess.Popen[bytes]) -> None:
        code = process.wait()
        with self.lock:
            if self.processes.get(crawl) is process:
                del self.processes[crawl]
            run = self.get(crawl)
            if run is not None and run.pid == process.pid:
                run.exit_code = code
                self._save(run)
        logger.info("Crawl %s ended, exit status %d", crawl, code)

    # -- steering ----------------------------------------------------------------------

    def alive(self, run: Run) -> bool:
        if run.mode != "local" or run.pid is None or run.exit_code is not None:
            return False
        with self.lock:
            process = self.processes.get(run.crawl)
        if process is not None:
            return process.poll() is None
        try:  # started by an earlier console: its pid, if it is still this crawl
            cmdline = Path(f"/proc/{run.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return f"CRAWL_ID={run.crawl}".encode() in cmdline

    def state(self, run: Run) -> str:
        """``running``, ``stopping``, ``stopped`` (resumable), ``finished``, ``failed``,
        ``ended`` (gone while no console watched: its exit status is unknown), or
        scrapyd's ``pending``/``running``/``finished``; ``unknown`` when scrapyd cannot
        tell (or this console has no ``SCRAPYD_URL`` any more)."""
        if run.mode == "scrapyd":
            if self.scrapyd is None:
                return "unknown"
            try:
                return self.scrapyd.state(run.job or "")
            except RunError:
                return "unknown"
        if self.alive(run):
            return "stopping" if run.stops else "running"
        if run.exit_code is None:
            return "ended"  # gone while no console watched it
        if run.exit_code == 0 and run.stops:
            return "stopped"
        return "finished" if run.exit_code == 0 else "failed"

    def _current(self, crawl: str) -> Run:
        run = self.get(crawl)
        if run is None:
            raise RunError(f"no crawl {crawl[:120]!r}")
        return run

    def stop(self, crawl: str) -> str:
        with self.lock:
            run = self._current(crawl)
            if run.mode == "scrapyd":
                if self.scrapyd is None:
                    raise RunError("this console has no SCRAPYD_URL to cancel the job with")
                self.scrapyd.cancel(run.job or "")
                run.stops += 1
                self._save(run)
                return "Asked scrapyd to cancel the job."
            if not self.alive(run):
                raise RunError("the crawl is not running")
            assert run.pid is not None
            try:
                os.kill(run.pid, signal.SIGINT)
            except ProcessLookupError:
                raise RunError("the crawl is not running") from None
            run.stops += 1
            self._save(run)
        if run.stops == 1:
            return "Stopping: the crawl finishes what it is downloading and keeps its JOBDIR to resume."
        return "Forced stop: the crawl drops what it is downloading (its JOBDIR can still resume)."

    def resume(self, crawl: str) -> None:
        with self.lock:
            run = self._current(crawl)
            if run.mode != "local":
                raise RunError("only a local crawl can be resumed from the console")
            if self.alive(run):
                raise RunError("the crawl is still running")
            if not (self._dir(run.crawl) / "job").is_dir():
                raise RunError("the crawl has no JOBDIR to resume from")
            run.stops, run.resumed = 0, run.resumed + 1
            self._spawn(run)

    def failure(self, run: Run) -> str:
        """The last line a failed local crawl wrote (its one-line error)."""
        path = self._dir(run.crawl) / "output.log"
        lines = [line for line in tail(path).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("topicspider: error:")]
        return (errors or lines or [""])[-1]

    def logs(self, run: Run) -> dict[str, str]:
        """The crawl's logs by name: Scrapy's log, the report, the fetch log."""
        if run.mode == "scrapyd":
            if self.scrapyd is None:
                raise RunError("this console has no SCRAPYD_URL to read the job's log from")
            return {"crawl.log": self.scrapyd.log(run.job or "")}
        directory = self._dir(run.crawl)
        return {name: tail(directory / name) for name in ("output.log", "crawl.log", "fetch.log")}


def tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    """The last ``size`` bytes of ``path`` as text; empty if it does not exist."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - size))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""

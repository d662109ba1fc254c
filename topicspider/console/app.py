"""The web console: a Flask application over the storage database and the crawls it
starts (:mod:`topicspider.console.runs`). Served by ``scrapy console``.

Everything shown from a crawled page goes through Jinja's autoescaping or the DOM's
``textContent``; the Content-Security-Policy allows no inline script, so a page title
holding ``<script>`` shows as text. Forms carry a per-session CSRF token. With a token
configured, every request needs the session cookie the login page gives, or an
``Authorization: Bearer TOKEN`` header; bound to loopback without a token, requests
must name a loopback host (no DNS rebinding).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, abort, flash, jsonify, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response

from topicspider.archive import Archived, ArchiveError, find_archived, read_archived
from topicspider.config import ConfigError
from topicspider.console.forms import FormError, added_urls, block_pattern, crawl_request
from topicspider.console.live import combine
from topicspider.console.runs import Launcher, Run, RunError, Scrapyd
from topicspider.search.index import emails_found, search
from topicspider.storage import StorageError, Store, open_store
from topicspider.storage.crawls import add_controls, crawl_ids, statuses
from topicspider.storage.dialect import Dialect
from topicspider.storage.labels import set_label
from topicspider.urls import is_loopback

logger = logging.getLogger(__name__)

T = TypeVar("T")
PAGE_SIZE = 20
DEAD_LETTERS_SHOWN = 20


def utc_time(seconds: float) -> str:
    """A Unix time as ``2026-12-02 20:38:24``, or ``-`` for none."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) if seconds > 0 else "-"

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


# An archived page is the crawled site's HTML, hostile maybe: shown in a sandbox (no
# script, no form, an opaque origin), loading nothing but inline styles and data images.
ARCHIVED_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'none'"


@dataclass
class ConsoleConfig:
    database_url: str
    runs_dir: Path
    token: str = ""
    loopback: bool = True
    scrapyd_url: str = ""
    scrapyd_project: str = "topicspider"
    # Distributed mode: push (crawl id, URLs) to that crawl's Redis start list.
    push_seeds: Callable[[str, list[str]], int] | None = None
    # ... and read the latest (limit) of its dead letters: (how many in all, the latest).
    dead_letters: Callable[[str, int], tuple[int, list[Any]]] | None = None
    refresh_seconds: float = 2.0
    crawl_settings: dict[str, str] = field(default_factory=dict)  # given to every crawl started
    warc_dir: str = ""  # WARC_DIR: search results link to their pages' archived copies


class Database:
    """One connection, one request at a time: the console's traffic is a person's."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.lock = threading.Lock()
        self.store: Store | None = None

    def __call__(self, work: Callable[[Any, Dialect], T], *, write: bool = False) -> T:
        with self.lock:
            if self.store is None:
                self.store = open_store(self.database_url)
            try:
                return self.store.transaction(work, write=write)
            except StorageError:
                self.store.close()
                self.store = None
                raise


def create_app(config: ConsoleConfig) -> Flask:
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)
    # Cookies do not tell ports apart: a name of its own keeps other local apps' sessions out.
    app.config.update(SESSION_COOKIE_NAME="topicspider_console", SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Strict", MAX_CONTENT_LENGTH=1024 * 1024)
    app.jinja_env.filters["href"] = web_link
    app.jinja_env.filters["utc"] = utc_time
    database = Database(config.database_url)
    scrapyd = Scrapyd(config.scrapyd_url, config.scrapyd_project) if config.scrapyd_url else None
    launcher = Launcher(config.runs_dir, config.database_url, scrapyd, config.crawl_settings)

    @app.before_request
    def guard() -> Response | None:
        if config.loopback and not config.token and not is_loopback(host_name(request.host)):
            abort(403)
        if config.token and request.endpoint not in ("login", "static") and not _authorised(config.token):
            if request.path.startswith("/api/"):
                abort(401)
            return redirect(url_for("login", next=request.path))
        if request.method == "POST" and request.endpoint != "login":
            sent = request.form.get("csrf", "")
            if not sent or not hmac.compare_digest(sent, session.get("csrf", "")):
                abort(400, "the form is out of date: load the page again")
        return None

    @app.after_request
    def headers(response: Response) -> Response:
        # An archived copy keeps its own, stricter policy (a sandbox).
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.context_processor
    def template_globals() -> dict[str, Any]:
        if "csrf" not in session:
            session["csrf"] = secrets.token_urlsafe(24)
        return {"csrf": session["csrf"], "scrapyd": bool(scrapyd), "refresh_ms": int(config.refresh_seconds * 1000)}

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if request.method == "POST":
            if hmac.compare_digest(request.form.get("token", "").encode(), config.token.encode()):
                session["authorised"] = True
                return redirect(local_path(request.args.get("next", "/")))
            return render_template("login.html", error="That token is not right."), 403
        return render_template("login.html", error="")

    @app.get("/")
    def index() -> Any:
        return render_template("index.html", crawls=_crawl_rows(), form={"depth": "2", "topic_kind": "keywords"},
                               problems={})

    @app.post("/crawls")
    def start() -> Any:
        form = {name: request.form.get(name, "") for name in ("seeds", "depth", "topic_kind", "topic")}
        try:
            run = launcher.start(crawl_request(form))
        except FormError as exc:
            return render_template("index.html", crawls=_crawl_rows(), form=form, problems=exc.problems), 400
        except RunError as exc:
            return render_template("index.html", crawls=_crawl_rows(), form=form, problems={"start": str(exc)}), 502
        flash(f"Started crawl {run.crawl}.")
        return redirect(url_for("crawl_page", crawl=run.crawl))

    def _crawl_rows() -> list[dict[str, Any]]:
        runs = {run.crawl: run for run in launcher.runs()}
        rows = [{"crawl": crawl, "run": runs.get(crawl), "state": launcher.state(runs[crawl]) if crawl in runs else "",
                 "created": runs[crawl].created if crawl in runs else None} for crawl in runs]
        seen = set(runs)
        for crawl, updated in database(lambda cursor, dialect: crawl_ids(cursor, dialect)):
            if crawl not in seen:
                rows.append({"crawl": crawl, "run": None, "state": "", "created": updated})
        return rows

    def _run_or_404(crawl: str) -> Run | None:
        run = launcher.get(crawl)
        if run is None and not database(lambda cursor, dialect: statuses(cursor, dialect, crawl, limit=1)):
            abort(404)
        return run

    @app.get("/crawls/<crawl>")
    def crawl_page(crawl: str) -> Any:
        return _render_crawl(crawl, _run_or_404(crawl), {})

    def _render_crawl(crawl: str, run: Run | None, problems: dict[str, str]) -> str:
        return render_template("crawl.html", crawl=crawl, run=run, view=_view(crawl, run), problems=problems,
                               distributed=_distributed(crawl), dead_letters=_dead_letters(crawl))

    def _dead_letters(crawl: str) -> tuple[int, list[Any]] | None:
        if not _distributed(crawl) or config.dead_letters is None:
            return None
        try:
            return config.dead_letters(crawl, DEAD_LETTERS_SHOWN)
        except Exception as exc:  # noqa: BLE001 - the page shows the rest; Redis may be away
            logger.warning("Could not read the dead letters of %s: %s", crawl, exc)
            return None

    @app.get("/api/crawls/<crawl>")
    def crawl_api(crawl: str) -> Any:
        return jsonify(_view(crawl, _run_or_404(crawl)))

    def _view(crawl: str, run: Run | None) -> dict[str, Any]:
        view = combine(database(lambda cursor, dialect: statuses(cursor, dialect, crawl)), time.time())
        if run is not None:
            view["process"] = launcher.state(run)
            if view["process"] == "failed":
                view["failure"] = launcher.failure(run)
        return view

    def _distributed(crawl: str) -> bool:
        return crawl.startswith("redis:") and config.push_seeds is not None

    @app.post("/crawls/<crawl>/stop")
    def stop(crawl: str) -> Any:
        return _steer(crawl, launcher.stop)

    @app.post("/crawls/<crawl>/resume")
    def resume(crawl: str) -> Any:
        def resumed(crawl: str) -> str:
            launcher.resume(crawl)
            return "Resumed the crawl from its JOBDIR."
        return _steer(crawl, resumed)

    def _steer(crawl: str, action: Callable[[str], str]) -> Any:
        if launcher.get(crawl) is None:
            abort(404)
        try:
            flash(action(crawl))
        except RunError as exc:
            flash(f"Could not do that: {exc}", "error")
        return redirect(url_for("crawl_page", crawl=crawl))

    @app.post("/crawls/<crawl>/add")
    def add(crawl: str) -> Any:
        run = _run_or_404(crawl)
        try:
            urls = added_urls(request.form.get("urls", ""))
        except FormError as exc:
            return _crawl_problem(crawl, run, exc)
        if _distributed(crawl):
            assert config.push_seeds is not None
            try:
                config.push_seeds(crawl, urls)
            except RunError as exc:
                return _crawl_problem(crawl, run, FormError({"urls": str(exc)}))
            flash(f"Pushed {len(urls)} URLs to the crawl's Redis start list.")
        else:
            _control(crawl, "add", urls)
            flash(f"Sent {len(urls)} URLs to the crawl; it takes them within a few seconds.")
        return redirect(url_for("crawl_page", crawl=crawl))

    @app.post("/crawls/<crawl>/block")
    def block(crawl: str) -> Any:
        run = _run_or_404(crawl)
        try:
            pattern = block_pattern(request.form.get("pattern", ""))
        except FormError as exc:
            return _crawl_problem(crawl, run, exc)
        _control(crawl, "block", [pattern])
        flash(f"Blocked URLs matching {pattern} for the rest of the crawl.")
        return redirect(url_for("crawl_page", crawl=crawl))

    def _control(crawl: str, action: str, arguments: list[str]) -> None:
        now = time.time()
        try:
            database(lambda cursor, dialect: add_controls(cursor, dialect, crawl, action, arguments, now), write=True)
        except ConfigError as exc:  # a crawl id no inbox takes
            abort(400, str(exc))

    def _crawl_problem(crawl: str, run: Run | None, error: FormError) -> Any:
        return _render_crawl(crawl, run, error.problems), 400

    @app.get("/crawls/<crawl>/log")
    def logs(crawl: str) -> Any:
        run = launcher.get(crawl)
        if run is None:
            abort(404)
        try:
            found = launcher.logs(run)
        except RunError as exc:
            found, problem = {}, str(exc)
        else:
            problem = ""
        return render_template("logs.html", crawl=crawl, logs=found, problem=problem)

    @app.get("/search")
    def search_page() -> Any:
        words = request.args.get("q", "").strip()[:200]
        page = _page_number()
        results = None
        archived: dict[str, Archived] = {}
        if words:
            results = database(lambda cursor, dialect: search(cursor, dialect, words, PAGE_SIZE, (page - 1) * PAGE_SIZE))
            if config.warc_dir:
                archived = find_archived(Path(config.warc_dir), {hit.url for hit in results.hits})
        return render_template("search.html", q=words, results=results, page=page, page_size=PAGE_SIZE,
                               archived=archived)

    @app.get("/archived")
    def archived_copy() -> Any:
        """A page's archived response body, as served: sandboxed (no script runs, no
        request leaves with the console's origin) and never sniffed into another type."""
        url = request.args.get("url", "")
        entry = find_archived(Path(config.warc_dir), {url}).get(url) if config.warc_dir and url else None
        if entry is None:
            abort(404)
        try:
            copy = read_archived(Path(config.warc_dir), entry)
        except ArchiveError:
            abort(404)
        content_type = next((value for name, value in copy.headers if name.lower() == "content-type"),
                            "application/octet-stream")
        return Response(copy.body, status=200, headers={
            "Content-Type": content_type.replace("\r", "").replace("\n", ""),
            "Content-Security-Policy": ARCHIVED_CSP})

    @app.post("/pages/<int:page_id>/label")
    def label_page(page_id: int) -> Any:
        """Mark a stored page relevant or not, for ``scrapy topic-train -a labels=database``."""
        choice = request.form.get("label", "")
        if choice not in LABEL_CHOICES:
            abort(400, "label must be relevant, irrelevant or clear")

        def mark(cursor: Any, dialect: Dialect) -> bool:
            cursor.execute(dialect.sql("SELECT 1 FROM pages WHERE id = ?"), (page_id,))
            if cursor.fetchone() is None:
                return False
            set_label(cursor, dialect, page_id, LABEL_CHOICES[choice])
            return True

        if not database(mark, write=True):
            abort(404)
        flash("Label taken back." if choice == "clear" else f"Page marked {choice}.")
        return redirect(local_path(request.form.get("next", "")) if request.form.get("next") else url_for("search_page"))

    @app.get("/emails")
    def emails_page() -> Any:
        contains = request.args.get("q", "").strip()[:200]
        page = _page_number()
        total, rows = database(lambda cursor, dialect: emails_found(cursor, dialect, contains, PAGE_SIZE,
                                                                     (page - 1) * PAGE_SIZE))
        return render_template("emails.html", q=contains, total=total, rows=rows, page=page, page_size=PAGE_SIZE)

    @app.errorhandler(StorageError)
    @app.errorhandler(ConfigError)
    def database_failed(error: Exception) -> Any:
        return render_template("error.html", message=f"The database failed: {error}"), 503

    return app


def _authorised(token: str) -> bool:
    if session.get("authorised"):
        return True
    header = request.headers.get("Authorization", "")
    return header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode())


LABEL_CHOICES: dict[str, bool | None] = {"relevant": True, "irrelevant": False, "clear": None}


def web_link(url: str) -> str:
    """A crawled URL fit for an href: http(s) only, never ``javascript:`` and the like."""
    return url if url.lower().startswith(("http://", "https://")) else "#"


def host_name(host: str) -> str:
    """The name in a Host header, without its port: ``[::1]:8070`` -> ``::1``."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def local_path(target: str) -> str:
    """``target`` if it is a path on this site, else ``/``: no open redirect, whatever
    the browser makes of backslashes and control characters."""
    parts = urlsplit(target.replace("\\", "/"))
    if not target.startswith("/") or parts.scheme or parts.netloc or any(ord(c) < 32 or c == "\\" for c in target):
        return "/"
    return target


def _page_number() -> int:
    try:
        return max(1, min(int(request.args.get("page", "1")), 10_000))
    except ValueError:
        return 1

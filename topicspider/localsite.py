"""A local web site for the demo, the tests and the benchmarks: a static HTTP server
with a request log, and a generator of sites with a known link graph.

Run ``python -m topicspider.localsite ROOT [--port 0] [--log FILE] [--host 127.0.0.1]``; it prints the port
it listens on as its first line. Files are served from ``ROOT``; a sidecar file
``NAME.headers`` holds extra ``Header: value`` lines for ``NAME`` (``Status: 503`` sets
the status, ``Status-First: 429 2`` answers 429 to the first 2 requests only,
``Delay: 0.5`` answers half a second late). Each request is logged as one JSON line: start and end times, method,
path, Host and User-Agent headers, status, client address.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from functools import partial
from html import escape
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from topicspider.runner import REPO, project_env


class SiteHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_file: IO[str] | None = None
    log_lock = threading.Lock()
    served: Counter[str] = Counter()  # requests per path, for Status-First

    def handle_one_request(self) -> None:
        self._status = 0
        super().handle_one_request()
        if self._status and self.log_file is not None:
            self._log_request()

    def parse_request(self) -> bool:
        # The request line has just been read: on a kept-alive connection, the time
        # before it was spent waiting for the client, not serving it.
        self._started = time.time()
        return super().parse_request()

    def _log_request(self) -> None:
        record = {
            "start": self._started, "end": time.time(), "method": self.command,
            "path": self.path, "host": self.headers.get("Host", ""),
            "user_agent": self.headers.get("User-Agent", ""), "status": self._status,
            "client": self.client_address[0],
        }
        assert self.log_file is not None
        with self.log_lock:
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def send_head(self) -> Any:
        extra = self._sidecar_headers()
        delay = extra.pop("Delay", None)
        if delay is not None:
            time.sleep(float(delay))  # a slow server, in this handler's own thread
        status = extra.pop("Status", None)
        first = extra.pop("Status-First", None)
        if first is not None:
            code, count = first.split()
            with self.log_lock:
                self.served[self.path] += 1
                if self.served[self.path] <= int(count):
                    status = code
        if status is not None:
            body = f"status {status}\n".encode()
            self.send_response(int(status))
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        self._extra_headers = extra
        return super().send_head()

    def end_headers(self) -> None:
        extra, self._extra_headers = getattr(self, "_extra_headers", {}), {}
        for name, value in extra.items():
            self.send_header(name, value)
        super().end_headers()

    def send_header(self, keyword: str, value: str) -> None:
        # A sidecar Content-Type replaces the guessed one instead of adding a second.
        if keyword.lower() == "content-type" and "Content-Type" in getattr(self, "_extra_headers", {}):
            return
        super().send_header(keyword, value)

    def _sidecar_headers(self) -> dict[str, str]:
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        sidecar = path.with_name(path.name + ".headers")
        if not sidecar.is_file():
            return {}
        headers = {}
        for line in sidecar.read_text(encoding="utf-8").splitlines():
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip()] = value.strip()
        return headers

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(root: Path, port: int, log_path: Path | None, backlog: int = 128, host: str = "127.0.0.1") -> None:
    if log_path is not None:
        SiteHandler.log_file = log_path.open("a", encoding="utf-8")
    handler = partial(SiteHandler, directory=str(root))
    server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
    # socketserver's backlog of 5 overflows when a crawler opens 16 connections at
    # once; the kernel then drops SYNs that the client retries only a second later.
    server.request_queue_size = backlog
    server.daemon_threads = True
    server.server_bind()
    server.server_activate()
    print(server.server_address[1], flush=True)
    server.serve_forever()


def page_html(title: str, body: str, links: list[str]) -> str:
    anchors = "\n".join(f'<li><a href="{href}">link to {href}</a></li>' for href in links)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>"
        f"<body><h1>{title}</h1><p>{body}</p><ul>{anchors}</ul></body></html>\n"
    )


def generate_site(
    root: Path, pages: int, links_per_page: int, seed: int = 0, body_text: Callable[[int], str] | None = None
) -> dict[str, int]:
    """Write ``pages`` linked pages under ``root`` (``index.html`` and ``p1.html``…) and
    return each page's path with its breadth-first depth from ``/``.

    Every page links to ``links_per_page`` random pages; a spanning tree makes every page
    reachable, so the returned depths are the shortest link distances. ``body_text(i)``,
    if given, is plain text added to page ``i``'s body (0 is ``/``), HTML-escaped, one
    ``<p>`` per line.
    """
    rng = random.Random(seed)
    names = ["/"] + [f"/p{i}.html" for i in range(1, pages)]
    links: dict[str, list[str]] = {name: [] for name in names}
    for index in range(1, pages):
        links[names[rng.randrange(index)]].append(names[index])
    for name in names:
        links[name] += rng.sample(names, min(links_per_page, pages))
    root.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        target = root / ("index.html" if name == "/" else name.lstrip("/"))
        body = f"Page {name} of a generated site. Contact: webmaster@example.com"
        if body_text is not None:
            body += "".join(f"</p>\n<p>{escape(line)}" for line in body_text(index).splitlines() if line.strip())
        target.write_text(page_html(f"Page {name}", body, links[name]), encoding="utf-8")
    return _bfs_depths(links)


def _bfs_depths(links: dict[str, list[str]]) -> dict[str, int]:
    depths = {"/": 0}
    queue = deque(["/"])
    while queue:
        page = queue.popleft()
        for target in links[page]:
            if target not in depths:
                depths[target] = depths[page] + 1
                queue.append(target)
    return depths


def spawn(root: Path, *options: str) -> tuple[subprocess.Popen[str], int]:
    """This server on ``root`` in a subprocess (``options`` as on its command line, e.g.
    ``--log FILE``), with the port it listens on; the caller terminates it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "topicspider.localsite", str(root), *options],
        stdout=subprocess.PIPE, text=True, cwd=REPO, env=project_env(),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        raise RuntimeError(f"topicspider.localsite did not print its port (got {line!r})")
    return process, int(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--backlog", type=int, default=128, help="listen backlog (default 128)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    options = parser.parse_args(argv)
    if not options.root.is_dir():
        parser.error(f"{options.root} is not a directory")
    try:
        serve(options.root, options.port, options.log, options.backlog, options.host)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()


"""Real servers for the tests: the machine's MySQL/MariaDB and Redis, and private
MariaDB instances a test may kill and restart.

``TEST_MYSQL_URL`` (default ``mysql://root@127.0.0.1:3306/``) names a server the tests
may create and drop throwaway databases on. When it cannot be reached the tests that
need it skip with the reason, unless ``TOPICSPIDER_REQUIRE_SERVICES=1`` (set by
``.ci/run``), which makes that a failure. ``TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/0``) names the Redis server; each test's keys carry a random
prefix and are deleted afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from topicspider.netns import VethNetwork, unavailable_reason

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
MARIADBD = "/usr/sbin/mariadbd"
START_TIMEOUT = 30.0


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("TOPICSPIDER_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (TOPICSPIDER_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


def with_database(server_url: str, database: str) -> str:
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{database}"))


def mysql_connect(url: str, database: bool = True) -> Any:
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname, port=parts.port or 3306, user=parts.username or "root", password=parts.password or "",
        database=(parts.path.lstrip("/") or None) if database else None, charset="utf8mb4", autocommit=True,
        connect_timeout=5,
    )


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    connection = mysql_connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
    finally:
        connection.close()


@pytest.fixture(scope="session")
def mysql_server() -> str:
    url = os.environ.get("TEST_MYSQL_URL", DEFAULT_MYSQL_URL)
    try:
        mysql_connect(url, database=False).close()
    except Exception as exc:  # noqa: BLE001 - any failure means no server to test with
        unavailable(f"no MySQL server at TEST_MYSQL_URL={url}: {exc}")
    return url


@pytest.fixture
def mysql_url(mysql_server: str) -> Iterator[str]:
    """A throwaway database on the test server, dropped afterwards."""
    database = f"topicspider_test_{secrets.token_hex(4)}"
    connection = mysql_connect(mysql_server, database=False)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {database} CHARACTER SET utf8mb4")
    yield with_database(mysql_server, database)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {database}")
    connection.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PrivateMariaDB:
    """A MariaDB server of the test's own, on a free port, that it may kill and restart."""

    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    also_on: str = ""  # another address to listen on (a veth network's hub)

    def start(self) -> None:
        addresses = ",".join(["127.0.0.1", *([self.also_on] if self.also_on else [])])
        with (self.root / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                [MARIADBD, "--no-defaults", f"--datadir={self.root / 'data'}", "--user=root", f"--port={self.port}",
                 f"--bind-address={addresses}", f"--socket={self.root / 'sock'}", f"--pid-file={self.root / 'pid'}",
                 "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--skip-name-resolve"],
                stdout=log, stderr=log,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                mysql_connect(self.url("root", ""), database=False).close()
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"private MariaDB did not start: {(self.root / 'server.log').read_text()[-2000:]}")

    def kill(self) -> None:
        """As a crash or a power cut would stop it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def url(self, user: str, password: str, database: str = "", host: str = "127.0.0.1") -> str:
        credentials = f"{user}:{password}@" if password else f"{user}@"
        return f"mysql://{credentials}{host}:{self.port}/{database}"


def _hub_of_the_tests_network(request: pytest.FixtureRequest) -> str:
    """The veth network's hub address when the test asks for ``veth_network`` too (a
    private server then listens there as well), else ""."""
    return request.getfixturevalue("veth_network").hub if "veth_network" in request.fixturenames else ""


@pytest.fixture
def veth_network() -> Iterator[VethNetwork]:
    """Three workers' network namespaces and three site addresses on a bridge, as
    machines on a LAN (:mod:`topicspider.netns`); private servers listen on its hub."""
    reason = unavailable_reason()
    if reason is not None:
        unavailable(reason)
    with VethNetwork(workers=3, sites=3) as network:
        yield network


@pytest.fixture
def private_mariadb(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PrivateMariaDB]:
    installer = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if installer is None or not Path(MARIADBD).exists():
        unavailable(f"a private MariaDB needs {MARIADBD} and mariadb-install-db")
    root = tmp_path / "mariadb"
    root.mkdir()
    done = subprocess.run(
        [installer, "--no-defaults", f"--datadir={root / 'data'}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        capture_output=True, text=True, timeout=120,
    )
    if done.returncode != 0:
        unavailable(f"mariadb-install-db failed: {done.stderr[-500:]}")
    server = PrivateMariaDB(root, also_on=_hub_of_the_tests_network(request))
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def redis_server() -> str:
    import redis

    url = os.environ.get("TEST_REDIS_URL", DEFAULT_REDIS_URL)
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means no server to test with
        unavailable(f"no Redis server at TEST_REDIS_URL={url}: {exc}")
    return url


@dataclass
class PrivateRedis:
    """A Redis server of the test's own that wants a password, on a plain port and a TLS
    port (a certificate for 127.0.0.1 made for it)."""

    root: Path
    password: str = field(default_factory=lambda: f"pw-{secrets.token_hex(8)}")
    port: int = field(default_factory=free_port)
    tls_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    also_on: str = ""  # another address to listen on (a veth network's hub)

    @property
    def ca(self) -> Path:
        return self.root / "cert.pem"

    def url(self, password: str | None = None, *, tls: bool = False, host: str = "127.0.0.1",
            user: str | None = None) -> str:
        credentials = f"{user or ''}:{password}@" if password else ""
        if tls:
            return f"rediss://{credentials}127.0.0.1:{self.tls_port}/0?ssl_cert_reqs=required&ssl_ca_certs={self.ca}"
        return f"redis://{credentials}{host}:{self.port}/0"

    def start(self) -> None:
        if self.ca.exists():  # a restart
            return self._run()
        made = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(self.root / "key.pem"), "-out", str(self.ca)],
            capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            unavailable(f"openssl could not make a certificate: {made.stderr[-300:]}")
        self._run()

    def _run(self) -> None:
        # Every write reaches the append-only file: a restart keeps the crawl's state.
        with (self.root / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--bind", "127.0.0.1", *([self.also_on] if self.also_on else []), "--port", str(self.port), "--tls-port", str(self.tls_port),
                 "--tls-cert-file", str(self.root / "cert.pem"), "--tls-key-file", str(self.root / "key.pem"),
                 "--tls-ca-cert-file", str(self.ca), "--tls-auth-clients", "no", "--requirepass", self.password,
                 "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.root)],
                stdout=log, stderr=log)
        import redis

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                redis.Redis.from_url(self.url(self.password, tls=True), socket_connect_timeout=1).ping()
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        log_text = (self.root / "server.log").read_text()[-1000:]
        self.stop()
        unavailable(f"a Redis server with TLS did not start (built without TLS?): {log_text}")

    def restart(self) -> None:
        """Stop the server (its clients' calls fail meanwhile), then start it again."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        unavailable("a private Redis server needs redis-server and openssl")
    root = tmp_path / "redis"
    root.mkdir()
    server = PrivateRedis(root, also_on=_hub_of_the_tests_network(request))
    server.start()
    yield server
    server.stop()


@dataclass
class RedisCrawl:
    """One distributed crawl's place on the test Redis server: its URL and key names."""

    url: str
    prefix: str
    client: Any

    def settings(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.url,
            "SCHEDULER_QUEUE_KEY": f"{self.prefix}:requests",
            "SCHEDULER_DUPEFILTER_KEY": f"{self.prefix}:dupefilter",
            "REDIS_START_URLS_KEY": f"{self.prefix}:start_urls",
        }


@pytest.fixture
def redis_crawl(redis_server: str) -> Iterator[RedisCrawl]:
    import redis

    client = redis.Redis.from_url(redis_server)
    crawl = RedisCrawl(redis_server, f"topicspider-test-{secrets.token_hex(4)}", client)
    yield crawl
    # Loopback hosts' politeness state too: a later test must not wait on this one's.
    for pattern in (f"{crawl.prefix}*", "topicspider:host:127.0.0.*"):
        for key in client.scan_iter(match=pattern, count=1000):
            client.delete(key)
    client.close()


def tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}: pip install -r tests/requirements.txt")
    return str(path)


def call(base: str, endpoint: str, data: dict[str, Any] | list[tuple[str, str]] | None = None) -> dict[str, Any]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    # listspiders.json runs "scrapy list" in a subprocess: slow on a busy machine.
    with urllib.request.urlopen(f"{base}/{endpoint}", data=body, timeout=60) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


@pytest.fixture
def scrapyd(tmp_path: Path) -> Iterator[str]:
    """A scrapyd of the test's own, in a temporary directory; its base URL."""
    home = tmp_path / "scrapyd"
    home.mkdir()
    port = free_port()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        f"http_port = {port}\nbind_address = 127.0.0.1\n"
        f"eggs_dir = {home / 'eggs'}\nlogs_dir = {home / 'logs'}\nitems_dir =\ndbs_dir = {home / 'dbs'}\n"
        "max_proc = 2\npoll_interval = 0.5\n"
    )
    with (home / "scrapyd.out").open("w") as log:
        server = subprocess.Popen([tool("scrapyd")], cwd=home, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if call(base, "daemonstatus.json")["status"] == "ok":
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"scrapyd did not start:\n{(home / 'scrapyd.out').read_text()[-2000:]}")
            time.sleep(0.2)
    yield base
    server.terminate()
    server.wait(timeout=10)

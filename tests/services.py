"""Real database servers for the tests: the machine's MySQL/MariaDB, and private
MariaDB instances a test may kill and restart.

``TEST_MYSQL_URL`` (default ``mysql://root@127.0.0.1:3306/``) names a server the tests
may create and drop throwaway databases on. When it cannot be reached the tests that
need it skip with the reason, unless ``TOPICSPIDER_REQUIRE_SERVICES=1`` (set by
``.ci/run``), which makes that a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/"
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

    def start(self) -> None:
        with (self.root / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                [MARIADBD, "--no-defaults", f"--datadir={self.root / 'data'}", "--user=root", f"--port={self.port}",
                 "--bind-address=127.0.0.1", f"--socket={self.root / 'sock'}", f"--pid-file={self.root / 'pid'}",
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

    def url(self, user: str, password: str, database: str = "") -> str:
        credentials = f"{user}:{password}@" if password else f"{user}@"
        return f"mysql://{credentials}127.0.0.1:{self.port}/{database}"


@pytest.fixture
def private_mariadb(tmp_path: Path) -> Iterator[PrivateMariaDB]:
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
    server = PrivateMariaDB(root)
    server.start()
    yield server
    server.kill()

"""Deployment to scrapyd: a real scrapyd on a local port, the project deployed with
scrapyd-deploy, a crawl scheduled through schedule.json and watched through
listjobs.json until it finishes, its pages in the database."""

from __future__ import annotations

import configparser
import json
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services import free_port
from topicspider.localsite import generate_site

REPO = Path(__file__).resolve().parent.parent
# What scrapyd-deploy packs: the package and the packaging files, nothing else.
PROJECT_FILES = ("setup.py", "requirements.txt", "scrapy.cfg")
START_TIMEOUT = 30.0


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


def project_copy(root: Path, scrapyd_url: str) -> Path:
    """The project as scrapyd-deploy sees it, with a deploy target for this scrapyd."""
    shutil.copytree(REPO / "topicspider", root / "topicspider", ignore=shutil.ignore_patterns("__pycache__"))
    for name in PROJECT_FILES:
        shutil.copy(REPO / name, root / name)
    config = configparser.ConfigParser()
    config.read(root / "scrapy.cfg")
    config["deploy:test"] = {"url": scrapyd_url + "/", "project": "topicspider"}
    with (root / "scrapy.cfg").open("w") as handle:
        config.write(handle)
    return root


def test_the_project_deploys_to_scrapyd_and_crawls_there(tmp_path, serve, scrapyd):
    depths = generate_site(tmp_path / "site", pages=12, links_per_page=2)
    site = serve(tmp_path / "site")
    project = project_copy(tmp_path / "project", scrapyd)

    deployed = subprocess.run([tool("scrapyd-deploy"), "test"], cwd=project, capture_output=True, text=True,
                              timeout=120)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert call(scrapyd, "listspiders.json?project=topicspider")["spiders"] == ["topic"]

    database = tmp_path / "pages.db"
    job = call(scrapyd, "schedule.json", [
        ("project", "topicspider"), ("spider", "topic"), ("seeds", site.url + "/"), ("depth", "10"),
        ("topic", "page,link"), ("setting", "TOPIC_STORE_ALL=true"), ("setting", "TOPIC_FOLLOW_ALL=true"),
        ("setting", f"DATABASE_URL=sqlite:///{database}"), ("setting", f"CRAWL_LOG={tmp_path / 'crawl.log'}"),
        ("setting", f"STATS_FILE={tmp_path / 'stats.json'}"), ("setting", "DOWNLOAD_DELAY=0"),
    ])
    assert job["status"] == "ok", job
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = call(scrapyd, "listjobs.json?project=topicspider")
        if any(finished["id"] == job["jobid"] for finished in jobs["finished"]):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the job did not finish: {jobs}")

    with sqlite3.connect(database) as db:
        stored = {url for (url,) in db.execute("SELECT url FROM pages")}
    assert len(stored) == len(depths) and site.url + "/" in stored
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["report"]["finish_reason"] == "finished" and stats["report"]["errors"] == 0
    assert stats["stats"]["topic/scored"] == len(depths), "scored in a page-analysis process, from the egg"


def test_the_repository_names_its_deploy_target():
    config = configparser.ConfigParser()
    config.read(REPO / "scrapy.cfg")
    assert config["deploy"]["project"] == "topicspider" and config["deploy"]["url"].startswith("http")
    assert config["settings"]["default"] == "topicspider.settings"

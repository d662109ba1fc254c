"""Deployment to scrapyd: a real scrapyd on a local port, the project deployed with
scrapyd-deploy, a crawl scheduled through schedule.json and watched through
listjobs.json until it finishes, its pages in the database."""

from __future__ import annotations

import configparser
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.services import call, tool
from topicspider.localsite import generate_site

REPO = Path(__file__).resolve().parent.parent
# What scrapyd-deploy packs: the package and the packaging files, nothing else.
PROJECT_FILES = ("setup.py", "requirements.txt", "scrapy.cfg")


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


def test_the_egg_and_the_user_agent_carry_one_version():
    """setup.py said 0.7.0 while the User-Agent and WARC files said 0.1.0."""
    import sys

    from topicspider import __version__, settings

    built = subprocess.run([sys.executable, "setup.py", "--version"], cwd=REPO, capture_output=True, text=True,
                           check=True)
    assert built.stdout.split()[-1] == __version__
    assert settings.USER_AGENT.startswith(f"topicspider/{__version__} ")

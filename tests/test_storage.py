"""The SQLite backend and the backend registry, without a crawler."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from topicspider.config import ConfigError
from topicspider.items import PageItem
from topicspider.storage import open_store
from topicspider.storage.sqlite import MIGRATIONS, SCHEMA_VERSION, _statements
from topicspider.urls import mask_url


def page(url: str, title: str = "T", emails: list[str] | None = None, depth: int = 1) -> PageItem:
    return PageItem(url=url, title=title, depth=depth, http_status=200, fetched_at="2026-11-30T00:00:00+00:00",
                    text="body", emails=emails or [], content_type="text/html", encoding="utf-8", content_length=10)


def test_pages_and_emails_are_upserted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    store = open_store(url)
    assert store.write_pages([page("http://a/", "One", ["x@a.com", "y@a.com"]), page("http://b/")]) == 2
    assert store.write_pages([page("http://a/", "Two's \"quoted\" title", ["y@a.com", "z@a.com"], depth=3)]) == 2
    store.close()

    with sqlite3.connect(tmp_path / "t.db") as db:
        assert db.execute("SELECT url, title, depth FROM pages ORDER BY url").fetchall() == [
            ("http://a/", "Two's \"quoted\" title", 1), ("http://b/", "T", 1)]
        assert db.execute("SELECT email FROM emails ORDER BY email").fetchall() == [("y@a.com",), ("z@a.com",)]
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_reopening_keeps_data(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    store = open_store(url)
    store.write_pages([page("http://a/")])
    store.close()
    store = open_store(url)
    store.write_pages([page("http://b/")])
    store.close()
    with sqlite3.connect(tmp_path / "t.db") as db:
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone() == (2,)


def test_a_store_opened_while_another_process_migrates_waits_and_finds_it_done(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:  # as topicspider wrote it before schema 5
        db.execute("PRAGMA journal_mode = WAL")
        for version in range(1, 5):
            db.executescript(f"{MIGRATIONS[version]}; PRAGMA user_version = {version};")
    migrator = sqlite3.connect(path, isolation_level=None)  # another process, upgrading it now
    migrator.execute("BEGIN IMMEDIATE")
    opened: dict[str, object] = {}

    def open_it() -> None:
        try:
            opened["store"] = open_store(f"sqlite:///{path}")
        except Exception as exc:  # noqa: BLE001 - the test's verdict
            opened["error"] = exc

    thread = threading.Thread(target=open_it)
    thread.start()
    time.sleep(0.5)  # it has read the schema's version, 4, and waits for the write lock
    before, move, after = MIGRATIONS[5]  # type: ignore[misc]
    for statement in _statements(before):
        migrator.execute(statement)
    move(migrator)
    for statement in _statements(after + "; PRAGMA user_version = 5"):
        migrator.execute(statement)
    migrator.execute("COMMIT")
    migrator.close()
    thread.join(timeout=30)

    assert "error" not in opened, opened
    opened["store"].close()  # type: ignore[attr-defined]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "t.db") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError, match="newer than this topicspider"):
        open_store(f"sqlite:///{tmp_path}/t.db")


@pytest.mark.parametrize(("url", "message"), [
    ("sqlite://host/x.db", "three slashes"),
    ("sqlite:///:memory:", "needs a file path"),
    ("sqlite:///", "needs a file path"),
    ("postgresql://u:pw@h/d", "unknown scheme 'postgresql'"),
    ("", "unknown scheme ''"),
])
def test_bad_database_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(url)


def test_a_relative_path_is_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///rel.db").close()
    assert (tmp_path / "rel.db").exists()


@pytest.mark.parametrize(("url", "masked"), [
    ("mysql://root:secret@db:3306/x", "mysql://root:***@db:3306/x"),
    ("mysql://root@db/x", "mysql://root@db/x"),
    ("mysql://:p%40ss@db/x", "mysql://:***@db/x"),
    ("sqlite:///a.db", "sqlite:///a.db"),
    ("sqlite:///dir/a@b.db", "sqlite:///dir/a@b.db"),
    ("mysql://user:pa/ss@db/x", "mysql://user:***@db/x"),
    ("mysql://user:pa#ss@db/x", "mysql://user:***@db/x"),
    ("mysql://user:pa?ss@db/x", "mysql://user:***@db/x"),
    ("mysql://user:p@ss@db/x", "mysql://user:***@db/x"),
    ("mysql://user:[pass@db/x", "mysql://user:***@db/x"),
])
def test_passwords_are_masked(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_aliases_are_stored_apart_and_survive_a_spill(tmp_path: Path) -> None:
    from dataclasses import replace

    from topicspider.storage import write_isolating
    from topicspider.storage.spill import read_spill, spill_pages

    original = page("http://a/guide")
    alias = replace(page("http://a/guide/index.html", depth=2), duplicate_of="http://a/guide")
    near = replace(page("http://a/print/guide"), near_duplicate_of="http://a/guide")
    spill_pages(tmp_path / "spill.jsonl", [original, alias, near])
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    outcome = write_isolating(store, list(read_spill(tmp_path / "spill.jsonl")))
    store.close()

    assert (outcome.written, outcome.aliases) == (2, 1)
    with sqlite3.connect(tmp_path / "t.db") as db:
        assert db.execute("SELECT url, near_duplicate_of FROM pages ORDER BY url").fetchall() == [
            ("http://a/guide", None), ("http://a/print/guide", "http://a/guide")]
        assert db.execute("SELECT url, duplicate_of, depth FROM page_aliases").fetchall() == [
            ("http://a/guide/index.html", "http://a/guide", 2)]


def test_a_url_is_a_page_or_an_alias_never_both(tmp_path: Path) -> None:
    """A second crawl that meets two copies the other way round once left each URL both a
    page and an alias of the other."""
    from dataclasses import replace

    store = open_store(f"sqlite:///{tmp_path}/t.db")
    store.write_pages([page("http://a/one", emails=["x@a.com"]), replace(page("http://a/two"), duplicate_of="http://a/one")])
    store.write_pages([page("http://a/two"), replace(page("http://a/one"), duplicate_of="http://a/two")])
    store.close()
    with sqlite3.connect(tmp_path / "t.db") as db:
        assert db.execute("SELECT url FROM pages").fetchall() == [("http://a/two",)]
        assert db.execute("SELECT url, duplicate_of FROM page_aliases").fetchall() == [("http://a/one", "http://a/two")]
        assert db.execute("SELECT COUNT(*) FROM emails").fetchone() == (0,), "the old page's rows went with it"

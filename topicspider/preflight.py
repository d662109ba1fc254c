"""Start-up checks of every topicspider setting and of the database, in one place.

Components check their own settings again in ``from_crawler``; running them all here
first lets ``scrapy crawl`` fail with one line before the engine starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from topicspider.cluster import redis_url
from topicspider.config import ConfigError, check_directory, check_typed_settings
from topicspider.focus import check_topic_settings
from topicspider.storage import open_store
from topicspider.storage.crawls import check_crawl_id

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def check_settings(settings: BaseSettings, database: bool = True) -> None:
    """Raise :class:`~topicspider.config.ConfigError` for the first bad setting; the
    database is opened too unless ``database`` is false, and Redis is asked in
    distributed mode."""
    check_typed_settings(settings)
    check_topic_settings(settings)
    if settings.get("CRAWL_ID"):
        check_crawl_id(settings.get("CRAWL_ID"))
    for name in ("CRAWL_LOG", "STATS_FILE", "TOPIC_TRAIN_OUTPUT", "STORAGE_SPILL_FILE"):
        _check_writable(name, settings.get(name) or "")
    check_directory("WARC_DIR", settings.get("WARC_DIR") or "")
    if settings.get("WARC_REPLAY_DIR"):
        from topicspider.middlewares.replay import check_replay_dir

        check_replay_dir(settings.get("WARC_REPLAY_DIR"))
        if redis_url(settings):
            raise ConfigError("WARC_REPLAY_DIR: a replay of an archive runs in one process, without REDIS_URL")
    if database:
        open_store(settings.get("DATABASE_URL") or "").close()
    if redis_url(settings):
        from topicspider.cluster import check_queue, check_server

        check_server(settings)
        check_queue(settings)


def _check_writable(name: str, path: str) -> None:
    if not path:
        return
    target = Path(path)
    directory = target.parent.resolve()
    if not directory.is_dir():
        raise ConfigError(f"{name} {path!r}: directory {str(target.parent)!r} does not exist")
    if target.is_dir() or not os.access(target if target.exists() else directory, os.W_OK):
        raise ConfigError(f"{name} {path!r}: cannot be written")

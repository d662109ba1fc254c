"""Start-up checks of every topicspider setting and of the database, in one place.

Components check their own settings again in ``from_crawler``; running them all here
first lets ``scrapy crawl`` fail with one line before the engine starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topicspider.config import get_bool, get_float, get_int
from topicspider.storage import open_store

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def check_settings(settings: BaseSettings) -> None:
    """Raise :class:`~topicspider.config.ConfigError` for the first bad setting."""
    get_bool(settings, "URL_STRIP_TRAILING_SLASH")
    get_bool(settings, "SCHEDULER_LEVEL_SYNC")
    get_int(settings, "EXTRACT_TEXT_MAX_CHARS", minimum=1)
    get_int(settings, "STORAGE_BATCH_SIZE", minimum=1)
    get_float(settings, "STORAGE_FLUSH_INTERVAL", minimum=0.01)
    open_store(settings.get("DATABASE_URL") or "").close()

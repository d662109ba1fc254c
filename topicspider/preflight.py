"""Start-up checks of every topicspider setting and of the database, in one place.

Components check their own settings again in ``from_crawler``; running them all here
first lets ``scrapy crawl`` fail with one line before the engine starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topicspider.config import check_typed_settings
from topicspider.storage import open_store

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def check_settings(settings: BaseSettings) -> None:
    """Raise :class:`~topicspider.config.ConfigError` for the first bad setting."""
    check_typed_settings(settings)
    open_store(settings.get("DATABASE_URL") or "").close()

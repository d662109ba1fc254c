"""The README stays true: every setting topicspider adds, and every stats key it counts
by name, is documented there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
# Scrapy's own keys, which the frontier keeps as Scrapy's scheduler does.
SCRAPY_KEYS = ("scheduler/enqueued", "scheduler/dequeued")
STAT_CALL = re.compile(r'(?:inc_value|_count|set_value|max_value)\(\s*"([a-z_]+/[a-z0-9_/]+)"|counts\["([a-z_]+/[a-z0-9_/]+)"\]')


def own_settings() -> list[str]:
    text = (REPO / "topicspider" / "settings.py").read_text(encoding="utf-8")
    own = text[text.index("# topicspider's own settings"):]
    return re.findall(r"^([A-Z][A-Z0-9_]+)\s*=", own, re.MULTILINE)


def counted_keys() -> set[str]:
    keys: set[str] = set()
    for path in (REPO / "topicspider").rglob("*.py"):
        for match in STAT_CALL.finditer(path.read_text(encoding="utf-8")):
            keys.add(match.group(1) or match.group(2))
    return {key for key in keys if not key.startswith(SCRAPY_KEYS)}


def test_every_setting_topicspider_adds_is_in_the_readme() -> None:
    settings = own_settings()
    assert len(settings) > 30 and "PAGE_PROCESSES" in settings
    assert [name for name in settings if f"| `{name}`" not in README and f", `{name}`" not in README] == []


def test_every_stats_key_topicspider_counts_is_in_the_readme() -> None:
    keys = counted_keys()
    assert len(keys) > 40 and "storage/pages_spilled" in keys
    assert sorted(key for key in keys if f"`{key}`" not in README) == []

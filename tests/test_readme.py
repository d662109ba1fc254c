"""The README and docs/ stay true: every setting topicspider adds is in the settings
table of docs/settings.md and every stats key it counts by name in its stats table; every
relative link of README.md and docs/*.md leads to a file that exists, and to a heading
of it; the README stays a short guide that links every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
SETTINGS_DOC = DOCS / "settings.md"
README_MAX_BYTES = 15 * 1024
# Scrapy's own keys, which the frontier keeps as Scrapy's scheduler does.
SCRAPY_KEYS = ("scheduler/enqueued", "scheduler/dequeued")
STAT_CALL = re.compile(r'(?:inc_value|_count|set_value|max_value)\(\s*"([a-z_]+/[a-z0-9_/]+)"|counts\["([a-z_]+/[a-z0-9_/]+)"\]')

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]*)\)")
CODE_SPAN = re.compile(r"(`+).*?\1")


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


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def section(path: Path, title: str) -> str:
    """The text under the heading ``title`` of ``path``, up to the next heading of the
    same or a higher level."""
    lines = prose_lines(path.read_text(encoding="utf-8"))
    found, level, body = False, 0, []
    for _, line in lines:
        heading = HEADING.match(line)
        if heading and found and len(heading.group(1)) <= level:
            break
        if found:
            body.append(line)
        elif heading and heading.group(2) == title:
            found, level = True, len(heading.group(1))
    assert found, f"{path.name} has no heading {title!r}"
    return "\n".join(body)


def first_column_names(table: str) -> set[str]:
    """The `names` in the first cell of each row of the markdown table(s) in ``table``."""
    names: set[str] = set()
    for line in table.split("\n"):
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, link targets and code marks dropped,
    lower-cased, without punctuation but hyphens and underscores, spaces as hyphens;
    letters of any script kept."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of ``path``; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[tuple[int, str]]:
    """The relative link and image targets of a markdown file, outside code."""
    links = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):
                links.append((number, target))
    return links


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_every_setting_topicspider_adds_is_in_the_settings_table() -> None:
    settings = own_settings()
    assert len(settings) > 30 and "PAGE_PROCESSES" in settings
    documented = first_column_names(section(SETTINGS_DOC, "Settings topicspider adds"))
    assert "PAGE_PROCESSES" in documented
    assert [name for name in settings if name not in documented] == []


def test_every_stats_key_topicspider_counts_is_in_the_stats_table() -> None:
    keys = counted_keys()
    assert len(keys) > 40 and "storage/pages_spilled" in keys
    documented = first_column_names(section(SETTINGS_DOC, "Stats"))
    assert "storage/pages_spilled" in documented
    assert sorted(key for key in keys if key not in documented) == []


def test_anchors_follow_githubs_rule() -> None:
    assert slug("De-duplication and pause/resume") == "de-duplication-and-pauseresume"
    assert slug("scrapy-redis 0.9.1 with Scrapy 2.19") == "scrapy-redis-091-with-scrapy-219"
    assert slug("Archiving pages (WARC)") == "archiving-pages-warc"
    assert slug("`SCHEDULER_LEVEL_SYNC` and 主题爬虫") == "scheduler_level_sync-and-主题爬虫"


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    broken = []
    for path in markdown_files():
        links = relative_links(path)
        assert path != README or links, "README.md links nowhere"
        for number, target in links:
            where = f"{path.relative_to(REPO)}:{number}: {target}"
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
                broken.append(f"{where} (no such heading)")
    assert broken == []


def test_the_readme_is_a_short_guide_to_every_page_of_the_docs() -> None:
    assert len(README.read_bytes()) <= README_MAX_BYTES
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in relative_links(README)}
    pages = sorted(DOCS.glob("*.md"))
    assert len(pages) > 5
    assert [page.name for page in pages if page.resolve() not in linked] == []


def test_the_quick_start_commands_are_where_ci_reads_them() -> None:
    # .ci/run runs the line after each marker, inside its code block.
    lines = README.read_text(encoding="utf-8").split("\n")
    for marker in ("<!-- demo-command -->", "<!-- test-command -->"):
        at = lines.index(marker)
        assert lines[at + 1] == "```sh" and lines[at + 2].strip() and lines[at + 3] == "```"

"""Spider arguments and typed settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.settings import Settings

from topicspider.config import (
    ConfigError,
    get_bool,
    get_float,
    get_int,
    looks_like_a_file,
    parse_depth,
    parse_seeds,
    seeds_under,
)
from topicspider.urls import URLRules, parse_url_filter


def test_seed_list() -> None:
    assert parse_seeds(" http://a.com/x#f , HTTP://B.com ,http://a.com/x") == ["http://a.com/x", "http://b.com/"]


def test_seed_file(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\ufeff# my seeds\nhttp://a.com/  # main site\n\n  https://b.com/x#frag  \n", encoding="utf-8")
    assert parse_seeds(f"@{seeds}") == ["http://a.com/", "https://b.com/x"]


@pytest.mark.parametrize(("value", "message"), [
    ("", "no seed URLs"), (" , ", "no seed URLs"), ("a.com", "scheme must be http or https"),
    ("http://ok.com,javascript:x", "javascript:x"),
])
def test_bad_seeds(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_seeds(value)


def test_a_seed_file_without_its_at_sign_gets_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("seeds.txt").write_text("http://a.com/\n")
    for value, named in (("seeds.txt", "seeds.txt"), ("http://ok.com/,./list", "./list"),
                         (f"{tmp_path}/seeds.txt", f"{tmp_path}/seeds.txt")):
        with pytest.raises(ConfigError, match=f"did you mean @{named}\\?"):
            parse_seeds(value)


def test_what_looks_like_a_file() -> None:
    assert looks_like_a_file("/etc/topic") and looks_like_a_file("~/t") and looks_like_a_file("topic.TXT")
    assert looks_like_a_file("./words") and looks_like_a_file("keywords.json")
    assert not looks_like_a_file("TCP/IP") and not looks_like_a_file("node.js") and not looks_like_a_file("电子表格")
    assert not looks_like_a_file("http://a.com/list.txt")


def test_empty_seed_file(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no seed URLs"):
        parse_seeds(f"@{tmp_path / 'empty.txt'}")


@pytest.mark.parametrize(("value", "depth"), [("0", 0), (3, 3), (" 12 ", 12)])
def test_depth(value: str | int, depth: int) -> None:
    assert parse_depth(value) == depth


@pytest.mark.parametrize("value", ["-1", "1.5", "x", ""])
def test_bad_depth(value: str) -> None:
    with pytest.raises(ConfigError, match="depth"):
        parse_depth(value)


def test_typed_settings() -> None:
    settings = Settings({"N": "5", "F": "0.5", "B": "false", "BAD": "x"})
    assert get_int(settings, "N", minimum=1) == 5
    assert get_float(settings, "F", minimum=0.0) == 0.5
    assert get_bool(settings, "B") is False
    with pytest.raises(ConfigError, match="N must be at least 6, got 5"):
        get_int(settings, "N", minimum=6)
    with pytest.raises(ConfigError, match="BAD must be a number, got 'x'"):
        get_float(settings, "BAD", minimum=0)
    with pytest.raises(ConfigError, match="BAD must be true or false, got 'x'"):
        get_bool(settings, "BAD")
    with pytest.raises(ConfigError, match="MISSING must be an integer, got None"):
        get_int(settings, "MISSING", minimum=0)


def test_url_filter_file_is_read_at_start_and_a_bad_one_named(tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from topicspider import settings as defaults
    from topicspider.config import url_rules_from

    def rules_of(path: str) -> object:
        settings = Settings()
        settings.setmodule(defaults)
        settings.set("URL_FILTER_FILE", path)
        return url_rules_from(settings).url_filter

    rules = tmp_path / "regex-urlfilter.txt"
    rules.write_text("-\\.php\n+.\n")
    url_filter = rules_of(str(rules))
    assert url_filter is not None and not url_filter.accepts("http://a.cn/x.php") and url_filter.accepts("http://a.cn/")
    for text, message in (("docs\n", "line 1: expected"), ("+(\n", "line 1: bad regular expression")):
        rules.write_text(text)
        with pytest.raises(ConfigError, match=f"URL_FILTER_FILE '{rules}': {message}"):
            rules_of(str(rules))
    with pytest.raises(ConfigError, match="URL_FILTER_FILE '/nonexistent/rules.txt'"):
        rules_of("/nonexistent/rules.txt")


def test_seeds_go_through_the_links_normaliser_and_filters() -> None:
    rules = URLRules(url_filter=parse_url_filter("-/private/\n+."))
    assert seeds_under(["http://a.cn/x;jsessionid=42?PHPSESSID=9&p=1", "http://a.cn/x?p=1"], rules) \
        == ["http://a.cn/x?p=1"], "session ids stripped, then once each"
    with pytest.raises(ConfigError, match=r"'http://a\.cn/private/': refused by URL_FILTER_FILE \(url_filter\)"):
        seeds_under(["http://a.cn/", "http://a.cn/private/"], rules)
    with pytest.raises(ConfigError, match="refused by URLLENGTH_LIMIT"):
        seeds_under(["http://a.cn/" + "x" * 3000], rules)
    with pytest.raises(ConfigError, match="refused by URL_MAX_PATH_SEGMENTS"):
        seeds_under(["http://a.cn/" + "x/" * 40], rules)

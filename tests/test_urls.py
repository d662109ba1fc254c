"""Canonical URLs, site identity and link filtering."""

from __future__ import annotations

import pytest

from topicspider.urls import (
    BadURL, URLRules, canonical_url, has_public_suffix, holds_url_password, mask_url, non_page_reason, request_url,
    parse_url_filter, site_of, strip_session_ids, trap_reason, url_pattern,
)


@pytest.mark.parametrize(("first", "second"), [
    ("http://example.com/a/", "http://example.com/a"),
    ("http://example.com/p?b=1&a=2", "http://example.com/p?a=2&b=1"),
    ("http://EXAMPLE.com/x", "http://example.com/x"),
    ("http://example.com:80/x", "http://example.com/x"),
    ("https://example.com:443/x", "https://example.com/x"),
    ("http://example.com/x#part", "http://example.com/x"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com/%7euser", "http://example.com/~user"),
])
def test_one_identity(first: str, second: str) -> None:
    assert canonical_url(first) == canonical_url(second)


@pytest.mark.parametrize(("first", "second"), [
    ("http://example.com/a", "https://example.com/a"),
    ("http://example.com:8080/a", "http://example.com/a"),
    ("http://example.com/A", "http://example.com/a"),
    ("http://example.com/p?a=1", "http://example.com/p?a=2"),
])
def test_different_identities(first: str, second: str) -> None:
    assert canonical_url(first) != canonical_url(second)


def test_trailing_slash_rule_is_a_switch() -> None:
    assert canonical_url("http://example.com/a/", strip_trailing_slash=False) == "http://example.com/a/"
    assert canonical_url("http://example.com/", strip_trailing_slash=True) == "http://example.com/"


def test_request_url_keeps_the_trailing_slash_and_drops_the_fragment() -> None:
    assert request_url("HTTP://Example.COM:80/a/?b=1&a=2#frag") == "http://example.com/a/?b=1&a=2"


def test_spaces_in_a_path_are_quoted_and_underscores_in_hosts_pass() -> None:
    assert request_url("http://example.com/my page.html") == "http://example.com/my%20page.html"
    assert request_url("http://a_b.example.com/") == "http://a_b.example.com/"


def test_passwords_never_reach_error_messages() -> None:
    with pytest.raises(BadURL) as caught:
        request_url("http://bob:s3cret@example.com:99999/")
    assert "s3cret" not in str(caught.value) and "bob:***@" in str(caught.value)


@pytest.mark.parametrize(("url", "masked"), [
    ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
    ("redis://h:6379/0?password=s3cret&db=1", "redis://h:6379/0?password=***&db=1"),
    ("rediss://u:s3cret@h/0?ssl_cert_reqs=required&ssl_password=s3cret", "rediss://u:***@h/0?ssl_cert_reqs=required&ssl_password=***"),
    ("redis://h/0?ssl_ca_certs=/etc/ca.pem", "redis://h/0?ssl_ca_certs=/etc/ca.pem"),
])
def test_a_password_in_a_url_or_its_query_is_masked(url, masked) -> None:
    assert mask_url(url) == masked and holds_url_password(url) is (url != masked)


def test_non_ascii_urls_are_quoted() -> None:
    assert request_url("http://例子.中国/路径") == "http://xn--fsqu00a.xn--fiqs8s/%E8%B7%AF%E5%BE%84"


@pytest.mark.parametrize("bad", [
    "ftp://example.com/", "example.com", "http://", "http://x.com:99999/", "mailto:a@b.com", "",
    "http://exa mple.com/", "http://example..com/", "http://.../", "http://-bad.com/", "http://[oops/",
])
def test_bad_urls(bad: str) -> None:
    with pytest.raises(BadURL):
        request_url(bad)


@pytest.mark.parametrize(("url", "site"), [
    ("http://news.example.com.cn/a", "example.com.cn"),
    ("http://www.example.com.cn/", "example.com.cn"),
    ("http://example.com.cn/", "example.com.cn"),
    ("http://other.com.cn/", "other.com.cn"),
    ("http://bbs.163.com/", "163.com"),
    ("http://a.b.example.co.uk:8080/", "example.co.uk"),
    ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
    ("http://127.0.0.1/", "127.0.0.1"),
    ("http://localhost:5000/", "localhost:5000"),
    ("http://[::1]:5000/", "[::1]:5000"),
    ("http://alice.github.io/", "alice.github.io"),
])
def test_site_is_the_registrable_domain(url: str, site: str) -> None:
    assert site_of(request_url(url)) == site


def test_ip_sites_differ_by_port() -> None:
    assert site_of("http://127.0.0.1:1/") != site_of("http://127.0.0.1:2/")


@pytest.mark.parametrize(("url", "reason"), [
    ("http://e.com/a.css", "extension"), ("http://e.com/a.js", "extension"),
    ("http://e.com/favicon.ico", "extension"), ("http://e.com/p.PNG", "extension"),
    ("http://e.com/a.rar", "extension"), ("http://e.com/a.zip", "extension"),
    ("http://e.com/a.doc", "extension"), ("http://e.com/a.exe", "extension"),
    ("http://e.com/a.tar.gz", "extension"), ("http://e.com/a.pdf", "extension"),
    ("javascript:void(0)", "scheme"), ("mailto:a@e.com", "scheme"), ("tel:+1", "scheme"),
    ("data:text/html,x", "scheme"), ("ftp://e.com/", "scheme"),
    ("http://e.com/a.pdf;jsessionid=1A2B", "extension"), ("http://e.com/book.epub", "extension"),
    ("http://e.com/app.mjs", "extension"), ("http://e.com/pic.avif", "extension"),
    ("http://e.com/a.html", None), ("http://e.com/a.php?x=1.png", None), ("https://e.com/dir/", None),
    ("http://e.com/a.jsp;jsessionid=1A2B", None),
])
def test_non_page_links(url: str, reason: str | None) -> None:
    assert non_page_reason(url) == reason


def test_every_extension_scrapy_ignores_is_a_non_page_link() -> None:
    from scrapy.linkextractors import IGNORED_EXTENSIONS

    from topicspider.urls import NON_PAGE_EXTENSIONS

    assert set(IGNORED_EXTENSIONS) <= NON_PAGE_EXTENSIONS


def test_public_suffix_check() -> None:
    assert has_public_suffix("example.com")
    assert has_public_suffix("mail.example.com.cn")
    assert not has_public_suffix("2x.png")
    assert not has_public_suffix("com")


@pytest.mark.parametrize(("pattern", "url", "matches"), [
    ("*/tag/*", "http://a.cn/tag/x", True),
    ("*/tag/*", "http://a.cn/tags/x", False),
    ("http://a.cn/forum/", "http://a.cn/forum/1?page=2", True),
    ("http://a.cn/forum/", "http://b.cn/forum/1", False),
    ("*.pdf", "http://a.cn/x.pdf", True),
    ("*.pdf", "http://a.cn/x.pdf?download=1", False),
    ("http://a.cn/*?s=*", "http://a.cn/list?s=1", True),
    ("*[1]*", "http://a.cn/a[1]", True),
    ("http://a.cn/b*b/c", "http://a.cn/b/c", False),
])
def test_url_patterns_are_globs_or_prefixes(pattern: str, url: str, matches: bool) -> None:
    assert url_pattern(pattern).matches(url) is matches


@pytest.mark.parametrize("bad", ["", "   ", "x" * 501])
def test_bad_url_patterns_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        url_pattern(bad)


@pytest.mark.parametrize(("url", "stripped"), [
    ("http://a.cn/x;jsessionid=0A1B?b=1&PHPSESSID=9&sid=2&page=3", "http://a.cn/x?b=1&page=3"),
    ("http://a.cn/p?ASPSESSIONIDQSTR=KL&q=2", "http://a.cn/p?q=2"),
    ("http://a.cn/p?osCsid=1", "http://a.cn/p"),
    ("http://a.cn/p?side=1&sidebar=2&page=1", "http://a.cn/p?side=1&sidebar=2&page=1"),  # names, not prefixes
    ("http://a.cn/p;type=a?q=1", "http://a.cn/p;type=a?q=1"),
    ("http://a.cn/p?a=1&&b=2", "http://a.cn/p?a=1&&b=2"),  # no session id: left as it is
])
def test_session_ids_are_stripped_and_nothing_else(url, stripped) -> None:
    assert strip_session_ids(url, URLRules().session_parameters) == stripped
    assert strip_session_ids(url, frozenset()) == url


@pytest.mark.parametrize(("url", "reason"), [
    ("http://a.cn/rep/a/a/a/page.html", "path_repetition"),
    ("http://a.cn/x/y/x/y/x/y/", "path_repetition"),
    ("http://a.cn/a/a/b/", None),  # twice is allowed (Heritrix's default)
    ("http://a.cn/1/b/1/c/1/d/1/", None),  # repeated, but not back to back
    ("http://a.cn/" + "s/" * 16 + "t", "path_repetition"),
    ("http://a.cn/" + "/".join(f"s{n}" for n in range(33)), "too_many_segments"),
    ("http://a.cn/?q=" + "x" * 2100, "too_long"),
    ("http://a.cn/docs/en/index.html", None),
])
def test_crawler_traps_are_recognised(url, reason) -> None:
    assert trap_reason(url, URLRules()) == reason


def test_the_users_url_filter_reads_as_nutchs_regex_urlfilter() -> None:
    rules = parse_url_filter("# skip calendars and print views, keep the docs\n\n-/calendar/\n-[?&]print=1\n"
                             "+^https?://docs\\.example\\.cn/\n")
    assert rules.accepts("http://docs.example.cn/guide/a.html")
    assert not rules.accepts("http://docs.example.cn/calendar/2026/")  # the first match decides
    assert not rules.accepts("http://docs.example.cn/a?x=1&print=1")
    assert not rules.accepts("http://www.example.cn/")  # no line matches: refused
    assert parse_url_filter("-\\.pdf$\n+.").accepts("http://a.cn/x.html")


@pytest.mark.parametrize(("text", "message"), [
    ("docs/\n", "line 1: expected '\\+REGEX' or '-REGEX'"),
    ("+ok\n-(unclosed\n", "line 2: bad regular expression"),
    ("# only comments\n\n", "no rules"),
    ("+\n", "line 1: expected"),
])
def test_a_bad_url_filter_names_its_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_url_filter(text)

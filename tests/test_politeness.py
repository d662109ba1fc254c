"""Politeness against local servers, with real timing: robots.txt, meta robots,
identity, per-host delays and concurrency, back-off, and no head-of-line blocking."""

from __future__ import annotations

import pytest
from test_crawl import write

from topicspider.localsite import generate_site, page_html
from topicspider.robots import robots_token

# Request starts are taken when the server reads the request, a few milliseconds after
# the crawler decided to send it; intervals are checked with this much slack.
TOLERANCE = 0.05


def starts(site, *, robots: bool = True) -> list[float]:
    return sorted(r["start"] for r in site.requests() if robots or r["path"] != "/robots.txt")


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:])]


def max_in_flight(requests: list[dict]) -> int:
    events = sorted([(r["start"], 1) for r in requests] + [(r["end"], -1) for r in requests])
    level = peak = 0
    for _, change in events:
        level += change
        peak = max(peak, level)
    return peak


def test_requests_to_one_host_are_at_least_the_delay_apart(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=8, links_per_page=2)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=10, settings={"DOWNLOAD_DELAY": 0.4})

    times = starts(site)
    assert len(times) == 9  # robots.txt and 8 pages
    assert min(gaps(times)) >= 0.4 - TOLERANCE
    # Randomised upwards only, by at most half the delay (plus the page's own time).
    assert max(gaps(times)) <= 0.4 * 1.5 + 0.5
    assert result.report["pages_stored"] == 8


def test_no_more_than_two_requests_in_flight_per_host(tmp_path, serve, crawl):
    root = tmp_path / "site"
    pages = [f"/slow{i}.html" for i in range(8)]
    write(root / "index.html", page_html("Home", "", pages))
    for page in pages:
        write(root / page.lstrip("/"), page_html(page, "", []), "Delay: 0.4")
    site = serve(root)

    crawl(site.url + "/", settings={"CONCURRENT_REQUESTS": 16})

    assert max_in_flight(site.requests()) == 2


def test_robots_txt_disallow_is_obeyed_and_counted(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "robots.txt", "User-agent: *\nDisallow: /private/\n\nUser-agent: topicspider\nDisallow: /only-us/\n")
    write(root / "index.html", page_html("Home", "", ["/open.html", "/private/a.html", "/only-us/b.html"]))
    for page in ("open.html", "private/a.html", "only-us/b.html"):
        write(root / page, page_html(page, "", []))
    site = serve(root)

    result = crawl(site.url + "/")

    assert sorted(site.paths()) == ["/", "/open.html", "/private/a.html"]
    assert result.stats["robots/denied"] == 1
    assert result.report["robots_denied"] == 1


def test_the_robots_token_follows_the_configured_user_agent(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "robots.txt", "User-agent: mybot\nDisallow: /secret.html\n")
    write(root / "index.html", page_html("Home", "", ["/secret.html"]))
    write(root / "secret.html", page_html("Secret", "", []))
    site = serve(root)

    crawl(site.url + "/")
    first = site.requests()
    assert "/secret.html" in site.paths()
    assert {r["user_agent"] for r in first} == {default_user_agent()}

    user_agent = "MyBot/2.0 (+https://example.org/bot)"
    crawl(site.url + "/", settings={"USER_AGENT": user_agent})

    second = site.requests()[len(first):]
    assert {r["user_agent"] for r in second} == {user_agent}
    assert "/secret.html" not in [r["path"] for r in second]


def default_user_agent() -> str:
    from topicspider import __version__

    return f"topicspider/{__version__} (+https://github.com/topicspider/topicspider)"


def test_default_user_agent_names_topicspider_its_version_and_a_contact() -> None:
    from topicspider import __version__, settings

    assert settings.USER_AGENT == default_user_agent()
    assert robots_token(settings.USER_AGENT) == "topicspider"
    assert __version__ in settings.USER_AGENT and "+https://" in settings.USER_AGENT


def test_a_larger_crawl_delay_wins_over_download_delay(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=5, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "User-agent: *\nCrawl-delay: 0.8\n")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=10, settings={"DOWNLOAD_DELAY": 0.1})

    page_gaps = gaps(starts(site, robots=False))
    assert len(page_gaps) == 4 and min(page_gaps) >= 0.8 - TOLERANCE
    assert result.stats["pacing/max_delay"] == pytest.approx(0.8)
    assert result.report["hosts_slowed_by_robots"] == 1


def test_request_rate_sets_a_delay_too(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=4, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "User-agent: topicspider\nRequest-rate: 2/1\nCrawl-delay: 0.1\n")
    site = serve(tmp_path / "site")

    crawl(site.url + "/", depth=10, settings={"DOWNLOAD_DELAY": 0})

    assert min(gaps(starts(site, robots=False))) >= 0.5 - TOLERANCE


@pytest.mark.parametrize(("body", "headers"), [
    (bytes(range(256)) * 4000, "Content-Type: application/octet-stream"),
    (b"<html><body><h1>Not a robots file</h1><p>Disallow: /</p></body></html>", "Content-Type: text/html"),
    (b"User-agent: *\n" + b"Disallow: /nothing-here-" + b"x" * 2_000_000 + b"\nDisallow: /late.html\n", None),
])
def test_garbage_huge_or_mistyped_robots_txt_does_not_stop_the_crawl(tmp_path, serve, crawl, body, headers):
    generate_site(tmp_path / "site", pages=4, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", body, headers)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=10)

    assert result.returncode == 0 and result.report["pages_stored"] == 4


def test_missing_robots_txt_allows_everything(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=2)
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", depth=10)

    assert result.stats["robots/status/404"] == 1 and result.report["pages_stored"] == 3


def test_a_failing_robots_txt_is_retried_then_the_host_is_disallowed(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "", "Status: 503")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", settings={"ROBOTSTXT_RETRY_TIMES": 2, "ROBOTSTXT_RETRY_DELAY": 0.2})

    assert site.paths(robots=True) == ["/robots.txt"] * 3
    times = starts(site)
    assert gaps(times)[0] >= 0.2 - TOLERANCE and gaps(times)[1] >= 0.4 - TOLERANCE
    assert result.stats["robots/unreachable"] == 1
    assert result.stats["robots/denied_unreachable"] == 1
    assert result.report["errors"] == 1 and result.pages() == {}


def test_robots_txt_that_recovers_after_a_5xx_is_used(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "User-agent: *\nDisallow: /p1.html\n", "Status-First: 500 1")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", settings={"ROBOTSTXT_RETRY_DELAY": 0.1})

    assert site.paths(robots=True).count("/robots.txt") == 2
    assert "/p1.html" not in site.paths() and result.stats["robots/denied"] >= 1


@pytest.mark.parametrize(("where", "directive", "stored", "followed"), [
    ("meta", "noindex", False, True),
    ("meta", "nofollow", True, False),
    ("meta", "none", False, False),
    ("meta-ua", "NOFOLLOW", True, False),
    ("meta-other-ua", "none", True, True),
    ("header", "noindex, nofollow", False, False),
    ("header-ua", "topicspider: noindex", False, True),
    ("header-other-ua", "googlebot: noindex", True, True),
])
def test_meta_robots_and_x_robots_tag(tmp_path, serve, crawl, where, directive, stored, followed):
    root = tmp_path / "site"
    head, headers = "", None
    if where == "meta":
        head = f'<meta name="Robots" content=" {directive} ">'
    elif where == "meta-ua":
        head = f'<META NAME="topicspider" CONTENT="{directive}">'
    elif where == "meta-other-ua":
        head = f'<meta name="googlebot" content="{directive}">'
    else:
        headers = f"X-Robots-Tag: {directive}"
    write(root / "index.html", page_html("Home", "", ["/page.html"]))
    write(root / "page.html", f"<html><head>{head}<title>Page</title></head><body>"
                              f'<a href="/next.html">next</a></body></html>', headers)
    write(root / "next.html", page_html("Next", "", []))
    site = serve(root)

    result = crawl(site.url + "/")

    assert (site.url + "/page.html" in result.pages()) is stored
    assert ("/next.html" in site.paths()) is followed
    if not stored:
        assert result.stats["robots/meta_noindex"] == 1
    if not followed:
        assert result.stats["robots/meta_nofollow"] == 1


@pytest.mark.parametrize("obey", [True, False])
def test_rel_nofollow_links(tmp_path, serve, crawl, obey):
    root = tmp_path / "site"
    write(root / "index.html", '<html><body><a href="/a.html" rel="external NoFollow">a</a>'
                               '<a href="/b.html">b</a></body></html>')
    write(root / "a.html", page_html("A", "", []))
    write(root / "b.html", page_html("B", "", []))
    site = serve(root)

    result = crawl(site.url + "/", settings={"ROBOTS_REL_NOFOLLOW_OBEY": obey})

    assert ("/a.html" in site.paths()) is not obey and "/b.html" in site.paths()
    assert result.stats.get("robots/rel_nofollow", 0) == (1 if obey else 0)


def test_retry_after_pauses_the_host_and_the_page_is_fetched_later(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/busy.html", "/other.html"]))
    write(root / "busy.html", page_html("Busy", "", []), "Status-First: 429 1\nRetry-After: 1")
    write(root / "other.html", page_html("Other", "", []))
    site = serve(root)

    result = crawl(site.url + "/", settings={"CONCURRENT_REQUESTS_PER_DOMAIN": 1})

    requests = [r for r in site.requests() if r["path"] != "/robots.txt"]
    refused = next(r for r in requests if r["status"] == 429)
    later = [r["start"] for r in requests if r["start"] > refused["start"]]
    assert later and min(later) - refused["end"] >= 1 - TOLERANCE
    assert site.url + "/busy.html" in result.pages()
    assert result.stats["backoff/count"] == 1
    assert result.report["backoffs"] == 1


def test_back_off_gives_up_after_its_retries(tmp_path, serve, crawl):
    root = tmp_path / "site"
    write(root / "index.html", page_html("Home", "", ["/down.html"]))
    write(root / "down.html", "", "Status: 503\nRetry-After: 0")
    site = serve(root)

    result = crawl(site.url + "/", settings={"BACKOFF_MAX_RETRIES": 2, "BACKOFF_DEFAULT_DELAY": 0.1})

    assert site.paths().count("/down.html") == 3
    assert result.stats["backoff/gave_up"] == 1 and result.stats["fetch/errors/http_503"] == 1


def test_a_slow_host_does_not_stall_the_others(tmp_path, serve, crawl):
    slow_root, fast_root = tmp_path / "slow", tmp_path / "fast"
    generate_site(slow_root, pages=12, links_per_page=3, seed=1)
    write(slow_root / "robots.txt", "User-agent: *\nCrawl-delay: 1\n")
    generate_site(fast_root, pages=40, links_per_page=3, seed=2)
    slow, fast = serve(slow_root, host="127.0.0.2"), serve(fast_root, host="127.0.0.3")

    result = crawl(f"{slow.url}/,{fast.url}/", depth=20,
                   settings={"CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 4})

    fast_times, slow_times = starts(fast), starts(slow)
    assert len(fast_times) == 41 and len(slow_times) == 13
    # The slow host needs 11+ s; the fast one must not wait for it.
    assert slow_times[-1] - slow_times[0] >= 11 - TOLERANCE
    assert fast_times[-1] - fast_times[0] < 5
    assert result.report["pages_stored"] == 52


def test_pacing_is_per_host_not_per_site(tmp_path, serve, crawl):
    # 127.0.0.4 and 127.0.0.5 are two hosts; each gets its own delay clock.
    one, two = tmp_path / "one", tmp_path / "two"
    generate_site(one, pages=4, links_per_page=2, seed=3)
    generate_site(two, pages=4, links_per_page=2, seed=4)
    first, second = serve(one, host="127.0.0.4"), serve(two, host="127.0.0.5")

    crawl(f"{first.url}/,{second.url}/", depth=10, settings={"DOWNLOAD_DELAY": 0.5})

    both = sorted(starts(first) + starts(second))
    assert min(gaps(starts(first))) >= 0.5 - TOLERANCE and min(gaps(starts(second))) >= 0.5 - TOLERANCE
    assert min(gaps(both)) < 0.25  # the two hosts overlap in time
    assert both[-1] - both[0] < 5 * 0.5 * 1.5 + 2  # no host waited for the other to finish


def test_hosts_of_one_site_are_paced_apart_and_crawled_as_one_site(tmp_path, serve, crawl, monkeypatch):
    # www. and bbs.example.com.cn are one site (the registrable domain) but two servers;
    # other.com.cn is another site. All three resolve to this machine.
    monkeypatch.setenv("TOPICSPIDER_LOOPBACK_HOSTS", "www.example.com.cn,bbs.example.com.cn,other.com.cn")
    root = tmp_path / "site"
    root.mkdir()
    site = serve(root)
    port = site.url.rsplit(":", 1)[1]
    www, bbs, other = (f"http://{host}:{port}" for host in ("www.example.com.cn", "bbs.example.com.cn", "other.com.cn"))
    write(root / "index.html", page_html("Home", "", [f"{bbs}/b0.html", f"{other}/o.html", "/w0.html"]))
    for i in range(3):
        write(root / f"w{i}.html", page_html(f"W{i}", "", [f"/w{i + 1}.html", f"{bbs}/b{i + 1}.html"]))
        write(root / f"b{i}.html", page_html(f"B{i}", "", [f"/b{i + 1}.html"]))
    write(root / "w3.html", page_html("W3", "", []))
    write(root / "b3.html", page_html("B3", "", []))
    write(root / "o.html", page_html("Other", "", []))

    result = crawl(f"{www}/", depth=10, settings={
        "DNS_RESOLVER": "topicspider.loopback.LoopbackResolver", "DOWNLOAD_DELAY": 0.5})

    by_host: dict[str, list[float]] = {}
    for request in site.requests():
        by_host.setdefault(request["host"].split(":")[0], []).append(request["start"])
    assert set(by_host) == {"www.example.com.cn", "bbs.example.com.cn"}, "other.com.cn is off-site"
    assert len(by_host["bbs.example.com.cn"]) == 5  # robots.txt and b0-b3: same site, followed
    for times in by_host.values():
        assert min(gaps(sorted(times))) >= 0.5 - TOLERANCE
    assert min(gaps(sorted(by_host["www.example.com.cn"] + by_host["bbs.example.com.cn"]))) < 0.3
    assert result.report["links_offsite"] == 1 and result.report["pages_stored"] == 9  # index, w0-w3, b0-b3


def test_robots_txt_answering_429_is_retried_not_taken_as_missing(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "User-agent: *\nDisallow: /\n", "Status-First: 429 1\nRetry-After: 1")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", settings={"ROBOTSTXT_RETRY_DELAY": 0.1})

    robots = [r for r in site.requests() if r["path"] == "/robots.txt"]
    assert [r["status"] for r in robots] == [429, 200]
    assert robots[1]["start"] - robots[0]["end"] >= 1 - TOLERANCE  # Retry-After, not the 0.1 s retry delay
    assert site.paths() == [] and result.stats["robots/denied"] == 1


def test_robots_txt_asking_to_wait_past_the_cap_is_unreachable_at_once(tmp_path, serve, crawl):
    """A robots.txt that answers 429 with a Retry-After of years once held its host's
    download slots for as long, and the crawl with them: past BACKOFF_MAX_DELAY, the
    host is unreachable now, and the crawl's other site is crawled whole."""
    generate_site(tmp_path / "held", pages=3, links_per_page=2)
    write(tmp_path / "held" / "robots.txt", "", "Status: 429\nRetry-After: 999999999")
    depths = generate_site(tmp_path / "open", pages=6, links_per_page=2, seed=3)
    held = serve(tmp_path / "held")
    other = serve(tmp_path / "open", host="127.0.0.7")

    result = crawl(f"{held.url}/,{other.url}/", settings={"BACKOFF_MAX_DELAY": 2}, timeout=60)

    assert result.returncode == 0, result.stderr
    assert [r["status"] for r in held.requests()] == [429], "asked once: Retry-After is past the cap"
    assert result.stats["robots/unreachable"] == 1 and result.stats["robots/denied_unreachable"] == 1
    assert result.report["finish_reason"] == "finished" and result.report["errors"] == 1
    assert sorted(other.paths()) == sorted(depths)


def test_a_crawl_delay_too_long_skips_the_host(tmp_path, serve, crawl):
    generate_site(tmp_path / "site", pages=3, links_per_page=2)
    write(tmp_path / "site" / "robots.txt", "User-agent: *\nCrawl-delay: 100000\n")
    site = serve(tmp_path / "site")

    result = crawl(site.url + "/", settings={"ROBOTSTXT_MAX_CRAWL_DELAY": 60}, timeout=60)

    assert site.paths() == [] and result.stats["robots/crawl_delay_too_long"] == 1
    assert result.report["finish_reason"] == "finished"


def test_a_redirect_to_another_host_is_paced_as_that_host(tmp_path, serve, crawl):
    # Seeds on .6 redirect to .7, which also has its own links: all of .7's requests
    # must keep .7's delay, whichever host's request they started as.
    target_root, origin_root = tmp_path / "target", tmp_path / "origin"
    generate_site(target_root, pages=12, links_per_page=3, seed=8)
    target = serve(target_root, host="127.0.0.7")
    for i in range(8):
        write(origin_root / f"s{i}.html", "", f"Status: 302\nLocation: {target.url}/p{i + 1}.html")
    origin = serve(origin_root, host="127.0.0.6")

    crawl(",".join([f"{origin.url}/s{i}.html" for i in range(8)] + [f"{target.url}/"]), depth=5,
          settings={"DOWNLOAD_DELAY": 0.5, "DOWNLOAD_DELAY_JITTER": 0})

    times = starts(target)
    assert len(times) >= 5 and min(gaps(times)) >= 0.5 - TOLERANCE

"""The WARC archive (WARC_DIR): a real crawl's responses read back with warcio, as they
came over the wire, files rotated, and a directory that cannot be written refused."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from conftest import run_project
from warcio.archiveiterator import ArchiveIterator

from topicspider.archive import INDEX_NAME, Archived, Exchange, WarcFiles, append_to_index, find_archived
from topicspider.localsite import generate_site
from topicspider.runner import crawl_command, scrapy_command


def records(directory: Path) -> list[tuple[str, object]]:
    """(file name, record) for every record of every file, in file order; each record's
    payload read whole and raw, as recorded (content_stream() would decode gzip)."""
    found = []
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                payload = record.raw_stream.read()
                found.append((path.name, (record.rec_type, record.rec_headers, record.http_headers, payload)))
    return found


def test_every_response_is_archived_with_its_request(tmp_path, serve, crawl) -> None:
    site_root = tmp_path / "site"
    generate_site(site_root, 12, 3)
    compressed = gzip.compress((site_root / "p1.html").read_bytes())
    (site_root / "p1.html").write_bytes(compressed)  # served gzipped: archived as it came
    (site_root / "p1.html.headers").write_text("Content-Encoding: gzip\nContent-Type: text/html; charset=utf-8\n")
    site = serve(site_root)
    result = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc"})
    assert result.returncode == 0, result.stderr[-2000:]

    archived = records(result.workdir / "warc")
    kinds = [kind for _, (kind, *_) in archived]
    assert kinds[0] == "warcinfo" and kinds.count("warcinfo") == 1
    responses = {headers.get_header("WARC-Target-URI"): (http, body)
                 for _, (kind, headers, http, body) in archived if kind == "response"}
    requests = [(headers, http) for _, (kind, headers, http, _) in archived if kind == "request"]
    served = [f"{site.url}{record['path']}" for record in site.requests()]
    assert sorted(responses) == sorted(served) and len(requests) == len(served)  # robots.txt included
    for path in ("/", "/p2.html"):
        http, body = responses[f"{site.url}{path}"]
        assert http.get_statuscode() == "200"
        assert body == (site_root / ("index.html" if path == "/" else path[1:])).read_bytes()
    http, body = responses[f"{site.url}/p1.html"]
    assert body == compressed and http.get_header("Content-Encoding") == "gzip"
    assert responses[f"{site.url}/robots.txt"][0].get_statuscode() == "404"
    # WARC/1.0's date: seconds, UTC (fractions are WARC/1.1's).
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", headers.get_header("WARC-Date"))
               for _, (kind, headers, _, _) in archived)
    ids = {headers.get_header("WARC-Record-ID") for _, (kind, headers, _, _) in archived if kind == "response"}
    for headers, http in requests:
        assert headers.get_header("WARC-Concurrent-To") in ids
        assert http.protocol == "GET" and http.statusline.startswith("/") and http.statusline.endswith(" HTTP/1.1")
        assert http.get_header("User-Agent").startswith("topicspider/") and http.get_header("Host") == site.url[7:]
    stats = json.loads((result.workdir / "stats.json").read_text())["stats"]
    assert stats["warc/records"] == 2 * len(served) and stats["warc/files"] == 1 and "warc/errors" not in stats


def test_files_rotate_past_the_size_and_each_stands_alone(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 20, 3)
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc", "WARC_MAX_SIZE": 4096,
                                                       "WARC_PREFIX": "mine"})
    assert result.returncode == 0, result.stderr[-2000:]

    files = sorted((result.workdir / "warc").glob("mine-*.warc.gz"))
    assert len(files) >= 3
    archived = records(result.workdir / "warc")
    for path in files:  # each file opens with its own warcinfo record
        assert next(kind for name, (kind, *_) in archived if name == path.name) == "warcinfo"
    assert sum(kind == "response" for _, (kind, *_) in archived) == len(site.requests())


def test_a_warc_dir_that_cannot_be_made_is_one_error_line(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    done = run_project(crawl_command("http://127.0.0.1:1/", 1, {"WARC_DIR": str(tmp_path / "file" / "warc")}),
                       tmp_path)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0].startswith("topicspider: error: WARC_DIR ") and "cannot be made" in errors[0]


def test_a_response_past_the_queue_bound_is_counted_not_archived(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 5, 2)
    # Over WARC_QUEUE_MAX_MB on its own.
    (tmp_path / "site" / "big.html").write_text("<html><body><p>" + "大" * 500_000 + "</p></body></html>")
    index = tmp_path / "site" / "index.html"
    index.write_text(index.read_text().replace("</body>", '<a href="big.html">big</a></body>'))
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc", "WARC_QUEUE_MAX_MB": 1})
    assert result.returncode == 0, result.stderr[-2000:]

    archived = {headers.get_header("WARC-Target-URI") for _, (kind, headers, *_) in records(result.workdir / "warc")
                if kind == "response"}
    served = {f"{site.url}{record['path']}" for record in site.requests()}
    assert f"{site.url}/big.html" in served and archived == served - {f"{site.url}/big.html"}
    stats = json.loads((result.workdir / "stats.json").read_text())["stats"]
    assert stats["warc/dropped"] == 1
    assert sum("not archived" in line for line in result.stderr.splitlines()) == 1


def test_scrapy_search_says_where_pages_are_archived_and_shows_a_copy(tmp_path, serve, crawl) -> None:
    site_root = tmp_path / "site"
    generate_site(site_root, 6, 2, body_text=lambda number: f"归档测试页面 {number}")
    original = (site_root / "p1.html").read_bytes()
    (site_root / "p1.html").write_bytes(gzip.compress(original))
    (site_root / "p1.html.headers").write_text("Content-Encoding: gzip\nContent-Type: text/html; charset=utf-8\n")
    site = serve(site_root)
    result = crawl(site.url + "/", depth=10, settings={"WARC_DIR": "warc"})
    assert result.returncode == 0, result.stderr[-2000:]

    listed = run_project(scrapy_command("search", "归档", "-n", "20", "--archived", "-s", "WARC_DIR=warc"),
                         result.workdir)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    located = [line for line in lines if line.strip().startswith("archived: ")]
    assert len(located) == 6 and all(".warc.gz at byte " in line and "(HTTP 200, " in line for line in located)
    copy = run_project(scrapy_command("search", "--archived-copy", f"{site.url}/p1.html", "-s", "WARC_DIR=warc"),
                       result.workdir)
    assert copy.returncode == 0 and copy.stdout == original.decode("utf-8")  # as served, un-gzipped
    missing = run_project(scrapy_command("search", "--archived-copy", f"{site.url}/nowhere", "-s", "WARC_DIR=warc"),
                          result.workdir)
    assert missing.returncode == 1 and "is not in the archive" in missing.stderr
    unset = run_project(scrapy_command("search", "归档", "--archived"), result.workdir)
    assert unset.returncode == 2 and "give -s WARC_DIR=DIRECTORY" in unset.stderr


def test_the_index_keeps_the_latest_copy_and_skips_a_torn_line(tmp_path) -> None:
    first = Archived("http://a.cn/", "a.warc.gz", 100, 50, 200, "2026-12-03T00:00:00Z")
    later = Archived("http://a.cn/", "b.warc.gz", 10, 60, 200, "2026-12-03T01:00:00Z")
    append_to_index(tmp_path, [first, Archived("http://a.cn/x", "a.warc.gz", 150, 70, 404, "2026-12-03T00:00:01Z")])
    with (tmp_path / INDEX_NAME).open("a") as index:
        index.write('{"url": "http://a.cn/", "file": "c.w')  # a crash mid-line, no newline after it
    append_to_index(tmp_path, [later])
    assert find_archived(tmp_path, {"http://a.cn/", "http://a.cn/y"}) == {"http://a.cn/": later}
    assert find_archived(tmp_path / "none", {"http://a.cn/"}) == {}


def test_a_stored_page_finds_its_copy_by_canonical_url_and_a_redirect_yields_to_the_page(tmp_path) -> None:
    moved = Archived("http://a.cn/news", "a.warc.gz", 0, 10, 301, "2026-12-03T00:00:00Z", "http://a.cn/news")
    page = Archived("http://a.cn/news/", "a.warc.gz", 10, 90, 200, "2026-12-03T00:00:01Z", "http://a.cn/news")
    append_to_index(tmp_path, [page, moved])  # the redirect written last
    assert find_archived(tmp_path, {"http://a.cn/news"}) == {"http://a.cn/news": page}
    assert find_archived(tmp_path, {"http://a.cn/news/"}) == {"http://a.cn/news/": page}


def test_credentials_are_not_archived_with_the_request(tmp_path) -> None:
    files = WarcFiles(tmp_path, "t", 10**9)
    files.write(Exchange("http://a.cn/", "GET", "/", [("Host", "a.cn"), ("Authorization", "Basic c2VjcmV0"),
                                                       ("Proxy-Authorization", "Basic c2VjcmV0"), ("Cookie", "s=1")],
                         "HTTP/1.1", 200, [("Content-Type", "text/html")], b"<p>x</p>", ""))
    files.close()
    raw = gzip.decompress(next(tmp_path.glob("*.warc.gz")).read_bytes())
    assert b"c2VjcmV0" not in raw and b"s=1" not in raw and b"Host: a.cn" in raw


def test_pages_the_background_sample_fetched_are_archived_once(tmp_path, serve, crawl) -> None:
    generate_site(tmp_path / "site", 8, 2, body_text=lambda number: f"电子表格 公式 {number}")
    site = serve(tmp_path / "site")
    result = crawl(site.url + "/", depth=10, topic="电子表格,公式", settings={"WARC_DIR": "warc"})
    assert result.returncode == 0, result.stderr[-2000:]

    stats = json.loads((result.workdir / "stats.json").read_text())["stats"]
    assert stats.get("topic/background_reused", 0) > 0  # pages served from the sample, not fetched again
    archived = [headers.get_header("WARC-Target-URI") for _, (kind, headers, *_) in records(result.workdir / "warc")
                if kind == "response"]
    served = [f"{site.url}{record['path']}" for record in site.requests()]
    assert sorted(archived) == sorted(served)


def test_header_bytes_are_archived_as_they_came(tmp_path) -> None:
    # A Chinese site's raw UTF-8 Location, as Scrapy hands it over (bytes, here read as latin-1).
    location = "/新闻/".encode("utf-8").decode("latin-1")
    files = WarcFiles(tmp_path, "t", 10**9)
    files.write(Exchange("http://a.cn/n", "GET", "/n", [("Host", "a.cn")], "HTTP/1.1", 301,
                         [("Location", location)], b"", ""))
    files.close()
    raw = gzip.decompress(next(tmp_path.glob("*.warc.gz")).read_bytes())
    assert "Location: /新闻/\r\n".encode("utf-8") in raw

"""Chinese pages in UTF-8, GBK/GB18030 and Big5, declared or not, come out right."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.http import HtmlResponse

from topicspider.encoding import better_encoding, guess_encoding, looks_binary
from topicspider.extract import extract_title

FIXTURES = Path(__file__).parent / "fixtures" / "encodings"
SIMPLIFIED = "电子表格公式与单元格教程"
TRADITIONAL = "電子表格公式與單元格教學"
TITLES = {
    "utf8-meta.html": SIMPLIFIED,
    "utf8-none.html": SIMPLIFIED,
    "gbk-meta-gb2312.html": SIMPLIFIED,
    "gbk-none.html": SIMPLIFIED,
    "gbk-declared-utf8.html": SIMPLIFIED,
    "gb18030-header.html": SIMPLIFIED + " 𠀀€",
    "big5-meta.html": TRADITIONAL,
    "big5-none.html": TRADITIONAL,
    "big5-header.html": TRADITIONAL,
    "gbk-none-short.html": "新闻中心",
    "big5-none-short.html": "新聞中心",
}


def fixture_response(name: str) -> HtmlResponse:
    path = FIXTURES / name
    sidecar = path.with_name(name + ".headers")
    headers = {"Content-Type": "text/html"}
    if sidecar.exists():
        key, _, value = sidecar.read_text().partition(":")
        headers[key.strip()] = value.strip()
    return HtmlResponse(f"http://example.com/{name}", body=path.read_bytes(), headers=headers)


@pytest.mark.parametrize("name", sorted(TITLES))
def test_titles_come_out_right(name: str) -> None:
    response = fixture_response(name)
    encoding = better_encoding(response.body, response.headers[b"Content-Type"].decode())
    if encoding is not None:
        response = response.replace(encoding=encoding)
    assert extract_title(response.selector.root) == TITLES[name]
    assert "\ufffd" not in response.text


def test_scrapy_alone_garbles_gbk_that_claims_utf8() -> None:
    # The defect this module exists for; if Scrapy ever fixes it, this test says so.
    response = fixture_response("gbk-declared-utf8.html")
    assert extract_title(response.selector.root) != SIMPLIFIED


def test_a_trustworthy_declaration_is_kept() -> None:
    body = (FIXTURES / "big5-meta.html").read_bytes()
    assert better_encoding(body, "text/html") is None
    assert better_encoding(b"<html>plain ascii</html>", "text/html; charset=utf-8") is None


def test_guesses() -> None:
    text = "这是一个关于电子表格的中文网页，我们介绍公式和单元格的使用方法。"
    assert guess_encoding(text.encode("gbk")) == "gb18030"
    assert guess_encoding(text.encode("utf-8")) == "utf-8"
    assert guess_encoding("這是一個關於電子表格的中文網頁".encode("big5")) in {"big5", "big5hkscs"}
    assert guess_encoding(bytes(range(128, 256))) != "utf-8"


SHORT_PAGES = [
    ("首页", "欢迎光临本公司网站"), ("公司简介", "我们是一家软件公司"), ("联系我们", "电话和地址"),
    ("新闻中心", "今日要闻"), ("产品展示", "最新产品列表"), ("招聘信息", "诚聘软件工程师"),
]


@pytest.mark.parametrize(("title", "sentence"), SHORT_PAGES)
@pytest.mark.parametrize("encoding", ["gbk", "big5"])
def test_short_undeclared_chinese_pages(title: str, sentence: str, encoding: str) -> None:
    if encoding == "big5":
        title, sentence = title.encode("big5", "replace").decode("big5"), sentence.encode("big5", "replace").decode("big5")
    html = f"<html><head><title>{title}</title></head><body><p>{sentence}</p></body></html>"
    body = html.encode(encoding)
    response = HtmlResponse("http://example.com/", body=body, headers={"Content-Type": "text/html"})
    chosen = better_encoding(body, "text/html")
    if chosen is not None:
        response = response.replace(encoding=chosen)
    assert extract_title(response.selector.root) == title


@pytest.mark.parametrize(("content_type", "meta", "body_encoding"), [
    ("text/html; charset=ISO-8859-1", "gbk", "gbk"),        # a server's default header, a true <meta>
    ("text/html; charset=gbk", "", "utf-8"),                # a UTF-8 page labelled GBK
    ("text/html", "gb2312", "utf-8"),                       # a UTF-8 page whose <meta> lies
])
def test_contradicted_declarations(content_type: str, meta: str, body_encoding: str) -> None:
    head = f'<meta charset="{meta}">' if meta else ""
    body = f"<html><head>{head}<title>新闻中心</title></head><body>今日要闻</body></html>".encode(body_encoding)
    response = HtmlResponse("http://example.com/", body=body, headers={"Content-Type": content_type})
    chosen = better_encoding(body, content_type)
    assert chosen is not None
    assert extract_title(response.replace(encoding=chosen).selector.root) == "新闻中心"


@pytest.mark.parametrize(("body", "declared", "binary"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 2, None, True),
    (b"\x1f\x8b\x08\x00" + bytes(range(1, 200)), None, True),  # gzip, no NUL after its header
    (bytes(range(0x80, 0x100)) * 8 + b"\x00\x01\x02\x03\x04\x05\x06", None, False),  # stray ones, a NUL too
    (b"<html><body>\xe4\xbd\xa0\xe5\xa5\xbd\x00\x01</body></html>", None, False),  # a short page's stray ones
    ("<html>你好</html>".encode("utf-16"), None, False),  # BOM
    ("<html>你好</html>".encode("utf-16-le"), "UTF-16LE", False),  # declared
    ("<html>日本語</html>".encode("iso2022_jp"), None, False),  # ESC is text
    (b"<html>\t\n\r\x0c plain</html>", None, False),
])
def test_binary_bodies_are_told_from_text(body: bytes, declared: str | None, binary: bool) -> None:
    assert looks_binary(body, declared) is binary

"""A real-world, labelled Chinese web corpus for evaluating a topic-focused crawl.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/topic_corpus.py DEST

It builds one static site in ``DEST`` from four Debian documentation packages, each
on its own topic, fetched with ``apt-get download`` (Debian's mirrors are the only
network used) and unpacked with ``dpkg -x``:

=============  ===========================  ============================================
label          package                      topic
=============  ===========================  ============================================
reference      debian-reference-zh-cn       Debian system administration (reference)
lilypond       lilypond-doc-html-zh         LilyPond music engraving (website + manual)
faq            debian-faq-zh-cn             the Debian FAQ
maint-guide    maint-guide-zh-cn            Debian packaging (new maintainers' guide)
=============  ===========================  ============================================

``DEST/<label>/`` holds the package's HTML tree, copied (never symlinked) with its
relative links as shipped: only Chinese pages are kept (``name.zh.html``,
``name.zh-cn.html``...; ``.html.gz`` is decompressed), with the web assets of at
most 200 KB (CSS, small images, scripts); PDFs, text dumps, large files and pages in
other languages are dropped, so links to those answer 404. ``DEST/index.html`` links
to each package's entry page and ``DEST/labels.json`` maps every page, by its path
relative to ``DEST`` with ``/``, to its label. ``labels.json`` is written last: when it
is there and every page it lists exists, :func:`build_corpus` returns it as is.

The ``.deb`` files are kept in ``bench/.cache/debs/`` so that a rebuild downloads
nothing. :func:`broken_links` counts the relative links of each package that do not
resolve inside ``DEST``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

DEB_CACHE = Path(__file__).resolve().parent / ".cache" / "debs"
LABELS_FILE = "labels.json"
INDEX_FILE = "index.html"
MAX_ASSET_BYTES = 200 * 1024
ASSET_SUFFIXES = frozenset({".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".js", ".webp"})
HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz")

# "name.zh-cn.html", "name.zh.html.gz"...: the language tag before the HTML suffix.
_LANG_IN_NAME = re.compile(r"\.([a-z]{2,3}(?:[-_][a-z]{2,4})?)\.html?(?:\.gz)?$", re.IGNORECASE)
_LANG_ATTR = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?([a-z]{2,3})", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class DocPackage:
    """One documentation package and where its HTML tree lies in the ``.deb``."""

    label: str
    package: str
    root: str  # the tree copied to DEST/<label>, relative to the package's filesystem
    entry: str  # the start page, relative to ``root``


PACKAGES: tuple[DocPackage, ...] = (
    DocPackage("reference", "debian-reference-zh-cn", "usr/share/debian-reference", "index.zh-cn.html"),
    DocPackage("lilypond", "lilypond-doc-html-zh", "usr/share/doc/lilypond/html/Documentation", "web/index.zh.html"),
    DocPackage("faq", "debian-faq-zh-cn", "usr/share/doc/debian/FAQ/zh-cn", "index.zh-cn.html"),
    DocPackage("maint-guide", "maint-guide-zh-cn", "usr/share/doc/maint-guide-zh-cn/html", "index.zh-cn.html"),
)


# --- fetching and unpacking -------------------------------------------------------


def fetch_deb(package: str, cache: Path = DEB_CACHE) -> Path:
    """The cached ``.deb`` of ``package``, downloaded into ``cache`` the first time."""
    cached = sorted(cache.glob(f"{package}_*.deb"))
    if cached:
        return cached[-1]
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["apt-get", "download", package], cwd=cache, capture_output=True, text=True, check=False)
    cached = sorted(cache.glob(f"{package}_*.deb"))
    if done.returncode != 0 or not cached:
        raise RuntimeError(f"apt-get download {package} failed (run 'apt-get update' first?): {done.stderr.strip()}")
    return cached[-1]


def extract_deb(deb: Path, into: Path) -> Path:
    """Unpack ``deb``'s files (``dpkg -x``) into ``into`` and return it."""
    subprocess.run(["dpkg", "-x", str(deb), str(into)], check=True, capture_output=True)
    return into


# --- choosing files ---------------------------------------------------------------


def is_html(path: Path) -> bool:
    """Whether ``path`` is an HTML page, gzip-compressed or not."""
    return path.name.lower().endswith(HTML_SUFFIXES)


def read_html(path: Path) -> bytes:
    """The bytes of the page at ``path``, decompressed if it ends in ``.gz``."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def is_chinese_page(name: str, data: bytes) -> bool:
    """Whether a page is in Chinese: by the language tag of its file name, else by its
    ``<html lang>``, else by a tenth or more of its characters being CJK ideographs."""
    tagged = _LANG_IN_NAME.search(name)
    if tagged:
        return tagged.group(1).lower().startswith("zh")
    declared = _LANG_ATTR.search(data[:4096])
    if declared:
        return declared.group(1).lower() == b"zh"
    text = data.decode("utf-8", errors="replace")
    letters = sum(1 for char in text if char.isalpha())
    return letters > 0 and len(_CJK.findall(text)) * 10 >= letters


def page_name(path: Path) -> str:
    """The name a page is served under: ``.gz`` removed."""
    return path.name.removesuffix(".gz")


def is_small_asset(path: Path) -> bool:
    """Whether ``path`` is a web asset (CSS, image, script) of at most 200 KB."""
    return path.suffix.lower() in ASSET_SUFFIXES and path.stat().st_size <= MAX_ASSET_BYTES


# --- copying a package ------------------------------------------------------------


def copy_tree(src: Path, dst: Path) -> list[Path]:
    """Copy the Chinese pages and small assets under ``src`` to ``dst`` as regular files
    (symbolic links followed, dangling ones skipped); return the pages written."""
    pages: list[Path] = []
    for path in sorted(src.rglob("*")):
        if not path.is_file():
            continue
        target = dst / path.relative_to(src)
        if is_html(path):
            data = read_html(path)
            if is_chinese_page(page_name(path), data):
                pages.append(write_file(target.with_name(page_name(path)), data))
        elif is_small_asset(path):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return pages


def write_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path``, creating its directories; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def build_package(doc: DocPackage, dest: Path, cache: Path = DEB_CACHE) -> list[Path]:
    """Rebuild ``dest/<label>`` from the package; return its pages."""
    target = dest / doc.label
    if target.exists():
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(prefix=f"topic-corpus-{doc.label}-") as scratch:
        root = extract_deb(fetch_deb(doc.package, cache), Path(scratch)) / doc.root
        if not root.is_dir():
            raise RuntimeError(f"{doc.package} has no {doc.root}/")
        pages = copy_tree(root, target)
    if not (target / doc.entry).is_file():
        raise RuntimeError(f"{doc.package}: entry page {doc.entry} missing")
    return pages


# --- the site ---------------------------------------------------------------------


def relpath(path: Path, dest: Path) -> str:
    """``path`` relative to ``dest``, with ``/``."""
    return path.relative_to(dest).as_posix()


def page_title(path: Path) -> str:
    """The text of the page's ``<title>``, or its file name."""
    text = path.read_text("utf-8", errors="replace")
    found = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    title = re.sub(r"\s+", " ", unescape(found.group(1))).strip() if found else ""
    return title or path.name


def index_html(entries: dict[str, str], titles: dict[str, str]) -> str:
    """The root page: a UTF-8 list of links to each package's entry page."""
    items = "\n".join(
        f'<li><a href="{escape(entries[label])}">{escape(titles[label])}</a> ({escape(label)})</li>'
        for label in entries
    )
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n<meta charset="utf-8">\n'
        "<title>中文文档语料</title>\n</head>\n<body>\n<h1>中文文档语料</h1>\n"
        f"<ul>\n{items}\n</ul>\n</body>\n</html>\n"
    )


def write_index(dest: Path) -> Path:
    """Write ``dest/index.html`` from the entry pages; return its path."""
    entries = entry_pages(dest)
    titles = {label: page_title(dest / path) for label, path in entries.items()}
    return write_file(dest / INDEX_FILE, index_html(entries, titles).encode("utf-8"))


def entry_pages(dest: Path) -> dict[str, str]:
    """Each label's entry page, as a path relative to ``dest`` with ``/``; raises
    FileNotFoundError if one is missing (the corpus is not built)."""
    entries = {doc.label: f"{doc.label}/{doc.entry}" for doc in PACKAGES}
    missing = [path for path in entries.values() if not (Path(dest) / path).is_file()]
    if missing:
        raise FileNotFoundError(f"entry pages missing in {dest} (run build_corpus): {', '.join(missing)}")
    return entries


def load_labels(dest: Path) -> dict[str, str] | None:
    """``dest/labels.json`` if it is there, covers every package and every page it lists
    exists; else None."""
    try:
        labels = json.loads((dest / LABELS_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(labels, dict) or set(labels.values()) != {doc.label for doc in PACKAGES}:
        return None
    if not (dest / INDEX_FILE).is_file() or not all((dest / path).is_file() for path in labels):
        return None
    return labels


def build_corpus(dest: Path, cache: Path = DEB_CACHE) -> dict[str, str]:
    """Build the corpus in ``dest`` (unless it is complete already); return its labels:
    page path relative to ``dest`` (with ``/``) -> label."""
    dest = Path(dest)
    labels = load_labels(dest)
    if labels is not None:
        return labels
    dest.mkdir(parents=True, exist_ok=True)
    (dest / LABELS_FILE).unlink(missing_ok=True)
    labels = {}
    for doc in PACKAGES:
        labels.update({relpath(page, dest): doc.label for page in build_package(doc, dest, cache)})
    write_index(dest)
    text = json.dumps(labels, ensure_ascii=False, indent=1, sort_keys=True)
    write_file(dest / LABELS_FILE, text.encode("utf-8"))
    return labels


# --- checks -----------------------------------------------------------------------


class _LinkParser(HTMLParser):
    """Collects ``(tag, url)`` of every ``href`` and ``src`` attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links.extend((tag, value) for name, value in attrs if name in ("href", "src") and value)


def page_links(path: Path) -> list[tuple[str, str]]:
    """``(tag, url)`` of the links and resources of the page at ``path``."""
    parser = _LinkParser()
    parser.feed(path.read_text("utf-8", errors="replace"))
    return parser.links


def local_target(page: str, url: str) -> str | None:
    """The path (relative to DEST) that a relative ``url`` of ``page`` points at, or
    None for an absolute URL, a same-page fragment or a ``/``-rooted path."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
        return None
    joined = os.path.normpath(PurePosixPath(page).parent / unquote(parts.path))
    return joined.replace(os.sep, "/")


def is_served(path: Path) -> bool:
    """Whether a static server answers ``path``: a file, or a directory with an index."""
    return path.is_file() or (path / INDEX_FILE).is_file()


def broken_links(dest: Path, labels: dict[str, str] | None = None) -> dict[str, Counter[str]]:
    """Per label, the relative links that resolve to no file in ``dest``, counted as
    ``pages`` (``<a href>``) and ``assets`` (everything else), and the ``ok`` ones."""
    dest = Path(dest)
    labels = labels if labels is not None else build_corpus(dest)
    counts: dict[str, Counter[str]] = {doc.label: Counter() for doc in PACKAGES}
    for page, label in labels.items():
        for tag, url in page_links(dest / page):
            target = local_target(page, url)
            if target is None:
                continue
            found = not target.startswith("..") and is_served(dest / target)
            counts[label]["ok" if found else "pages" if tag == "a" else "assets"] += 1
    return counts


def summary(dest: Path, labels: dict[str, str]) -> list[str]:
    """One line per label: pages, their megabytes, and the broken relative links."""
    broken = broken_links(dest, labels)
    lines = []
    for doc in PACKAGES:
        pages = [dest / path for path, label in labels.items() if label == doc.label]
        megabytes = sum(page.stat().st_size for page in pages) / 1e6
        counts = broken[doc.label]
        lines.append(
            f"  {doc.label:<12} {len(pages):>4} pages {megabytes:6.2f} MB   broken links: "
            f"{counts['pages']} to pages, {counts['assets']} to assets ({counts['ok']} resolve)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """CLI: build the corpus in DEST and print what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="directory to build the corpus in")
    args = parser.parse_args(argv)
    started = time.monotonic()
    labels = build_corpus(args.dest)
    elapsed = time.monotonic() - started
    print(f"corpus in {args.dest}: {len(labels)} pages, built in {elapsed:.1f} s")
    for label, path in entry_pages(args.dest).items():
        print(f"  entry {label:<12} {path}")
    print("\n".join(summary(args.dest, labels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

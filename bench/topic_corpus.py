"""Real-world, labelled web corpora for evaluating a topic-focused crawl.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/topic_corpus.py [--only NAME,...] [DEST]

Each corpus is one static site built from Debian documentation packages, fetched with
``apt-get download`` (Debian's mirrors are the only network used) and unpacked with
``dpkg -x``. Every page carries its site's template (header, navigation, footer), and
the site falls into sibling sections that share much of their vocabulary. A page's
label is its section, read from the package's own structure, so nobody here labelled
anything:

=============  ===============================  =====================================
corpus         packages                         a page's label
=============  ===============================  =====================================
gimp           gimp-help-zh-cn                  its part of the GIMP manual (DocBook
                                                ``rel="up"`` chain: the ancestor just
                                                below the home page); Chinese menus and
                                                titles over many English bodies
postgresql     postgresql-doc-15                its part of the PostgreSQL manual
                                                (Tutorial, The SQL Language, Server
                                                Administration...: the navigation
                                                header's "Up" chain); English
handbook       debian-handbook (zh-CN)          its chapter (``rel="up"`` chain)
install        installation-guide-amd64 (zh_CN) its chapter or appendix (``rel="up"``)
debian-zh      debian-reference-zh-cn,          its package: four manuals, side by side
               lilypond-doc-html-zh,            on one site
               debian-faq-zh-cn,
               maint-guide-zh-cn
python         python3.11-doc                   its top directory (library, reference,
                                                tutorial...): English
=============  ===============================  =====================================

``DEST/<corpus>/`` holds the site: only the pages (no images, styles or scripts; the
crawler fetches none of them), copied with their relative links as shipped; for the
Chinese corpora only Chinese pages are kept (``name.zh.html``, ``<html lang="zh">``, or
a tenth of the letters CJK); ``.html.gz`` is decompressed. ``DEST/<corpus>/index.html``
links to every section's start page, and ``corpus.json`` holds the labels (page path
relative to the site, with ``/``, to its label) and each section's start page. It is
written last: when it is there and every page it lists exists, :func:`build_corpus`
returns it as is. The ``.deb`` files are kept in ``bench/.cache/debs/``, so that a
rebuild downloads nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from html import escape, unescape
from pathlib import Path, PurePosixPath

CACHE = Path(__file__).resolve().parent / ".cache"
DEB_CACHE = CACHE / "debs"
CORPORA_DIR = CACHE / "topic-corpora"
CORPUS_FILE = "corpus.json"
INDEX_FILE = "index.html"
OTHER = "-"  # the label of pages outside every section (home page, indexes)
HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz")

# "name.zh-cn.html", "name.zh.html.gz"...: the language tag before the HTML suffix.
_LANG_IN_NAME = re.compile(r"\.([a-z]{2,3}(?:[-_][a-z]{2,4})?)\.html?(?:\.gz)?$", re.IGNORECASE)
_LANG_ATTR = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?([a-z]{2,3})", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_UP_LINK = re.compile(r"<link\b[^>]*\brel=[\"']up[\"'][^>]*>", re.IGNORECASE)
# DocBook's chunked HTML without <link rel="up">: the navigation header's "Up" link.
_UP_ANCHOR = re.compile(r"<a\b[^>]*\baccesskey=[\"']u[\"'][^>]*>", re.IGNORECASE)
_HREF = re.compile(r"\bhref=[\"']([^\"'#]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Source:
    """One package's HTML tree, copied to ``into`` inside the site."""

    package: str
    root: str  # the tree copied, relative to the package's filesystem
    into: str = ""  # its directory in the site
    entry: str = ""  # its start page, relative to ``root`` (the "source" labelling)
    label: str = ""  # its pages' label (the "source" labelling)
    # Only Chinese pages, where the tree holds other languages too. A tree of one
    # language is copied whole: many of its pages are left untranslated, in English
    # under Chinese menus and titles.
    chinese_only: bool = False


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    sources: tuple[Source, ...]
    labelling: str  # "up" (DocBook rel=up chain), "dir" (top directory) or "source"
    up_depth: int = 1  # "up": the level below the home page that makes a section


DEBIAN_BOOKS = (
    Source("debian-handbook", "usr/share/doc/debian-handbook/html/zh-CN", "handbook", "index.html", "handbook"),
    Source("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/zh_CN", "install", "index.html",
           "install"),
    Source("debian-reference-zh-cn", "usr/share/debian-reference", "reference", "index.zh-cn.html", "reference",
           chinese_only=True),
    Source("debian-faq-zh-cn", "usr/share/doc/debian/FAQ/zh-cn", "faq", "index.zh-cn.html", "faq", chinese_only=True),
    Source("maint-guide-zh-cn", "usr/share/doc/maint-guide-zh-cn/html", "maint-guide", "index.zh-cn.html",
           "maint-guide", chinese_only=True),
)
SPECS: dict[str, CorpusSpec] = {spec.name: spec for spec in (
    CorpusSpec("gimp", (Source("gimp-help-zh-cn", "usr/share/gimp/2.0/help/zh_CN"),), "up", up_depth=2),
    CorpusSpec("lilypond", (Source("lilypond-doc-html-zh", "usr/share/doc/lilypond/html/Documentation",
                                   chinese_only=True),), "dir"),
    CorpusSpec("debian-books", DEBIAN_BOOKS, "source"),
    CorpusSpec("python", (Source("python3.11-doc", "usr/share/doc/python3.11/html"),), "dir"),
    CorpusSpec("postgresql", (Source("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html"),), "up"),
)}


@dataclass(frozen=True)
class Corpus:
    name: str
    root: Path
    labels: dict[str, str]  # page path relative to root, with "/" -> label (OTHER outside every section)
    starts: dict[str, str]  # label -> its section's start page

    def pages_of(self, label: str) -> list[str]:
        return sorted(path for path, page_label in self.labels.items() if page_label == label)

    def sizes(self) -> Counter[str]:
        return Counter(label for label in self.labels.values() if label != OTHER)


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


# --- choosing and copying pages ---------------------------------------------------


def is_html(path: Path) -> bool:
    return path.name.lower().endswith(HTML_SUFFIXES)


def read_html(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def is_chinese_page(name: str, data: bytes) -> bool:
    """By the language tag of its file name, else by its ``<html lang>``, else by a
    tenth or more of its letters being CJK ideographs."""
    tagged = _LANG_IN_NAME.search(name)
    if tagged:
        return tagged.group(1).lower().startswith("zh")
    declared = _LANG_ATTR.search(data[:4096])
    if declared:
        return declared.group(1).lower() == b"zh"
    text = data.decode("utf-8", errors="replace")
    letters = sum(1 for char in text if char.isalpha())
    return letters > 0 and len(_CJK.findall(text)) * 10 >= letters


def copy_pages(src: Path, dst: Path, chinese_only: bool) -> list[Path]:
    """Copy the pages under ``src`` to ``dst`` as regular files (``.gz`` decompressed,
    symbolic links followed, dangling ones skipped); return the pages written."""
    written = []
    for path in sorted(src.rglob("*")):
        if not (path.is_file() and is_html(path)):
            continue
        name = path.name.removesuffix(".gz")
        data = read_html(path)
        if chinese_only and not is_chinese_page(name, data):
            continue
        target = dst / path.relative_to(src).with_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written


# --- labels -----------------------------------------------------------------------


def up_link(root: Path, page: str) -> str | None:
    """The page a DocBook page's ``<link rel="up">`` (or its navigation header's "Up"
    link) names, relative to ``root``."""
    head = (root / page).read_text("utf-8", errors="replace")[:8192]
    tag = _UP_LINK.search(head) or _UP_ANCHOR.search(head)
    href = _HREF.search(tag.group(0)) if tag else None
    if href is None:
        return None
    target = PurePosixPath(page).parent / unescape(href.group(1))
    return str(PurePosixPath(*[part for part in target.parts if part != "."]))


def label_by_up(root: Path, pages: list[str], depth: int) -> tuple[dict[str, str], dict[str, str]]:
    """Each page's ancestor ``depth`` levels below the home page (the page with no
    ``up``), named after its file; pages above that level are outside every section."""
    parent = {page: up_link(root, page) for page in pages}
    labels: dict[str, str] = {}
    for page in pages:
        chain = [page]  # the page, its parent, ... up to the home page
        while parent[chain[-1]] in parent and len(chain) <= len(pages):
            chain.append(parent[chain[-1]])  # type: ignore[arg-type]
        at_home = parent[chain[-1]] is None
        labels[page] = chain[-1 - depth] if at_home and len(chain) > depth else OTHER
    starts = {_section_name(start): start for start in set(labels.values()) - {OTHER}}
    return {page: _section_name(start) for page, start in labels.items()}, starts


def _section_name(page: str) -> str:
    return page if page == OTHER else PurePosixPath(page).name.split(".")[0]


def label_by_dir(root: Path, pages: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Each page's top directory; pages at the top are outside every section."""
    labels = {page: page.split("/", 1)[0] if "/" in page else OTHER for page in pages}
    starts = {}
    for label in set(labels.values()) - {OTHER}:
        own = sorted(page for page, page_label in labels.items() if page_label == label)
        index = [page for page in own if PurePosixPath(page).name.startswith("index.") and page.count("/") == 1]
        starts[label] = index[0] if index else min(own, key=lambda page: (page.count("/"), page))
    return labels, starts


# --- building ---------------------------------------------------------------------


def build_corpus(name: str, dest: Path = CORPORA_DIR, cache: Path = DEB_CACHE) -> Corpus:
    """The corpus ``name`` in ``dest/name``, built first unless it is complete already."""
    spec = SPECS[name]
    site = Path(dest) / name
    corpus = load_corpus(spec, site)
    if corpus is not None:
        return corpus
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    source_labels: dict[str, str] = {}
    source_starts: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix=f"topic-corpus-{name}-") as scratch:
        for source in spec.sources:
            unpacked = extract_deb(fetch_deb(source.package, cache), Path(scratch) / source.package) / source.root
            if not unpacked.is_dir():
                raise RuntimeError(f"{source.package} has no {source.root}/")
            written = copy_pages(unpacked, site / source.into, source.chinese_only)
            source_labels.update({path.relative_to(site).as_posix(): source.label for path in written})
            if source.entry:
                source_starts[source.label] = str(PurePosixPath(source.into) / source.entry)
    pages = sorted(source_labels)
    if spec.labelling == "up":
        labels, starts = label_by_up(site, pages, spec.up_depth)
    elif spec.labelling == "dir":
        labels, starts = label_by_dir(site, pages)
    else:
        labels, starts = source_labels, source_starts
    missing = [start for start in starts.values() if start not in labels]
    if missing:
        raise RuntimeError(f"{name}: start pages missing: {', '.join(missing)}")
    corpus = Corpus(name, site, labels, dict(sorted(starts.items())))
    _write_index(corpus)
    text = json.dumps({"spec": repr(spec), "labels": labels, "starts": corpus.starts}, ensure_ascii=False, indent=1,
                      sort_keys=True)
    (site / CORPUS_FILE).write_text(text, "utf-8")
    return corpus


def load_corpus(spec: CorpusSpec, site: Path) -> Corpus | None:
    """The corpus built in ``site`` if it is complete and built from ``spec``, else None."""
    try:
        data = json.loads((site / CORPUS_FILE).read_text("utf-8"))
        labels, starts = data["labels"], data["starts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if data.get("spec") != repr(spec) or not all((site / path).is_file() for path in labels):
        return None
    return Corpus(spec.name, site, labels, starts)


def page_title(path: Path) -> str:
    text = path.read_text("utf-8", errors="replace")
    found = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    title = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", found.group(1)))).strip() if found else ""
    return title or path.name


def _write_index(corpus: Corpus) -> None:
    """The site's root page: a link to each section's start page."""
    if INDEX_FILE in corpus.labels:
        return  # the package's own home page
    items = "\n".join(f'<li><a href="{escape(start)}">{escape(page_title(corpus.root / start))}</a></li>'
                      for start in corpus.starts.values())
    (corpus.root / INDEX_FILE).write_text(
        '<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n<meta charset="utf-8">\n<title>文档</title>\n</head>\n'
        f"<body>\n<ul>\n{items}\n</ul>\n</body>\n</html>\n", "utf-8")


def summary(corpus: Corpus) -> list[str]:
    sizes = corpus.sizes()
    lines = [f"{corpus.name}: {len(corpus.labels)} pages, {len(sizes)} sections "
             f"({corpus.labels and sum(1 for label in corpus.labels.values() if label == OTHER)} outside any)"]
    for label, count in sizes.most_common():
        start = corpus.root / corpus.starts[label]
        lines.append(f"  {label:<40} {count:>4}  {corpus.starts[label]}  {page_title(start)[:40]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, nargs="?", default=CORPORA_DIR)
    parser.add_argument("--only", default=",".join(SPECS))
    args = parser.parse_args(argv)
    for name in args.only.split(","):
        started = time.monotonic()
        corpus = build_corpus(name, args.dest)
        print(f"built in {time.monotonic() - started:.1f} s: " + "\n".join(summary(corpus)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

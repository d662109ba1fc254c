"""``scrapy search QUERY``: the stored pages that best match QUERY, ranked by BM25 over
the search index (:mod:`topicspider.search`), printed with title, URL, a snippet with
the matching words marked, the page's topic relevance and its e-mail addresses.

``--reindex`` first indexes the stored pages the index lacks (a database written before
the index existed). With ``WARC_DIR`` (:mod:`topicspider.middlewares.warc`),
``--archived`` says where each result's page is archived, and ``--archived-copy URL``
writes a page's archived response body to standard output, as served (decoded from its
Content-Encoding). A bad database gets one line and exit status 2.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topicspider.archive import Archived, ArchiveError, find_archived, read_archived
from topicspider.config import ConfigError
from topicspider.search.index import Results, reindex_missing, search
from topicspider.search.snippet import Piece
from topicspider.storage import StorageError, Store, open_store
from topicspider.urls import mask_url

if TYPE_CHECKING:
    import argparse

REINDEX_BATCH = 200
# Crawled text is hostile: no terminal control sequence of a page reaches the terminal.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BOLD, PLAIN = "\x1b[1m", "\x1b[0m"


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "QUERY [-n N] [--offset K] [--reindex] [--archived] [-s DATABASE_URL=...] | --archived-copy URL"

    def short_desc(self) -> str:
        return "Search the stored pages by keyword (Chinese, English or both)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-n", "--limit", type=int, default=10, help="results to show (default 10)")
        parser.add_argument("--offset", type=int, default=0, help="results to skip (default 0)")
        parser.add_argument("--reindex", action="store_true", help="index stored pages the index lacks first")
        parser.add_argument("--archived", action="store_true", help="say where each page is archived (WARC_DIR)")
        parser.add_argument("--archived-copy", metavar="URL", default="",
                            help="write URL's archived response body to standard output (WARC_DIR)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        query = " ".join(args).strip()
        assert self.settings is not None
        warc_dir = self.settings.get("WARC_DIR") or ""
        if (opts.archived or opts.archived_copy) and not warc_dir:
            raise UsageError("--archived and --archived-copy read the WARC files: give -s WARC_DIR=DIRECTORY")
        if opts.archived_copy:
            if query:
                raise UsageError("--archived-copy takes a URL, not a query")
            self.exitcode = write_archived_copy(Path(warc_dir), opts.archived_copy)
            return
        if not query and not opts.reindex:
            raise UsageError("give a query, e.g. scrapy search 新闻")
        if opts.limit < 1 or opts.offset < 0:
            raise UsageError("-n must be at least 1 and --offset at least 0")
        database_url: str = self.settings.get("DATABASE_URL") or ""
        try:
            store = open_store(database_url)
        except ConfigError as exc:
            sys.stderr.write(f"topicspider: error: {exc}\n")
            self.exitcode = 2
            return
        try:
            if opts.reindex:
                print(f"Indexed {self._reindex(store)} pages in {mask_url(database_url)}")
            if query:
                results = store.transaction(lambda cursor, dialect: search(cursor, dialect, query, opts.limit, opts.offset))
                archived = (find_archived(Path(warc_dir), {hit.url for hit in results.hits}) if opts.archived
                            else None)
                sys.stdout.write(render(results, sys.stdout.isatty(), archived))
        except StorageError as exc:
            sys.stderr.write(f"topicspider: error: {mask_url(database_url)}: {exc}\n")
            self.exitcode = 1
        finally:
            store.close()

    @staticmethod
    def _reindex(store: Store) -> int:
        total = 0
        while True:
            done = reindex_missing(store.transaction, REINDEX_BATCH)
            total += done
            if done < REINDEX_BATCH:
                return total


def write_archived_copy(directory: Path, url: str) -> int:
    """Write ``url``'s archived body to standard output; the exit status."""
    if sys.stdout.isatty():  # crawled bytes never reach the terminal
        sys.stderr.write("topicspider: error: --archived-copy writes the page's bytes: redirect it to a file\n")
        return 2
    entry = find_archived(directory, {url}).get(url)
    if entry is None:
        sys.stderr.write(f"topicspider: error: {clean(url)!r} is not in the archive under {str(directory)!r}\n")
        return 1
    try:
        copy = read_archived(directory, entry)
    except ArchiveError as exc:
        sys.stderr.write(f"topicspider: error: {clean(str(exc))}\n")
        return 1
    sys.stdout.buffer.write(copy.body)
    sys.stdout.flush()
    return 0


def render(results: Results, bold: bool, archived: dict[str, Archived] | None = None) -> str:
    """The results as terminal text; matches in bold on a terminal, else [in brackets];
    with ``archived``, where each page is archived."""
    if not results.terms:
        return f"No searchable words in {clean(results.query)!r} (words of one character and stopwords are not indexed)\n"
    if not results.hits:
        return f"No stored page matches {clean(results.query)!r} (terms: {', '.join(results.terms)})\n"
    first, last = results.offset + 1, results.offset + len(results.hits)
    lines = [f"{results.total} pages match {clean(results.query)!r} (terms: {', '.join(results.terms)}); "
             f"{first}-{last}:", ""]
    for rank, hit in enumerate(results.hits, start=first):
        relevance = "-" if hit.relevance is None else f"{hit.relevance:.2f}"
        lines.append(f"{rank:>3}. {marked(hit.title_pieces, bold) or '(no title)'}")
        lines.append(f"     {clean(hit.url)}")
        lines.append(f"     score {hit.score:.3f} · relevance {relevance} · fetched {hit.fetched_at}")
        if hit.snippet:
            lines.append(f"     {marked(hit.snippet, bold)}")
        if hit.emails:
            lines.append(f"     e-mails: {clean(', '.join(hit.emails))}")
        if archived is not None:
            entry = archived.get(hit.url)
            lines.append(f"     archived: {clean(entry.file)} at byte {entry.offset} (HTTP {entry.status}, {entry.date})"
                         if entry else "     archived: not in the archive")
        lines.append("")
    return "\n".join(lines) + "\n"


def clean(text: str) -> str:
    return CONTROL_CHARACTERS.sub(" ", text)


def marked(pieces: list[Piece], bold: bool) -> str:
    start, end = (BOLD, PLAIN) if bold else ("[", "]")
    return "".join(f"{start}{clean(p.text)}{end}" if p.match else clean(p.text) for p in pieces)

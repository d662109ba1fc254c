"""Site templates, with no Scrapy dependency: the blocks of text a site repeats on most
of its pages (header, navigation, footer, language selector), learnt from pages sampled
on the site before scoring starts.

A block (:func:`topicspider.extract.extract_blocks`) found on at least
``TOPIC_BOILERPLATE_SHARE`` of a site's sampled pages, and on at least
:data:`MIN_TEMPLATE_PAGES` of them, belongs to the site's template and carries no topic
weight there. Blocks compare by their lower-cased text. A page read from a local file
has no site: the blocks of every site's template are taken out of it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

MIN_TEMPLATE_PAGES = 3
# A longer block is page content, whatever repeats it.
MAX_TEMPLATE_BLOCK_CHARS = 2000


@dataclass(frozen=True)
class SiteTemplates:
    """Site -> the lower-cased blocks of its template."""

    sites: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @cached_property
    def every_site(self) -> frozenset[str]:
        return frozenset().union(*self.sites.values())

    def _template(self, site: str) -> frozenset[str]:
        return self.sites.get(site, frozenset()) if site else self.every_site

    def content(self, site: str, blocks: Sequence[str]) -> list[str]:
        """``blocks`` without those of ``site``'s template ("" for no site: every site's)."""
        template = self._template(site)
        if not template:
            return list(blocks)
        return [block for block in blocks if block.lower() not in template]

    def template_blocks(self, site: str, blocks: Sequence[str]) -> list[str]:
        """The blocks of ``blocks`` that are ``site``'s template: what :meth:`content` leaves out."""
        template = self._template(site)
        return [block for block in blocks if block.lower() in template] if template else []

    def text_content(self, site: str, text: str) -> str:
        """``text`` (blocks joined, as pages are stored) without the template's blocks,
        lower-cased."""
        text = text.lower()
        for block in sorted(self._template(site), key=len, reverse=True):
            text = text.replace(block, " ")
        return text

    def __len__(self) -> int:
        return sum(len(blocks) for blocks in self.sites.values())


def learn_templates(pages: Iterable[tuple[str, Sequence[str]]], share: float,
                    minimum: int = MIN_TEMPLATE_PAGES) -> SiteTemplates:
    """The templates of the sites of ``pages``, each a ``(site, blocks)`` pair."""
    seen: dict[str, Counter[str]] = {}
    sampled: Counter[str] = Counter()
    for site, blocks in pages:
        sampled[site] += 1
        seen.setdefault(site, Counter()).update({block.lower() for block in blocks if len(block) <= MAX_TEMPLATE_BLOCK_CHARS})
    templates = {}
    for site, counts in seen.items():
        needed = max(minimum, math.ceil(share * sampled[site]))
        blocks = frozenset(block for block, pages_with in counts.items() if pages_with >= needed)
        if blocks:
            templates[site] = blocks
    return SiteTemplates(templates)

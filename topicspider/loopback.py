"""A DNS resolver for local test sites: the host names listed in the environment
variable ``TOPICSPIDER_LOOPBACK_HOSTS`` (comma-separated) resolve to 127.0.0.1, every
other name as usual. It lets tests crawl several named hosts of one site
(``www.example.com.cn``, ``bbs.example.com.cn``) without touching the network.

Enabled by ``DNS_RESOLVER = "topicspider.loopback.LoopbackResolver"``; never by default.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from scrapy.resolver import CachingThreadedResolver
from twisted.internet.defer import Deferred, succeed


class LoopbackResolver(CachingThreadedResolver):
    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:  # noqa: N802 - Twisted's name
        listed = os.environ.get("TOPICSPIDER_LOOPBACK_HOSTS", "")
        if name.lower() in {host.strip().lower() for host in listed.split(",") if host.strip()}:
            return succeed("127.0.0.1")
        return super().getHostByName(name, timeout)

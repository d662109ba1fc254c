"""A private network of "machines" on one Linux host, for the tests and benchmarks of a
distributed crawl: each worker runs in a network namespace of its own, joined by a veth
link to a bridge where the servers (Redis, MariaDB, the sites) listen, as separate
machines on a LAN would be. No Scrapy dependency; nothing in a crawl uses it.

Needs root (or ``CAP_NET_ADMIN``) and iproute2's ``ip``; :func:`unavailable_reason` says
why a machine cannot have one. The bridge takes a /24 of 198.18.0.0/15 (the range RFC
2544 sets aside for benchmarks, so no real network is shadowed) that no route uses yet,
chosen at random (``.1`` and the site addresses on the bridge, ``.101`` and up the
workers), and every name carries a random tag, so that networks made at once (a test
and a benchmark) do not meet. :meth:`VethNetwork.close` removes all of it; so does deleting the namespaces and
the bridge by hand (``ip netns list``, ``ip link show type bridge``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

FIRST_WORKER = 101  # workers' last octet; site addresses come after the hub's .1


def unavailable_reason() -> str | None:
    """Why this machine cannot make a :class:`VethNetwork`, or None when it can."""
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's ip command"
    if os.geteuid() != 0:
        return "network namespaces and veth links need root (CAP_NET_ADMIN)"
    return None


def _free_subnet() -> str:
    """A /24 of 198.18.0.0/15 (RFC 2544's benchmarking range: no real network uses it)
    that no route of this machine touches yet, as its first three octets."""
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, timeout=30).stdout
    for _ in range(100):
        subnet = f"198.{18 + secrets.randbelow(2)}.{secrets.randbelow(256)}"
        if f"{subnet}." not in routes:
            return subnet
    raise RuntimeError("no free /24 in 198.18.0.0/15 for a test network")


def _ip(*arguments: str) -> None:
    done = subprocess.run(["ip", *arguments], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(arguments)}: {done.stderr.strip()}")


@dataclass
class VethNetwork:
    """A bridge (the LAN) with ``hub`` and ``sites`` addresses on it, and one namespace
    per worker, each with a veth link to the bridge and a default route through it."""

    workers: int
    sites: int = 0
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    subnet: str = field(default_factory=lambda: _free_subnet())
    made: list[tuple[str, str]] = field(default_factory=list)  # ("netns"|"link", name), to remove

    @property
    def bridge(self) -> str:
        return f"tsb{self.tag}"

    @property
    def hub(self) -> str:
        """The servers' address, on the bridge (the host's own namespace)."""
        return f"{self.subnet}.1"

    def site_address(self, number: int) -> str:
        return f"{self.subnet}.{2 + number}"

    def worker_address(self, number: int) -> str:
        return f"{self.subnet}.{FIRST_WORKER + number}"

    def namespace(self, number: int) -> str:
        return f"tsn{self.tag}w{number}"

    def open(self) -> VethNetwork:
        if self.sites > FIRST_WORKER - 2 or self.workers > 254 - FIRST_WORKER:
            raise ValueError(f"too many sites ({self.sites}) or workers ({self.workers}) for one /24")
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self.made.append(("link", self.bridge))
            for address in [self.hub, *map(self.site_address, range(self.sites))]:
                _ip("addr", "add", f"{address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for number in range(self.workers):
                self._add_worker(number)
        except BaseException:
            self.close()
            raise
        return self

    def _add_worker(self, number: int) -> None:
        namespace, outside, inside = self.namespace(number), f"tsh{self.tag}{number}", f"tsw{self.tag}{number}"
        _ip("netns", "add", namespace)
        self.made.append(("netns", namespace))
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        self.made.append(("link", outside))  # its peer goes with it
        _ip("link", "set", inside, "netns", namespace)
        _ip("link", "set", outside, "master", self.bridge, "up")
        _ip("-n", namespace, "addr", "add", f"{self.worker_address(number)}/24", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "route", "add", "default", "via", self.hub)

    def command(self, number: int, command: Sequence[str]) -> list[str]:
        """``command``, run inside worker ``number``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(number), *command]

    def close(self) -> None:
        for kind, name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name],
                           capture_output=True, timeout=30, check=False)
        self.made.clear()

    def __enter__(self) -> VethNetwork:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

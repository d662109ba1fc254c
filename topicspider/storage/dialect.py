"""The SQL differences between the backends that share statements: the driver's
parameter marker. Shared statements are written with ``?`` and stick to SQL both
SQLite and MySQL/MariaDB take (``REPLACE INTO`` included)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str
    mark: str  # the driver's parameter marker

    def sql(self, statement: str) -> str:
        """``statement`` written with ``?`` markers, in this driver's style."""
        return statement if self.mark == "?" else statement.replace("?", self.mark)

    def marks(self, count: int) -> str:
        return ",".join([self.mark] * count)


SQLITE = Dialect("sqlite", "?")
MYSQL = Dialect("mysql", "%s")

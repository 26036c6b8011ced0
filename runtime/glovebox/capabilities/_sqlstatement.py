"""What the host's SQL classifiers (``_sqlcheck`` for SQLite, ``_pgcheck`` for PostgreSQL) make of a
statement, and how they refuse one: the types both share, apart so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SEVERITY_ORDER", "SqlRefused", "Statement"]

#: Kinds from the most to the least dangerous: a statement reports the first it holds.
SEVERITY_ORDER = ("other", "ddl", "delete", "update", "insert", "select")


class SqlRefused(Exception):
    """The host refuses a statement; ``details`` say why (kind, table, column, function)."""

    def __init__(self, reason: str, details: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


@dataclass(frozen=True)
class Statement:
    """What one statement does, as the host read it."""

    #: The most dangerous kind it holds (see :data:`SEVERITY_ORDER`).
    kind: str
    #: Every kind it holds (a SELECT over a deleting CTE holds select and delete).
    kinds: frozenset[str]
    #: Tables and views it names (lower case, CTE names left out).
    tables: tuple[str, ...]
    #: Functions it calls (SQLite's names, lower case).
    functions: tuple[str, ...]
    #: The statement with literals replaced by ``?`` (for the audit log).
    fingerprint: str
    #: (table or None when unqualified, column) pairs it names.
    columns: tuple[tuple[str | None, str], ...] = ()
    #: Tables it reads every column of (``*``), and the columns an INSERT names per table.
    star: bool = False
    insert_columns: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    #: Names the statement itself defines (select aliases), allowed as bare columns.
    aliases: frozenset[str] = frozenset()
    #: Table alias (or name) -> table.
    table_aliases: dict[str, str] = field(default_factory=dict)
    #: Names of the common table expressions it defines.
    ctes: frozenset[str] = frozenset()
    #: The engine whose grammar read it: ``sqlite`` or ``postgresql``.
    engine: str = "sqlite"
    #: It reads the description of the tables it names (``PRAGMA table_info``): every column's
    #: name, so it is refused on a table whose columns the grant restricts.
    describes: bool = False
    #: The catalog it reads, beyond the tables it names (``information_schema.columns``,
    #: ``pg_catalog.pg_class``, ``PRAGMA index_info``): it describes every table, so it needs
    #: a grant of every table (``tables: ["*"]``) with no column restrictions.
    catalog: tuple[str, ...] = ()

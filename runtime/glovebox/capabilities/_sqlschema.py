"""Reading a SQLite database's schema: the statements that only describe it, as the classifier sees them.

``PRAGMA table_info``, ``table_xinfo``, ``index_list`` and ``foreign_key_list`` of a
table (a name or a string as the one argument, ``(t)`` or ``= t``, on ``main`` or no
schema) are ``select`` statements on that table that ``describe`` it;
``index_info``/``index_xinfo`` name an index, so they read the ``catalog``. Every
other pragma is left to the classifier (kind ``other``). :func:`explained` finds
``EXPLAIN`` and ``EXPLAIN QUERY PLAN`` with a plain scan of SQLite's whitespace and
comments (no regex), so the classifier judges the statement they explain.
"""

from __future__ import annotations

from typing import Any

from ._sqlstatement import SqlRefused, Statement

__all__ = ["INDEX_PRAGMAS", "TABLE_PRAGMAS", "explained", "introspection"]

#: Pragmas that only describe the table they name (SQLite): any argument, ``(t)`` or ``= t``, is a table name.
TABLE_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "foreign_key_list"})
#: Pragmas that only describe the index they name: they read the catalog (the index's table is unknown here).
INDEX_PRAGMAS = frozenset({"index_info", "index_xinfo"})

_SPACE = " \t\n\f\r"


def _skip(text: str, at: int) -> int:
    """The index of the first character at or after ``at`` that is neither SQLite whitespace nor in a comment."""
    while at < len(text):
        if text[at] in _SPACE:
            at += 1
        elif text.startswith("--", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end + 1
        elif text.startswith("/*", at):
            end = text.find("*/", at + 2)
            at = len(text) if end < 0 else end + 2
        else:
            break
    return at


def _word(text: str, at: int, word: str) -> int | None:
    """The index after ``word`` (any case) at ``at`` when whitespace or a comment follows it, else None."""
    end = at + len(word)
    if text[at:end].upper() != word or end >= len(text):
        return None
    return end if text[end] in _SPACE or text.startswith(("--", "/*"), end) else None


def explained(text: str) -> tuple[str, str] | None:
    """``("EXPLAIN QUERY PLAN", the statement it explains)`` for an EXPLAIN, else None (a plain scan: no regex)."""
    after = _word(text, _skip(text, 0), "EXPLAIN")
    if after is None:
        return None
    start = _skip(text, after)
    query = _word(text, start, "QUERY")
    if query is not None:
        plan = _word(text, _skip(text, query), "PLAN")
        if plan is not None:
            return "EXPLAIN QUERY PLAN", text[_skip(text, plan) :]
    return "EXPLAIN", text[start:]


def introspection(tree: Any, exp: Any, fingerprint: str) -> Statement | None:
    """A pragma that only describes a table or an index, as a read of it (None: any other pragma)."""
    target = tree.this
    if not isinstance(target, exp.EQ):
        return None  # no argument: a pragma that reads or sets a setting
    name_node, argument = target.this, target.expression
    schema = None
    if isinstance(name_node, exp.Dot) and isinstance(name_node.this, exp.Var):
        schema, name_node = str(name_node.this.name).lower(), name_node.expression
    if not isinstance(name_node, exp.Var):
        return None
    pragma = str(name_node.name).lower()
    if pragma not in TABLE_PRAGMAS | INDEX_PRAGMAS:
        return None
    if isinstance(argument, exp.Column) and isinstance(argument.this, exp.Identifier) and not argument.table:
        named = str(argument.name).lower()
    elif isinstance(argument, exp.Literal) and argument.is_string:
        named = str(argument.this).lower()
    else:
        return None
    if schema not in (None, "main"):
        raise SqlRefused(
            f"PRAGMA {schema}.{pragma} names the database {schema!r}: only the granted database is reachable",
            {"kind": "unknown", "table": f"{schema}.{named}"},
        )
    table = pragma in TABLE_PRAGMAS
    return Statement(
        kind="select",
        kinds=frozenset({"select"}),
        tables=(named,) if table else (),
        functions=(),
        fingerprint=fingerprint,
        describes=table,
        catalog=() if table else (f"pragma {pragma}",),
    )

"""One SQL statement, parsed and judged on the host before any database sees it.

:func:`classify` parses the text with ``sqlglot`` (SQLite dialect) and walks
the whole tree — common table expressions (data-modifying ones too),
subqueries, ``SELECT ... INTO``, locking clauses — collecting every kind of
statement in it, every table, column and function it names, and a
fingerprint (the statement with its literals replaced by ``?``). It refuses
text that does not parse, holds more than one statement, holds a MySQL
executable comment (``/*! ... */``) or only parses as an opaque command.

:func:`judge` holds a :class:`Statement` to a :class:`~glovebox.model._grants.SqlRule`:
each kind's action (``block`` refuses at once, never offered for approval),
the tables, the columns (where the rule restricts a table's), and the
functions (the host's :data:`SAFE_FUNCTIONS` plus the rule's own). A refusal
is a :class:`SqlRefused` whose ``details`` name the kind and the table,
column or function refused.

Reading the schema is a read: ``PRAGMA table_info``, ``table_xinfo``,
``index_list`` and ``foreign_key_list`` of a table (with a name or a string as
their one argument) are ``select`` statements on that table, refused on a
table whose columns the grant restricts; ``index_info``/``index_xinfo`` name an
index, not a table, so they read the catalog and need every table granted.
Every other pragma (``PRAGMA x = y``, ``writable_schema``, ``user_version``,
``journal_mode``, ...) stays ``other``. ``EXPLAIN`` and ``EXPLAIN QUERY PLAN``
(which never run the statement on SQLite) are judged as the statement they
explain: ``EXPLAIN QUERY PLAN DELETE ...`` needs what the ``DELETE`` needs
(see ``_sqlschema``).

The engine checks again (see ``_sqlite``): what this module misreads, the
database's own authorizer still refuses.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from typing import Any

from ..model._grantrules import sql_kind_phrase
from ..model._grants import SqlRule
from ._sqlschema import explained, introspection
from ._sqlstatement import SEVERITY_ORDER, SqlRefused, Statement

__all__ = [
    "MAX_STATEMENT_CHARS",
    "SAFE_FUNCTIONS",
    "SEVERITY_ORDER",
    "SqlRefused",
    "Statement",
    "classify",
    "judge",
]

#: Accepted statements whose classification is kept (the text is the key).
CACHED_STATEMENTS = 1024
#: The longest statement the host parses.
MAX_STATEMENT_CHARS = 64 * 1024
_ACTION_RANK = {"allow": 0, "require_approval": 1, "block": 2}

#: Functions every grant allows (SQLite's names): pure computations on values.
#: Left out on purpose: load_extension, readfile/writefile/edit (the CLI's), fts3_tokenizer,
#: zeroblob/randomblob (memory), sqlite_* introspection, and table-valued pragma_* functions.
SAFE_FUNCTIONS = frozenset(
    {
        "abs", "avg", "count", "max", "min", "sum", "total", "group_concat", "string_agg",
        "coalesce", "ifnull", "iif", "nullif", "length", "octet_length", "lower", "upper",
        "trim", "ltrim", "rtrim", "substr", "substring", "replace", "instr", "round", "sign",
        "cast", "hex", "quote", "typeof", "unicode", "char", "printf", "format", "like", "glob",
        "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
        "ceil", "ceiling", "floor", "mod", "power", "pow", "sqrt", "random", "changes",
        "last_insert_rowid", "json", "json_extract", "json_array", "json_object",
        "json_array_length", "json_type", "json_valid", "json_quote", "json_group_array",
        "json_group_object", "row_number", "rank", "dense_rank", "percent_rank", "cume_dist",
        "ntile", "lag", "lead", "first_value", "last_value", "nth_value",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=CACHED_STATEMENTS)
def classify(text: str, engine: str = "sqlite") -> Statement:
    """Parse and classify ``text`` in the grammar of ``engine`` (a pure function of
    both: the last :data:`CACHED_STATEMENTS` accepted texts are kept, so a statement
    sent again with other parameters is not parsed again; a refused text is never kept).
    PostgreSQL statements are read by PostgreSQL's own parser (``_pgcheck``).

    Raises:
        SqlRefused: the text is too long, does not parse, holds more than one
            statement or a MySQL executable comment, or parses only as an opaque command.
    """
    if len(text) > MAX_STATEMENT_CHARS:
        raise SqlRefused(f"the statement is over {MAX_STATEMENT_CHARS} characters", {"kind": "unknown"})
    if "/*!" in text:
        raise SqlRefused("MySQL executable comments (/*! ... */) are refused", {"kind": "unknown"})
    if engine == "postgresql":
        from ._pgcheck import classify_postgres

        return classify_postgres(text)
    explaining = explained(text)
    if explaining is not None:
        prefix, inner = explaining
        if explained(inner) is not None:
            raise SqlRefused("EXPLAIN of an EXPLAIN is refused", {"kind": "other"})
        statement = classify(inner, engine)
        return dataclasses.replace(statement, fingerprint=f"{prefix} {statement.fingerprint}")
    try:
        import sqlglot  # the parser loads only when a statement is checked
        from sqlglot import exp
    except ImportError:
        raise SqlRefused(
            "the host cannot check SQL statements: install the sql extra (glovebox-runtime[sql])", {"kind": "unknown"}
        ) from None
    try:
        tokenizer, parser = _readers(sqlglot)
        tokens = tokenizer.tokenize(text)
        trees = [tree for tree in parser.parse(tokens, text) if tree is not None]
    except RecursionError:
        raise SqlRefused("the statement is nested too deeply to check", {"kind": "unknown"}) from None
    except Exception as exc:  # sqlglot's ParseError, TokenError and friends: unparseable is refused
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise SqlRefused(f"the statement does not parse: {reason}", {"kind": "unknown"}) from None
    if len(trees) != 1:
        raise SqlRefused(
            f"one statement per query: this text holds {len(trees)}", {"kind": "unknown", "statements": len(trees)}
        )
    tree = trees[0]
    if isinstance(tree, exp.Command):
        kind = "ddl" if str(tree.this).upper() in ("ALTER", "CREATE", "DROP") else "other"
        raise SqlRefused(
            f"{str(tree.this).upper()} statements cannot be fully checked and are refused",
            {"kind": kind, "statement": str(tree.this).upper()},
        )
    if isinstance(tree, exp.Pragma):
        described = introspection(tree, exp, _fingerprint(text, tokens))
        if described is not None:
            return described
    return _walk(tree, exp, _fingerprint(text, tokens))


_local = threading.local()


def _readers(sqlglot: Any) -> tuple[Any, Any]:
    """This thread's SQLite tokenizer and parser, made once per thread: making them (and looking the
    dialect up by name) on every statement cost as much as the parse itself. Each resets its state
    per call, so a thread reuses its own; threads never share one."""
    readers = getattr(_local, "readers", None)
    if readers is None:
        dialect = sqlglot.Dialect.get_or_raise("sqlite")
        readers = _local.readers = (dialect.tokenizer(), dialect.parser())
    return readers


class _Found:
    """What one walk of a sqlglot tree collects."""

    def __init__(self, kinds: set[str]) -> None:
        self.kinds = kinds
        self.ctes: set[str] = set()
        self.tables: list[str] = []
        self.functions: list[str] = []
        self.columns: list[tuple[str | None, str]] = []
        self.aliases: set[str] = set()
        self.table_aliases: dict[str, str] = {}
        self.star = False

    def add(self, role: int, node: Any, exp: Any) -> None:
        if role == _CTE:
            self.ctes.add(node.alias_or_name.lower())
        elif role == _TABLE and isinstance(node.this, exp.Identifier):
            name = _table(node)
            self.tables.append(name)
            self.table_aliases[node.alias_or_name.lower()] = name
        elif role == _FUNC:
            function = _function_name(node, exp)
            if function is not None:
                self.functions.append(function)
        elif role == _COLUMN:
            if isinstance(node.this, exp.Star):
                self.star = True
            else:
                self.columns.append((node.table.lower() or None, node.name.lower()))
        elif role == _STAR:
            self.star = True
        elif role == _ALIAS:
            self.aliases.add(node.alias.lower())


def _walk(tree: Any, exp: Any, fingerprint: str) -> Statement:
    found = _Found({_root_kind(tree, exp)})
    roles = _ROLES
    for node in tree.walk():
        cls = type(node)
        role = roles.get(cls)
        if role is None:
            role = roles[cls] = _role_of(node, exp)
        if role == _NOTHING:
            continue
        nested = _node_kind(node, exp)
        if nested is not None:
            found.kinds.add(nested)
        found.add(role, node, exp)
    insert_columns: dict[str, tuple[str, ...] | None] = {}
    if isinstance(tree, exp.Insert):
        target = tree.this
        table_node = target.this if isinstance(target, exp.Schema) else target
        if isinstance(table_node, exp.Table):
            named = tuple(col.name.lower() for col in target.expressions) if isinstance(target, exp.Schema) else None
            insert_columns[_table(table_node)] = named
    ctes, table_aliases = found.ctes, found.table_aliases
    real = tuple(dict.fromkeys(name for name in found.tables if name not in ctes))
    for alias in [alias for alias, name in table_aliases.items() if name in ctes]:
        del table_aliases[alias]
    return Statement(
        kind=next(kind for kind in SEVERITY_ORDER if kind in found.kinds),
        kinds=frozenset(found.kinds),
        tables=real,
        functions=tuple(dict.fromkeys(found.functions)),
        fingerprint=fingerprint,
        columns=tuple(dict.fromkeys(found.columns)),
        star=found.star,
        insert_columns=insert_columns,
        aliases=frozenset(found.aliases),
        table_aliases=table_aliases,
        ctes=frozenset(ctes),
    )


def _table(node: Any) -> str:
    schema = (node.db or "").lower()
    if node.catalog or schema not in ("", "main"):
        where = ".".join(part for part in (node.catalog, node.db) if part)
        raise SqlRefused(
            f"table {node.name!r} is qualified with the database {where!r}: only the granted database is reachable",
            {"kind": "unknown", "table": f"{where}.{node.name}".lower()},
        )
    return str(node.name).lower()


def _root_kind(tree: Any, exp: Any) -> str:
    if isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values, exp.Subquery)):
        return "select"
    return _node_kind(tree, exp) or "other"


_KINDS: dict[type, str | None] = {}


def _node_kind(node: Any, exp: Any) -> str | None:
    """The kind a node of the tree makes its statement hold (None: it adds none); kept per node type."""
    cls = type(node)
    if cls not in _KINDS:
        _KINDS[cls] = _kind_of(node, exp)
    return _KINDS[cls]


def _kind_of(node: Any, exp: Any) -> str | None:
    if isinstance(node, exp.Insert):
        return "insert"
    if isinstance(node, (exp.Update, exp.Merge, exp.Lock)):
        return "update"
    if isinstance(node, exp.Delete):
        return "delete"
    if isinstance(node, (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable, exp.Into)):
        return "ddl"
    if isinstance(node, (exp.Pragma, exp.Attach, exp.Detach, exp.Transaction, exp.Commit, exp.Rollback, exp.Command)):
        return "other"
    if isinstance(node, (exp.Set, exp.Use, exp.Analyze, exp.Copy, exp.LoadData)):
        return "other"
    return None


_NOTHING, _CTE, _TABLE, _FUNC, _COLUMN, _STAR, _ALIAS, _KIND_ONLY = range(8)
#: What the walk does with a node, per node type (a dict look-up instead of a chain of isinstance checks).
_ROLES: dict[type, int] = {}


def _role_of(node: Any, exp: Any) -> int:
    for cls, role in ((exp.CTE, _CTE), (exp.Table, _TABLE), (exp.Func, _FUNC), (exp.Column, _COLUMN),
                      (exp.Star, _STAR), (exp.Alias, _ALIAS)):  # fmt: skip
        if isinstance(node, cls):
            return role
    return _KIND_ONLY if _node_kind(node, exp) is not None else _NOTHING


_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_NAMES: dict[type, str | None] = {}


def _function_name(node: Any, exp: Any) -> str | None:
    """The name SQLite knows a function call by (None: syntax that calls no function, e.g. CASE)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    cls = type(node)
    if cls not in _NAMES:
        match = _CALL.match(node.sql(dialect="sqlite"))
        _NAMES[cls] = match.group(1).lower() if match else None
    return _NAMES[cls]


_LITERALS = ("STRING", "NUMBER", "HEX_STRING", "BIT_STRING", "BYTE_STRING", "NATIONAL_STRING", "RAW_STRING")
_NAMES_KEPT = ("VAR", "IDENTIFIER")
#: (literal token types, name token types), as TokenType members (an enum's .name is slow to read).
_TOKEN_SETS: list[tuple[frozenset[Any], frozenset[Any]]] = []
_TIGHT = ((" ,", ","), (" )", ")"), (" (", "("), ("( ", "("), (" . ", "."), (" ;", ";"))


def _fingerprint(text: str, tokens: list[Any]) -> str:
    """The statement with its literals replaced by ``?``, comments left out, keywords in upper case
    (made from the tokens the parse already read: rendering the tree again would cost more than the parse)."""
    if not tokens:
        return ""
    if not _TOKEN_SETS:
        names = type(tokens[0].token_type).__members__
        _TOKEN_SETS.append(
            (frozenset(names[n] for n in _LITERALS if n in names), frozenset(names[n] for n in _NAMES_KEPT))
        )
    literals, kept = _TOKEN_SETS[0]
    parts = []
    for token in tokens:
        kind = token.token_type
        if kind in literals:
            parts.append("?")
        elif kind in kept:
            parts.append(text[token.start : token.end + 1])
        else:
            parts.append(text[token.start : token.end + 1].upper())
    rendered = " ".join(parts)
    for loose, tight in _TIGHT:
        rendered = rendered.replace(loose, tight)
    return rendered


def judge(statement: Statement, rule: SqlRule) -> str:
    """``allow`` or ``require_approval`` for ``statement`` under ``rule``.

    Raises:
        SqlRefused: a kind the rule blocks, or a table, column or function it does not grant.
    """
    where = f"database {rule.database!r}"
    action = "allow"
    for kind in SEVERITY_ORDER:
        if kind not in statement.kinds:
            continue
        verdict = getattr(rule.actions, kind)
        if verdict == "block":
            raise SqlRefused(f"{sql_kind_phrase(kind, plural=True)} are blocked on {where}", {"kind": kind})
        if _ACTION_RANK[verdict] > _ACTION_RANK[action]:
            action = verdict
    base = {"kind": statement.kind}
    if "*" not in rule.tables:
        for table in statement.tables:
            if table not in rule.tables:
                raise SqlRefused(f"table {table!r} is not granted on {where}", {**base, "table": table})
    _judge_description(statement, rule, where, base)
    _judge_columns(statement, rule, where, base)
    if statement.engine == "postgresql":
        from ._pgcheck import PG_CATALOG_FUNCTIONS, PG_SAFE_FUNCTIONS

        for table in statement.tables:
            if table.startswith("pg_") and table not in rule.tables:
                raise SqlRefused(f"the system catalog {table!r} is not granted on {where}", {**base, "table": table})
        allowed = PG_SAFE_FUNCTIONS | set(rule.functions) | (PG_CATALOG_FUNCTIONS if statement.catalog else set())
    else:
        allowed = SAFE_FUNCTIONS | set(rule.functions)
    for function in statement.functions:
        if function not in allowed:
            raise SqlRefused(f"function {function}() is not allowed on {where}", {**base, "function": function})
    return action


def _judge_description(statement: Statement, rule: SqlRule, where: str, base: dict[str, Any]) -> None:
    """A description names every column of a table, and a catalog read describes every table."""
    if statement.describes:
        for table in statement.tables:
            if table in rule.columns:
                reason = f"table {table!r} grants only some columns on {where}: its description would name the others"
                raise SqlRefused(reason, {**base, "table": table})
    for catalog in statement.catalog:
        if "*" not in rule.tables or rule.columns:
            reason = (
                f"{catalog} describes every table: it needs a grant of every table (tables: ['*']) "
                f"with no column restrictions on {where}"
            )
            raise SqlRefused(reason, {**base, "table": catalog})


def _judge_columns(statement: Statement, rule: SqlRule, where: str, base: dict[str, Any]) -> None:
    restricted = {table: set(rule.columns[table]) for table in statement.tables if table in rule.columns}
    if not restricted:
        return
    if statement.star:
        table = next(iter(restricted))
        reason = f"table {table!r} grants only some columns on {where}: name them (no *)"
        raise SqlRefused(reason, {**base, "table": table})
    for table, named in statement.insert_columns.items():
        if table in restricted and (named is None or not set(named) <= restricted[table]):
            raise SqlRefused(
                f"an INSERT into {table!r} must name only its granted columns on {where}", {**base, "table": table}
            )
    bare = set().union(*restricted.values()) | statement.aliases
    for qualifier, column in statement.columns:
        owner = statement.table_aliases.get(qualifier, qualifier) if qualifier else None
        if owner is not None:
            if owner in restricted and column not in restricted[owner]:
                raise SqlRefused(
                    f"column {owner}.{column} is not granted on {where}", {**base, "table": owner, "column": column}
                )
        elif column not in bare:
            raise SqlRefused(f"column {column!r} is not granted on {where}", {**base, "column": column})

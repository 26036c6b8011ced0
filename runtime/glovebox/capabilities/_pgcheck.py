"""One PostgreSQL statement, parsed by PostgreSQL's own parser and classified on the host.

:func:`classify_postgres` parses the text with ``pglast`` (libpg_query: the
server's grammar, compiled in, so ``$1`` placeholders, dollar quoting,
``DO`` blocks and every statement the server knows parse exactly as the
server will parse them) and walks the whole tree, whatever the node types:

- the root statement gives the kind (``SelectStmt`` select, ``InsertStmt``
  insert, ``UpdateStmt`` update, ``DeleteStmt`` delete, ``MergeStmt`` all three,
  the ``Create*``/``Alter*``/``Drop*``/``Truncate``/``Rename`` family ddl,
  everything else — transactions, ``SET``, ``COPY``, ``DO``, ``CALL``,
  ``EXPLAIN``, ``LOCK``, ``PREPARE``, ``LISTEN`` … — other);
- a data-modifying statement anywhere (a CTE, a subquery) adds its kind, an
  ``INTO`` clause adds ddl, a locking clause (``FOR UPDATE``) adds update;
- every relation (``RangeVar``) is a table, every ``FuncCall`` a function (its
  last name: ``pg_catalog.pg_read_file`` is ``pg_read_file``), every
  ``ColumnRef`` a column.

Reading the schema is a read: ``EXPLAIN`` without ``ANALYZE`` (which plans the
statement and never runs it) is judged as the statement it explains, while
``EXPLAIN ANALYZE`` (which runs it), in any spelling, stays ``other``; the
``information_schema`` views and ``pg_catalog`` relations of
:data:`CATALOG_RELATIONS` (qualified, or for ``pg_catalog`` unqualified too) are
the statement's ``catalog``: they describe every table, so ``judge`` asks for a
grant of every table with no column restrictions, and allows on them the
catalog's formatting functions (:data:`PG_CATALOG_FUNCTIONS`). Every other
relation outside ``public`` (``pg_catalog.pg_shadow``, ``pg_settings``,
``pg_stat_activity``) is refused as before.

The result is the same :class:`~glovebox.capabilities._sqlcheck.Statement`
the SQLite classifier makes, judged by the same ``judge`` against
:data:`PG_SAFE_FUNCTIONS`. The engine checks again (see ``_postgres``).
"""

from __future__ import annotations

import json
from typing import Any

from ._sqlstatement import SEVERITY_ORDER, SqlRefused, Statement

__all__ = ["CATALOG_RELATIONS", "PG_CATALOG_FUNCTIONS", "PG_SAFE_FUNCTIONS", "classify_postgres"]

#: What schema introspection may read, per schema: the views and catalogs that describe tables,
#: columns, keys, indexes and types. Left out: roles and passwords (pg_authid, pg_shadow, pg_user),
#: settings and files (pg_settings, pg_file_settings, pg_hba_file_rules), other sessions
#: (pg_stat_*, pg_locks), function bodies (pg_proc, routines).
CATALOG_RELATIONS = {
    "information_schema": frozenset(
        {"tables", "columns", "views", "table_constraints", "key_column_usage", "referential_constraints",
         "constraint_column_usage", "constraint_table_usage", "check_constraints", "schemata", "sequences",
         "element_types", "domains"}
    ),
    "pg_catalog": frozenset(
        {"pg_class", "pg_attribute", "pg_index", "pg_constraint", "pg_namespace", "pg_type", "pg_attrdef",
         "pg_description", "pg_enum", "pg_inherits", "pg_am", "pg_tables", "pg_views", "pg_indexes",
         "pg_sequences", "pg_matviews"}
    ),
}  # fmt: skip
#: Functions a catalog read may call on top of the safe list: they format what the catalog holds.
PG_CATALOG_FUNCTIONS = frozenset(
    {"format_type", "pg_get_indexdef", "pg_get_constraintdef", "pg_get_viewdef", "pg_get_expr",
     "obj_description", "col_description", "pg_table_is_visible"}
)  # fmt: skip

#: Functions every PostgreSQL grant allows: pure computations on values (and the
#: names the grammar gives to SQL syntax such as EXTRACT, TRIM, SUBSTRING, POSITION).
#: Left out on purpose, among others: nextval/setval (writes), set_config/current_setting,
#: pg_read_file/pg_ls_dir/pg_stat_file, lo_*, dblink*, query_to_xml and the other *_to_xml,
#: pg_sleep, pg_terminate_backend, pg_advisory_*, pg_notify, txid_*, version.
PG_SAFE_FUNCTIONS = frozenset(
    {
        "abs", "avg", "count", "max", "min", "sum", "string_agg", "array_agg", "bool_and",
        "bool_or", "every", "length", "char_length", "character_length", "octet_length",
        "lower", "upper", "initcap", "btrim", "ltrim", "rtrim", "trim", "substr", "substring",
        "replace", "position", "strpos", "left", "right", "lpad", "rpad", "concat", "concat_ws",
        "split_part", "starts_with", "reverse", "repeat", "md5", "round", "trunc", "ceil",
        "ceiling", "floor", "mod", "power", "sqrt", "sign", "exp", "ln", "log", "div", "random",
        "now", "date_trunc", "date_part", "extract", "to_char", "to_date", "to_timestamp",
        "to_number", "age", "make_date", "make_timestamp", "make_interval", "timezone",
        "date_bin", "json_build_object", "jsonb_build_object", "json_build_array",
        "jsonb_build_array", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
        "to_json", "to_jsonb", "json_array_length", "jsonb_array_length", "json_typeof",
        "jsonb_typeof", "json_extract_path_text", "jsonb_extract_path_text", "array_length",
        "cardinality", "unnest", "generate_series", "row_number", "rank", "dense_rank",
        "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value",
        "nth_value", "gen_random_uuid",
    }
)  # fmt: skip

_SELECTS = frozenset({"SelectStmt"})
_ROOT_KINDS = {"SelectStmt": "select", "InsertStmt": "insert", "UpdateStmt": "update", "DeleteStmt": "delete"}
_DDL_PREFIXES = ("Create", "Alter", "Drop", "Truncate", "Rename", "Index", "View", "Comment", "Grant", "Reindex")
_MODIFYING = {"InsertStmt": "insert", "UpdateStmt": "update", "DeleteStmt": "delete"}
_SPECIAL = frozenset(
    {*_MODIFYING, "MergeStmt", "intoClause", "lockingClause", "RangeVar", "relation", "rel", "FuncCall",
     "ColumnRef", "CommonTableExpr", "ResTarget"}
)  # fmt: skip
_CONSTANTS = frozenset({"SCONST", "ICONST", "FCONST", "BCONST", "XCONST", "USCONST"})
_COMMENTS = frozenset({"SQL_COMMENT", "C_COMMENT"})
_PUBLIC = ("", "public")


def _statement_kinds(node_type: str) -> set[str]:
    if node_type in _ROOT_KINDS:
        return {_ROOT_KINDS[node_type]}
    if node_type == "MergeStmt":
        return {"insert", "update", "delete"}
    if node_type.startswith(_DDL_PREFIXES) or node_type in ("DropStmt", "TruncateStmt"):
        return {"ddl"}
    return {"other"}


class _Walk:
    """What one walk of the tree collects."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.tables: list[str] = []
        self.functions: list[str] = []
        self.columns: list[tuple[str | None, str]] = []
        self.aliases: set[str] = set()
        self.table_aliases: dict[str, str] = {}
        self.ctes: set[str] = set()
        self.catalog: list[str] = []
        self.star = False

    def relation(self, node: dict[str, Any]) -> str:
        schema = str(node.get("schemaname", "")).lower()
        name = str(node.get("relname", "")).lower()
        if not node.get("catalogname") and name in CATALOG_RELATIONS.get(schema or "pg_catalog", ()):
            qualified = f"{schema or 'pg_catalog'}.{name}"
            self.catalog.append(qualified if schema else name)  # unqualified: maybe a CTE's name
            alias = node.get("alias", {}).get("aliasname")
            self.table_aliases[str(alias or name).lower()] = qualified
            return qualified
        if node.get("catalogname") or schema not in _PUBLIC:
            where = ".".join(str(part) for part in (node.get("catalogname"), node.get("schemaname")) if part)
            raise SqlRefused(
                f"table {name!r} is qualified with the schema {where!r}: only the public schema is reachable "
                "(and the information_schema and pg_catalog views that describe tables)",
                {"kind": "unknown", "table": f"{where}.{name}".lower()},
            )
        self.tables.append(name)
        alias = node.get("alias", {}).get("aliasname")
        self.table_aliases[str(alias or name).lower()] = name
        return name

    def visit(self, value: Any, parent: str = "", owner: str = "") -> None:
        """Walk ``value``; ``parent`` is the key it hangs from, ``owner`` the statement node it is in.

        Only dicts and lists are walked (a scalar never holds a node), and only the keys
        that matter are looked at: this walk is most of the check's cost."""
        if type(value) is list:
            for item in value:
                if type(item) is dict or type(item) is list:
                    self.visit(item, parent, owner)
            return
        for key, child in value.items():
            if type(child) is not dict and type(child) is not list:
                continue
            statement = key[0].isupper() and key.endswith("Stmt")
            if key in _SPECIAL or statement:
                self.kind_of(key)
                self.node(key, child, parent, owner)
            self.visit(child, key, key if statement else owner)

    def kind_of(self, key: str) -> None:
        """The kind a node (by its key) adds to the statement."""
        if key in _MODIFYING:
            self.kinds.add(_MODIFYING[key])
        elif key == "MergeStmt":
            self.kinds.update(("insert", "update", "delete"))
        elif key == "intoClause":
            self.kinds.add("ddl")
        elif key == "lockingClause":
            self.kinds.add("update")
        elif key[0].isupper() and key.endswith("Stmt") and key not in _SELECTS:
            self.kinds.update(_statement_kinds(key))

    def node(self, key: str, child: Any, parent: str, owner: str) -> None:
        """The table, function, column, CTE or alias a node names."""
        if key == "RangeVar" or (key in ("relation", "rel") and isinstance(child, dict) and "relname" in child):
            self.relation(child)
        elif key == "FuncCall":
            names = [part["String"]["sval"] for part in child.get("funcname", ()) if "String" in part]
            if names:
                self.functions.append(str(names[-1]).lower())
        elif key == "ColumnRef":
            self.column(child)
        elif key == "CommonTableExpr":
            self.ctes.add(str(child.get("ctename", "")).lower())
        elif key == "ResTarget" and child.get("name"):
            if parent == "targetList" and owner == "SelectStmt":
                self.aliases.add(str(child["name"]).lower())  # a select list's AS name
            else:
                self.columns.append((None, str(child["name"]).lower()))  # a column an INSERT/UPDATE sets

    def column(self, node: dict[str, Any]) -> None:
        fields = node.get("fields", [])
        if any("A_Star" in part for part in fields):
            self.star = True
            return
        names = [str(part["String"]["sval"]).lower() for part in fields if "String" in part]
        if len(names) == 1:
            self.columns.append((None, names[0]))
        elif len(names) >= 2:
            self.columns.append((names[-2], names[-1]))


def classify_postgres(text: str) -> Statement:
    """Parse and classify one PostgreSQL statement (see the module docstring).

    Raises:
        SqlRefused: the text does not parse, holds no statement or more than one.
    """
    try:
        from pglast import parser
    except ImportError:
        raise SqlRefused(
            "the host cannot check PostgreSQL statements: install the postgres extra (glovebox-runtime[postgres])",
            {"kind": "unknown"},
        ) from None
    try:
        tree = json.loads(parser.parse_sql_json(text))
    except parser.ParseError as exc:
        raise SqlRefused(f"the statement does not parse: {str(exc)[:200]}", {"kind": "unknown"}) from None
    except RecursionError:
        raise SqlRefused("the statement is nested too deeply to check", {"kind": "unknown"}) from None
    statements = tree.get("stmts", [])
    if len(statements) != 1:
        raise SqlRefused(
            f"one statement per query: this text holds {len(statements)}",
            {"kind": "unknown", "statements": len(statements)},
        )
    root = statements[0]["stmt"]
    (root_type,) = root
    if root_type == "ExplainStmt" and not _analyzes(root[root_type]):
        root = root[root_type]["query"]  # planned, never run: judged as the statement it explains
        (root_type,) = root
    walk = _Walk()
    walk.kinds.update(_statement_kinds(root_type))
    walk.visit(root)
    body = root[root_type]
    insert_columns: dict[str, tuple[str, ...] | None] = {}
    if root_type == "InsertStmt" and isinstance(body.get("relation"), dict):
        named = [str(col["ResTarget"]["name"]).lower() for col in body.get("cols", []) if "ResTarget" in col]
        insert_columns[str(body["relation"].get("relname", "")).lower()] = tuple(named) if named else None
    if root_type == "UpdateStmt" and isinstance(body.get("relation"), dict):
        table = str(body["relation"].get("relname", "")).lower()
        for target in body.get("targetList", []):
            name = target.get("ResTarget", {}).get("name")
            if name:
                walk.columns.append((table, str(name).lower()))
    ctes = walk.ctes
    for alias in [alias for alias, name in walk.table_aliases.items() if name in ctes]:
        del walk.table_aliases[alias]
    return Statement(
        kind=next(kind for kind in SEVERITY_ORDER if kind in walk.kinds),
        kinds=frozenset(walk.kinds),
        tables=tuple(dict.fromkeys(name for name in walk.tables if name not in ctes)),
        functions=tuple(dict.fromkeys(walk.functions)),
        fingerprint=_fingerprint(text, parser),
        columns=tuple(dict.fromkeys(walk.columns)),
        star=walk.star,
        insert_columns=insert_columns,
        aliases=frozenset(walk.aliases),
        table_aliases=walk.table_aliases,
        ctes=frozenset(ctes),
        engine="postgresql",
        catalog=tuple(
            dict.fromkeys(name if "." in name else f"pg_catalog.{name}" for name in walk.catalog if name not in ctes)
        ),
    )


def _analyzes(explain: dict[str, Any]) -> bool:
    """Whether an EXPLAIN runs its statement: an ``ANALYZE`` option, whatever its value (``ANALYZE off`` too)."""
    options = explain.get("options", [])
    return any(str(option.get("DefElem", {}).get("defname", "")).lower() == "analyze" for option in options)


def _fingerprint(text: str, parser: Any) -> str:
    """The statement with its literals replaced by ``?`` and its comments left out."""
    parts: list[str] = []
    for token in parser.scan(text):
        if token.name in _COMMENTS:
            continue
        parts.append("?" if token.name in _CONSTANTS else text[token.start : token.end + 1])
    rendered = " ".join(parts)
    for loose, tight in ((" ,", ","), (" )", ")"), ("( ", "("), (" . ", ".")):
        rendered = rendered.replace(loose, tight)
    return rendered

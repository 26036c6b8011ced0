"""The grant rules of the built-in ``http`` and ``sql`` capabilities (manifests declare them,
policies grant them, the host enforces them with the one matcher of :mod:`._rules`).

They live apart from :mod:`._grants` (which composes ``Grants`` from every registered
capability) so that a capability's package can import its rules while the registry is
being read.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from ..core._frozen import Frozen
from ._rules import parse_host_pattern, parse_method, parse_path_pattern

__all__ = [
    "SQL_KINDS",
    "HttpLimits",
    "HttpRule",
    "SecretRule",
    "SqlActions",
    "SqlGrant",
    "SqlPassword",
    "SqlRule",
]


#: A secret provider's name (built in: env, file, keyring, exec, encrypted; more by entry point).
PROVIDER_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
#: A secret reference: ``PROVIDER://REST`` (see ``glovebox.capabilities._providers``).
REFERENCE_PATTERN = r"^([A-Za-z][A-Za-z0-9-]{0,31})://"
PROVIDER_DOC = (
    "Where the value is read: env, file, keyring, exec, encrypted, or a provider a distribution registers"
    " (implied by a reference in source)."
)
SOURCE_DOC = (
    "A reference (env://VAR, file:///path, keyring://service/user, exec://command?arg=..., encrypted://name),"
    " or, in the older form, the environment variable (env) or file path (file) the provider reads."
)

#: A host name or ``*.example.com`` wildcard, checked (and normalised) by the one matcher.
HostPattern = Annotated[str, AfterValidator(parse_host_pattern)]


class HttpRule(Frozen):
    """One family of HTTP requests: scheme, host, port, method and path patterns."""

    host: HostPattern = Field(description="Exact host name or a '*.example.com' wildcard (one or more labels).")
    schemes: list[Literal["http", "https"]] = Field(default=["https"], description="Allowed URL schemes.")
    ports: list[int] | None = Field(default=None, description="Allowed ports; None means the scheme's default.")
    methods: list[str] = Field(default=["GET"], description="Allowed methods, upper case; '*' for any.")
    paths: list[str] = Field(default=["/*"], description="Path patterns; '*' matches within one segment, '**' across.")
    allow_private: bool = Field(
        default=False, description="Allow this host to resolve to loopback/private/link-local addresses."
    )
    follow_redirects: bool = Field(default=False, description="Follow redirects (each hop is re-checked).")
    allow_path_params: bool = Field(
        default=False, description="Allow ';' path parameters (servers such as Tomcat read '..;' as '..')."
    )
    allow_encoded_separators: bool = Field(
        default=False, description="Allow percent-encoded '.', '/' and '\\' in paths (also multiply encoded)."
    )
    propagate_trace: bool = Field(
        default=False,
        description="Send the W3C traceparent/tracestate of the request's span (the granted rule decides).",
    )

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: list[str]) -> list[str]:
        return [parse_method(method) for method in value]

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for pattern in value:
            parse_path_pattern(pattern)
        return value

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and not all(0 < port < 65536 for port in value):
            raise ValueError("ports must be between 1 and 65535")
        return value


class HttpLimits(Frozen):
    """Per-call limits on HTTP use."""

    max_requests: int = Field(default=16, ge=0)
    max_request_bytes: int = Field(default=1024 * 1024, ge=0)
    max_response_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    request_timeout_ms: int = Field(default=10_000, gt=0)
    max_redirects: int = Field(default=5, ge=0)


class SecretRule(Frozen):
    """A named secret the host adds to matching requests; the guest never sees it."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    provider: str = Field("env", pattern=PROVIDER_PATTERN, description=PROVIDER_DOC)
    source: str = Field(min_length=1, description=SOURCE_DOC)
    host: HostPattern = Field(description="Host (or '*.example.com') whose requests receive the secret.")
    header: str = "Authorization"
    format: str = Field(default="Bearer {value}", description="Header value template; {value} is the secret.")
    schemes: list[Literal["http", "https"]] = Field(
        default=["https"], description="Schemes whose requests receive the secret (never plain http by default)."
    )
    response_body: Literal["allow", "withhold"] = Field(
        default="allow",
        description="withhold: the guest gets only the status and response_headers of a request carrying the secret.",
    )
    response_headers: list[str] = Field(
        default=["content-type"],
        description="Response headers the guest still gets when response_body is withhold (case-insensitive).",
    )

    _reference = model_validator(mode="before")(lambda data: _provider_of(data))

    @field_validator("header")
    @classmethod
    def _header(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}", value):
            raise ValueError(f"header {value!r}: not an HTTP header name")
        return value

    @field_validator("format")
    @classmethod
    def _format(cls, value: str) -> str:
        if "{value}" not in value or "\r" in value or "\n" in value:
            raise ValueError("format must contain '{value}' and no CR/LF")
        return value


def _provider_of(data: Any) -> Any:
    """A ``source`` written as a reference (``keyring://svc/user``) names its provider itself."""
    if isinstance(data, dict) and isinstance(data.get("source"), str):
        found = re.match(REFERENCE_PATTERN, data["source"])
        if found:
            scheme = found[1].lower()
            if data.get("provider", scheme) != scheme:
                raise ValueError(f"provider {data['provider']!r} differs from the reference's {scheme!r}")
            return {**data, "provider": scheme}
    return data


#: The kinds of SQL statement, as the host's classifier names them.
SQL_KINDS = ("select", "insert", "update", "delete", "ddl", "other")
_KIND_PHRASES = {
    "ddl": ("a schema change (DDL)", "schema changes (DDL)"),
    "other": ("a statement of another kind (PRAGMA, ATTACH, a transaction, ...)", "statements of other kinds"),
}


def sql_kind_phrase(kind: str, *, plural: bool = False) -> str:
    """A statement kind as a message says it.

    >>> sql_kind_phrase("update"), sql_kind_phrase("insert"), sql_kind_phrase("ddl", plural=True)
    ('an UPDATE statement', 'an INSERT statement', 'schema changes (DDL)')
    """
    if kind in _KIND_PHRASES:
        return _KIND_PHRASES[kind][plural]
    if kind not in SQL_KINDS:
        return "statements" if plural else "a statement"
    word = kind.upper()
    if plural:
        return f"{word} statements"
    return f"{'an' if word[0] in 'AEIOU' else 'a'} {word} statement"


SqlAction = Literal["allow", "require_approval", "block"]
_SQL_NAME = r"^[A-Za-z_][A-Za-z0-9_$]{0,127}$"


class SqlActions(Frozen):
    """What each kind of statement gets: allow, require_approval or block."""

    select: SqlAction = Field(
        "allow",
        description="SELECT (and UNION/INTERSECT/EXCEPT of them); reading the schema: PRAGMA table_info, "
        "index_list, foreign_key_list, EXPLAIN of a read, information_schema and pg_catalog reads.",
    )
    insert: SqlAction = Field("require_approval", description="INSERT (also INSERT OR REPLACE, upserts).")
    update: SqlAction = Field("require_approval", description="UPDATE (also SELECT ... FOR UPDATE).")
    delete: SqlAction = Field("require_approval", description="DELETE.")
    ddl: SqlAction = Field("block", description="CREATE, DROP, ALTER, SELECT ... INTO.")
    other: SqlAction = Field(
        "block",
        description="Everything else: other PRAGMAs, ATTACH, VACUUM, transactions, EXPLAIN ANALYZE, "
        "statements not fully parsed.",
    )


class SqlRule(Frozen):
    """One database a tool may use (a manifest declares it; a policy grants it with its DSN)."""

    database: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The alias the guest names it by.")
    actions: SqlActions = Field(SqlActions(), description="What each statement kind gets.")
    tables: list[str] = Field(["*"], description="Tables (and views) statements may touch; '*' for any.")
    columns: dict[str, list[str]] = Field(
        {}, description="Per table, the only columns statements may name (a table left out: any column)."
    )
    functions: list[str] = Field([], description="SQL functions allowed beyond the host's safe list.")
    max_rows: int = Field(1000, gt=0, description="Rows returned per statement (more: truncated).")
    max_bytes: int = Field(256 * 1024, gt=0, description="Bytes of row JSON returned per statement (more: truncated).")
    timeout_ms: int = Field(5_000, gt=0, description="Statement timeout (always within the call's deadline).")

    @field_validator("tables", "functions")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if name != "*" and not re.fullmatch(_SQL_NAME, name):
                raise ValueError(f"{name!r} is not a plain SQL name")
        return [name.lower() for name in value]

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name in [*value, *(column for columns in value.values() for column in columns)]:
            if not re.fullmatch(_SQL_NAME, name):
                raise ValueError(f"{name!r} is not a plain SQL name")
        return {table.lower(): [column.lower() for column in columns] for table, columns in value.items()}


class SqlPassword(Frozen):
    """Where the host reads a PostgreSQL password: never in the DSN, never seen by the guest or the audit."""

    provider: str = Field("env", pattern=PROVIDER_PATTERN, description=PROVIDER_DOC)
    source: str = Field(min_length=1, description=SOURCE_DOC)

    _reference = model_validator(mode="before")(lambda data: _provider_of(data))


class SqlGrant(SqlRule):
    """A granted database: the rule plus where it is (``sqlite:///path.db`` or ``postgresql://user@host/db``)."""

    dsn: str = Field(
        description="sqlite:///path (four slashes for an absolute path) or postgresql://user@host:port/dbname "
        "(no password: see password)."
    )
    password: SqlPassword | None = Field(
        None, description="PostgreSQL only: the secret provider the host reads the login password from."
    )

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, value: str) -> str:
        if "\0" in value:
            raise ValueError("a DSN never holds a NUL character")
        if value.startswith(("postgresql://", "postgres://")):
            return _postgres_dsn(value)
        if not value.startswith("sqlite:///") or len(value) == len("sqlite:///") or "?" in value:
            raise ValueError(
                f"{value!r}: only sqlite:///path (no query string) and postgresql://user@host/dbname DSNs are supported"
            )
        return value

    @property
    def engine(self) -> Literal["sqlite", "postgresql"]:
        """Which engine the DSN names."""
        return "sqlite" if self.dsn.startswith("sqlite:") else "postgresql"


def _postgres_dsn(value: str) -> str:
    parts = urlsplit(value)
    if parts.password is not None or any(key.lower() == "password" for key in parse_qs(parts.query, True)):
        raise ValueError("a PostgreSQL DSN never carries the password: name its secret provider in `password`")
    if not parts.hostname or not parts.username or parts.path in ("", "/") or parts.fragment:
        raise ValueError(f"{value!r}: a PostgreSQL DSN names user, host and database (postgresql://user@host/dbname)")
    return value

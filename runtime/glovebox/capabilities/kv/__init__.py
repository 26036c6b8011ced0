"""The ``kv`` capability: a namespaced key-value store in the home (``glovebox:tool/kv@0.1.0``).

Tools keep state between calls without a file system. A manifest declares the
namespaces a tool uses (``capabilities.kv``: namespace, access); a policy grants
them per tool and principal (``kv``: namespace, access, ``quota_bytes``,
``shared``). A call may use a namespace both name, with the narrower access
(``read`` < ``read_write``) and the smaller quota. Unless the grant says
``shared``, each principal has its own copy of a namespace.

The store is one SQLite file, ``kv.sqlite`` in the home (WAL, safe across
processes and threads); a write and its quota check are one ``BEGIN IMMEDIATE``
transaction, so concurrent writers never overshoot the quota. A namespace's size
is the UTF-8 bytes of its keys and values. Every operation is one entry of the
call's record ``kv`` (operation, namespace, key, bytes, result), kept in the
audit row's ``egress.kv``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ...core._frozen import Frozen
from ...model._capability import Capability, HostFunction

__all__ = ["CAPABILITY", "KV_INTERFACE", "KvCapability", "KvGrant", "KvRule", "KvStore"]

KV_INTERFACE = "glovebox:tool/kv@0.1.0"
#: UTF-8 bytes of a key, at most.
MAX_KEY_BYTES = 512
_ERRORS = frozenset({"denied", "quota-exceeded", "invalid", "storage"})

WIT = """\
  variant kv-error { denied(string), quota-exceeded(string), invalid(string), storage(string) }
  get: func(namespace: string, key: string) -> result<option<string>, kv-error>;
  set: func(namespace: string, key: string, value: string) -> result<_, kv-error>;
  delete: func(namespace: string, key: string) -> result<_, kv-error>;
"""

Access = Literal["read", "read_write"]
_NAMESPACE = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class KvRule(Frozen):
    """A namespace a tool declares it uses."""

    namespace: str = Field(pattern=_NAMESPACE, description="The namespace the guest names.")
    access: Access = Field("read_write", description="read: get only; read_write: get, set and delete.")


class KvGrant(KvRule):
    """A namespace granted to matching calls, with its byte quota."""

    quota_bytes: int = Field(64 * 1024, gt=0, description="UTF-8 bytes of keys and values the namespace may hold.")
    shared: bool = Field(False, description="One namespace for every principal granted it (default: one each).")


@dataclass(frozen=True)
class _Effective:
    access: Access
    quota_bytes: int
    owner: str  # the principal whose copy it is, or "" when shared


class KvStore:
    """The home's ``kv.sqlite``: one connection per call, opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def _connection(self, timeout_s: float) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(
                self.path, timeout=max(timeout_s, 0.001), isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS kv (owner TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL,"
                " value TEXT NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY (owner, namespace, key))"
            )
            self._db = db
        return self._db

    def get(self, owner: str, namespace: str, key: str, timeout_s: float) -> str | None:
        row = (
            self._connection(timeout_s)
            .execute("SELECT value FROM kv WHERE owner = ? AND namespace = ? AND key = ?", (owner, namespace, key))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def put(self, owner: str, namespace: str, key: str, value: str | None, quota: int, timeout_s: float) -> int:
        """Set (or, with None, delete) ``key``; the namespace's size after, or -(that size) when over ``quota``."""
        db = self._connection(timeout_s)
        db.execute("BEGIN IMMEDIATE")
        try:
            where = (owner, namespace)
            used = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM kv WHERE owner = ? AND namespace = ?", where)
            old = db.execute("SELECT bytes FROM kv WHERE owner = ? AND namespace = ? AND key = ?", (*where, key))
            old_row = old.fetchone()
            size = 0 if value is None else len(key.encode()) + len(value.encode())
            after = int(used.fetchone()[0]) - (old_row[0] if old_row else 0) + size
            if value is not None and after > quota:
                db.execute("ROLLBACK")
                return -after
            if value is None:
                db.execute("DELETE FROM kv WHERE owner = ? AND namespace = ? AND key = ?", (*where, key))
            else:
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?, ?, ?)", (*where, key, value, size))
            db.execute("COMMIT")
            return after
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class KvAccess:
    """The ``kv`` of one call: the namespaces the manifest declares ∩ the call was granted."""

    def __init__(self, namespaces: dict[str, _Effective], store: KvStore) -> None:
        self.namespaces = namespaces
        self.store = store

    def answer(self, state: Any, operation: str, namespace: str, key: str, value: str | None = None) -> Any:
        from wasmtime.component import Variant

        size = len(key.encode()) + (0 if value is None else len(value.encode()))
        entry = {"operation": operation, "namespace": state.clip(namespace, 64), "key": state.clip(key, 128)}
        grant = self.namespaces.get(namespace)
        reason = _refusal(grant, operation, namespace)
        if reason is not None:
            state.add_denial({"capability": "kv", **entry, "reason": reason})
            state.add_record("kv", {**entry, "bytes": size, "result": "denied"})
            return Variant("denied", reason)
        assert grant is not None
        if not key or len(key.encode()) > MAX_KEY_BYTES:
            state.add_record("kv", {**entry, "bytes": size, "result": "invalid"})
            return Variant("invalid", f"a key is 1 to {MAX_KEY_BYTES} bytes of UTF-8")
        try:
            answer = self._run(state, grant, operation, namespace, key, value)
        except sqlite3.Error as exc:
            state.add_record("kv", {**entry, "bytes": size, "result": "storage"})
            return Variant("storage", f"the store failed: {exc}")
        result = "quota-exceeded" if isinstance(answer, Variant) else "ok"
        state.add_record("kv", {**entry, "bytes": size, "result": result})
        return answer

    def _run(self, state: Any, grant: _Effective, operation: str, namespace: str, key: str, value: str | None) -> Any:
        from wasmtime.component import Variant

        timeout = state.remaining_s()
        if operation == "get":
            return self.store.get(grant.owner, namespace, key, timeout)
        after = self.store.put(grant.owner, namespace, key, value, grant.quota_bytes, timeout)
        if after < 0:
            return Variant(
                "quota-exceeded",
                f"namespace {namespace!r} would hold {-after} bytes, over its quota of {grant.quota_bytes} bytes",
            )
        return None

    def close(self) -> None:
        self.store.close()


def _refusal(grant: _Effective | None, operation: str, namespace: str) -> str | None:
    if grant is None:
        return f"the kv namespace {namespace!r} is not granted to this call"
    if operation != "get" and grant.access != "read_write":
        return f"the kv namespace {namespace!r} is granted read-only"
    return None


def _answer(operation: str) -> Any:
    def answer(state: Any, namespace: str, key: str, *value: str) -> Any:
        from wasmtime.component import Variant

        bound = None if state is None else state.capability("kv")
        if bound is not None:
            return bound.answer(state, operation, namespace, key, *value)
        reason = "the kv capability is not granted to this call"
        if state is not None:
            entry = {"operation": operation, "namespace": state.clip(namespace, 64), "key": state.clip(key, 128)}
            state.add_denial({"capability": "kv", **entry, "reason": reason})
        return Variant("denied", reason)

    return answer


class KvCapability(Capability):
    """A namespaced key-value store in the home, with a byte quota per namespace."""

    name = "kv"
    interface = KV_INTERFACE
    wit = WIT

    def manifest_fields(self) -> Mapping[str, Any]:
        return {"kv": (list[KvRule], Field([], description="Key-value namespaces the tool uses."))}

    def grant_fields(self) -> Mapping[str, Any]:
        return {"kv": (list[KvGrant], Field([], description="Key-value namespaces granted, with their quotas."))}

    def functions(self) -> Sequence[HostFunction]:
        from ...sandbox._hostabi import lower_result, string_args

        def lower(ok: str) -> Any:
            return lambda answer, slot: lower_result(answer, slot, ok=ok, errors=_ERRORS)

        return (
            HostFunction("get", string_args("namespace", "key"), _answer("get"), lower("option-text"), _storage()),
            HostFunction("set", string_args("namespace", "key", "value"), _answer("set"), lower("unit"), _storage()),
            HostFunction("delete", string_args("namespace", "key"), _answer("delete"), lower("unit"), _storage()),
        )

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        if not declared.kv or not grants.kv:
            return None
        namespaces: dict[str, _Effective] = {}
        for rule in declared.kv:
            for grant in grants.kv:
                if grant.namespace != rule.namespace or rule.namespace in namespaces:
                    continue
                access: Access = "read_write" if rule.access == grant.access == "read_write" else "read"
                owner = "" if grant.shared else context.principal
                namespaces[rule.namespace] = _Effective(access, grant.quota_bytes, owner)
        return KvAccess(namespaces, KvStore(Path(context.home) / "kv.sqlite")) if namespaces else None


def _storage() -> Any:
    from wasmtime.component import Variant

    return Variant("storage", "host error")


CAPABILITY = KvCapability()

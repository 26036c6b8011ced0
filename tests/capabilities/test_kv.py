"""The kv capability, attacked through a real C guest on the home's real store.

A guest writes past its quota, reads and writes namespaces it was not granted,
writes a namespace granted read-only, and runs with no grant at all: each ends
with the exact error, and the store holds only what the grants allowed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import glovebox

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")


def _policy(*grants: dict[str, Any]) -> glovebox.Policy:
    return glovebox.Policy.model_validate({"version": 1, "defaults": {"action": "allow"}, "grants": list(grants)})


@pytest.fixture
def kv(tmp_path: Path, build_guest: Callable[[str], Path]) -> Callable[..., glovebox.Runtime]:
    """A Runtime with the kv_client guest registered as ``client``, declaring ``declared`` namespaces."""

    def make(*grants: dict[str, Any], declared: list[dict[str, Any]] | None = None) -> glovebox.Runtime:
        rt = glovebox.Runtime(home=tmp_path / "home", policy=_policy(*grants))
        declared = declared if declared is not None else [{"namespace": "notes"}]
        rt.register(build_guest("kv_client"), manifest={"name": "client", "capabilities": {"kv": declared}})
        return rt

    return make


def _ops(rt: glovebox.Runtime, *ops: dict[str, str], principal: str | None = None) -> glovebox.CallResult:
    return rt.call("client", {"ops": list(ops)}, principal=principal)


def _results(result: glovebox.CallResult) -> list[dict[str, Any]]:
    assert result.ok, result.to_dict()
    return list(result.output["results"])


def test_set_get_delete_round_trip(kv: Callable[..., glovebox.Runtime]) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes"}]}) as rt:
        result = _ops(
            rt,
            {"op": "get", "ns": "notes", "key": "a"},
            {"op": "set", "ns": "notes", "key": "a", "value": "héllo"},
            {"op": "get", "ns": "notes", "key": "a"},
        )
        assert _results(result) == [{"status": "not-found"}, {"status": "ok"}, {"status": "ok", "value": "héllo"}]
        # State outlives the call: the next call reads it, then deletes it.
        later = _ops(rt, {"op": "get", "ns": "notes", "key": "a"}, {"op": "delete", "ns": "notes", "key": "a"})
        assert _results(later) == [{"status": "ok", "value": "héllo"}, {"status": "ok"}]
        assert _results(_ops(rt, {"op": "get", "ns": "notes", "key": "a"})) == [{"status": "not-found"}]
        assert [entry["operation"] for entry in later.meta["kv"]] == ["get", "delete"]
        assert later.meta["kv"][0] == {"operation": "get", "namespace": "notes", "key": "a", "bytes": 1, "result": "ok"}
        row = rt.audit.find(later.meta["call_id"])
        assert row is not None
        assert json.loads(row["egress"])["kv"] == later.meta["kv"]  # the audit row keeps the capability's record


def test_a_write_past_the_quota_gets_the_exact_error(kv: Callable[..., glovebox.Runtime], tmp_path: Path) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes", "quota_bytes": 10}]}) as rt:
        result = _ops(
            rt,
            {"op": "set", "ns": "notes", "key": "k", "value": "12345678"},  # 1 + 8 = 9 bytes: within
            {"op": "set", "ns": "notes", "key": "j", "value": "12"},  # 9 + 3 = 12 bytes: over
            {"op": "set", "ns": "notes", "key": "k", "value": "123456789"},  # replaces k: 10 bytes, within
        )
        assert _results(result) == [
            {"status": "ok"},
            {
                "status": "quota-exceeded",
                "reason": "namespace 'notes' would hold 12 bytes, over its quota of 10 bytes",
            },
            {"status": "ok"},
        ]
        assert [entry["result"] for entry in result.meta["kv"]] == ["ok", "quota-exceeded", "ok"]
    with sqlite3.connect(tmp_path / "home" / "kv.sqlite") as db:
        assert db.execute("SELECT key, value FROM kv").fetchall() == [("k", "123456789")]


def test_concurrent_writers_never_overshoot_the_quota(kv: Callable[..., glovebox.Runtime], tmp_path: Path) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes", "quota_bytes": 40, "shared": True}]}) as rt:
        writes = [{"op": "set", "ns": "notes", "key": f"k{i:02d}", "value": "123456789"} for i in range(12)]
        with ThreadPoolExecutor(4) as pool:
            statuses = [_results(r)[0]["status"] for r in pool.map(lambda op: _ops(rt, op), writes)]
    assert statuses.count("ok") == 3  # 3 keys of 12 bytes fit in 40; the fourth would make 48
    with sqlite3.connect(tmp_path / "home" / "kv.sqlite") as db:
        assert db.execute("SELECT SUM(bytes) FROM kv").fetchone() == (36,)


def test_another_namespace_is_denied(kv: Callable[..., glovebox.Runtime]) -> None:
    # The manifest declares both; the policy grants only `notes`.
    declared = [{"namespace": "notes"}, {"namespace": "secrets"}]
    with kv({"tool": "client", "kv": [{"namespace": "notes"}]}, declared=declared) as rt:
        result = _ops(rt, {"op": "get", "ns": "secrets", "key": "password"})
        assert _results(result) == [
            {"status": "denied", "reason": "the kv namespace 'secrets' is not granted to this call"}
        ]
        assert result.meta["denials"] == [
            {
                "capability": "kv",
                "operation": "get",
                "namespace": "secrets",
                "key": "password",
                "reason": "the kv namespace 'secrets' is not granted to this call",
            }
        ]
        # Granted but not declared: denied as well (the grant is declared ∩ granted).
        undeclared = _ops(rt, {"op": "set", "ns": "other", "key": "k", "value": "v"})
        assert _results(undeclared)[0]["status"] == "denied"


def test_each_principal_has_its_own_copy_unless_shared(kv: Callable[..., glovebox.Runtime]) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes"}]}) as rt:
        _results(_ops(rt, {"op": "set", "ns": "notes", "key": "k", "value": "alice's"}, principal="alice"))
        assert _results(_ops(rt, {"op": "get", "ns": "notes", "key": "k"}, principal="bob")) == [
            {"status": "not-found"}
        ]
        assert _results(_ops(rt, {"op": "get", "ns": "notes", "key": "k"}, principal="alice")) == [
            {"status": "ok", "value": "alice's"}
        ]


def test_a_grant_for_another_principal_or_tool_is_no_grant(kv: Callable[..., glovebox.Runtime]) -> None:
    grants = (
        {"tool": "client", "principals": ["alice"], "kv": [{"namespace": "notes"}]},
        {"tool": "other-tool", "kv": [{"namespace": "notes"}]},
    )
    with kv(*grants) as rt:
        assert _results(_ops(rt, {"op": "set", "ns": "notes", "key": "k", "value": "v"}, principal="alice")) == [
            {"status": "ok"}
        ]
        refused = _results(_ops(rt, {"op": "get", "ns": "notes", "key": "k"}, principal="mallory"))
        assert refused == [{"status": "denied", "reason": "the kv capability is not granted to this call"}]


def test_read_only_grant_refuses_writes(kv: Callable[..., glovebox.Runtime]) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes", "access": "read"}]}) as rt:
        result = _ops(
            rt, {"op": "set", "ns": "notes", "key": "k", "value": "v"}, {"op": "get", "ns": "notes", "key": "k"}
        )
        assert _results(result) == [
            {"status": "denied", "reason": "the kv namespace 'notes' is granted read-only"},
            {"status": "not-found"},
        ]


def test_no_grant_is_denied_and_opens_nothing(kv: Callable[..., glovebox.Runtime], tmp_path: Path) -> None:
    with kv() as rt:
        result = _ops(rt, {"op": "set", "ns": "notes", "key": "k", "value": "v"})
        assert _results(result) == [{"status": "denied", "reason": "the kv capability is not granted to this call"}]
    assert not (tmp_path / "home" / "kv.sqlite").exists()  # nothing granted: the store is never opened


def test_keys_are_bounded(kv: Callable[..., glovebox.Runtime]) -> None:
    with kv({"tool": "client", "kv": [{"namespace": "notes"}]}) as rt:
        result = _ops(
            rt, {"op": "set", "ns": "notes", "key": "x" * 513, "value": "v"}, {"op": "get", "ns": "notes", "key": ""}
        )
        assert _results(result) == [
            {"status": "invalid", "reason": "a key is 1 to 512 bytes of UTF-8"},
            {"status": "invalid", "reason": "a key is 1 to 512 bytes of UTF-8"},
        ]


def test_grant_fields_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps({"version": 1, "grants": [{"tool": "*", "kv": [{"namespace": "n", "quota_bytes": 0}]}]}))
    with pytest.raises(glovebox.InvalidPolicy, match=r"grants\.0\.kv\.0\.quota_bytes"):
        glovebox.load_policy(path)


# -- the JavaScript and Python guest helpers ----------------------------------------------------------

GUESTS = Path(__file__).resolve().parents[1] / "guests"
HELPER_OPS = [
    {"op": "get", "ns": "notes", "key": "k"},
    {"op": "set", "ns": "notes", "key": "k", "value": "vé"},
    {"op": "get", "ns": "notes", "key": "k"},
    {"op": "set", "ns": "notes", "key": "big", "value": "x" * 40},
    {"op": "get", "ns": "secrets", "key": "k"},
    {"op": "delete", "ns": "notes", "key": "k"},
    {"op": "get", "ns": "notes", "key": "k"},
]
HELPER_RESULTS = [
    {"missing": True},
    {},
    {"value": "vé"},
    {"error": "quota-exceeded", "reason": "namespace 'notes' would hold 47 bytes, over its quota of 32 bytes"},
    {"error": "denied", "reason": "the kv namespace 'secrets' is not granted to this call"},
    {},
    {"missing": True},
]


def _helper_runtime(tmp_path: Path) -> glovebox.Runtime:
    grant = {"tool": "*", "kv": [{"namespace": "notes", "quota_bytes": 32}]}
    return glovebox.Runtime(home=tmp_path / "home", policy=_policy(grant))


DECLARED = {"kv": [{"namespace": "notes"}, {"namespace": "secrets"}]}


def test_the_javascript_helper(tmp_path: Path, build_js: Callable[[Path], Path]) -> None:
    with _helper_runtime(tmp_path) as rt:
        rt.register(build_js(GUESTS / "js_kv.js"), manifest={"name": "js-kv", "capabilities": DECLARED})
        result = rt.call("js-kv", {"ops": HELPER_OPS})
    assert result.ok and result.output["results"] == HELPER_RESULTS, result.to_dict()


def test_the_python_helper(tmp_path: Path, build_py: Callable[[Path], Path]) -> None:
    with _helper_runtime(tmp_path) as rt:
        rt.register(build_py(GUESTS / "py_kv.py"), manifest={"name": "py-kv", "capabilities": DECLARED})
        result = rt.call("py-kv", {"ops": HELPER_OPS})
    assert result.ok and result.output["results"] == HELPER_RESULTS, result.to_dict()

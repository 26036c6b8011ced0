"""Policy documents, the matcher, the scope checker, reload, and properties of the gate."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glovebox
from glovebox.policy import dead_entries, decide, parse_policy, policy_schema

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"


def tool(name: str, scopes: list[str] | None = None, version: str = "1.0.0") -> glovebox.ToolInfo:
    manifest = glovebox.Manifest(name=name, version=version, required_scopes=scopes or [])
    return glovebox.ToolInfo(manifest=manifest, digest="sha256:" + "0" * 64, registered_at="", size_bytes=0)


# -- documents -------------------------------------------------------------


def test_shipped_policies_parse() -> None:
    default = glovebox.load_policy(POLICIES / "default.yaml")
    assert default.defaults.action == "block" and not default.rules and not default.principals
    team = glovebox.load_policy(POLICIES / "examples" / "team.yaml")
    assert {"agent", "analyst", "admin"} <= set(team.principals)
    assert {rule.action for rule in team.rules} == {"allow", "require_approval", "block"}
    assert any(grant.http for grant in team.grants) and team.limits


def test_api_keys_identify_principals_by_hash() -> None:
    team = glovebox.load_policy(POLICIES / "examples" / "team.yaml")
    assert team.principal_for_api_key("agent-demo-key") == "agent"
    assert team.principal_for_api_key("agent-demo-key ") is None
    assert team.principal_for_api_key("") is None


def test_schema_json_is_in_sync_with_the_models() -> None:
    committed = json.loads((POLICIES / "schema.json").read_text())
    assert committed == policy_schema(), "regenerate with: glovebox policy schema > policies/schema.json"


def expect_error(text: str) -> glovebox.InvalidPolicy:
    with pytest.raises(glovebox.InvalidPolicy) as info:
        parse_policy(text, "team.yaml")
    return info.value


def test_errors_name_file_line_field_and_expectation() -> None:
    error = expect_error("version: 1\nrules:\n  - tool: calc\n    action: maybe\n")
    assert "team.yaml:4: rules.0.action" in error.message
    assert "'allow', 'require_approval' or 'block'" in error.message
    assert error.details["line"] == 4 and error.details["field"] == "rules.0.action"


def test_unknown_field_is_named_with_its_line() -> None:
    error = expect_error("version: 1\nprincipals:\n  agent:\n    scopes: [a]\n    scoops: [b]\n")
    assert "team.yaml:5: principals.agent.scoops: unknown field" in error.message


def test_unknown_or_missing_version_is_refused() -> None:
    error = expect_error("# x\nversion: 2\n")
    assert "team.yaml:2: version: unsupported policy version 2 (expected 1)" in error.message
    assert "version" in expect_error("rules: []\n").message
    assert "expected a mapping" in expect_error("- 1\n").message


def test_yaml_syntax_and_duplicate_keys_name_the_line() -> None:
    assert "team.yaml:3: (yaml): not valid YAML" in expect_error("version: 1\nrules: [\n").message
    assert "team.yaml:3: defaults: duplicate key" in expect_error("version: 1\ndefaults: {}\ndefaults: {}\n").message


def test_load_policy_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(glovebox.InvalidPolicy, match="cannot read policy .*nope.yaml"):
        glovebox.load_policy(tmp_path / "nope.yaml")


# -- the checker -------------------------------------------------------------

TEAM = """
version: 1
principals:
  agent: {scopes: [a]}
  admin: {scopes: [a, b, glovebox:approve]}
rules:
  - {tool: "*", action: allow}
  - {tool: "calc*", principals: [agent], action: require_approval, reason: costly}
  - {tool: "calc@2.*", action: block}
grants:
  - tool: fetch
    principals: [admin]
    http: [{host: "*.example.com"}]
    http_limits: {max_requests: 3}
  - tool: "*"
    http_limits: {max_requests: 5, max_redirects: 1}
limits:
  - {tool: "*", principals: [agent], limits: {timeout_ms: 100}}
"""


def test_most_restrictive_matching_rule_wins() -> None:
    policy = parse_policy(TEAM)
    assert decide(policy, "admin", tool("calc")).action == "allow"
    approval = decide(policy, "agent", tool("calc"))
    assert approval.action == "require_approval" and any("costly" in line for line in approval.reason)
    assert decide(policy, "admin", tool("calc", version="2.1.0")).action == "block"
    assert decide(policy, "agent", tool("calc", version="2.1.0")).action == "block"


def test_scopes_deny_by_default_and_unknown_principals_hold_none() -> None:
    policy = parse_policy(TEAM)
    denied = decide(policy, "agent", tool("secret", ["b"]))
    assert denied.action == "block" and denied.missing_scopes == ("b",)
    assert decide(policy, "admin", tool("secret", ["b"])).action == "allow"
    assert decide(policy, "stranger", tool("secret", ["a"])).missing_scopes == ("a",)
    assert decide(parse_policy("version: 1\n"), "admin", tool("anything")).action == "block"


def test_grants_add_up_and_limits_only_tighten() -> None:
    policy = parse_policy(TEAM)
    admin = decide(policy, "admin", tool("fetch"))
    assert [rule.host for rule in admin.grants.http] == ["*.example.com"]
    assert admin.grants.http_limits.max_requests == 3 and admin.grants.http_limits.max_redirects == 1
    assert decide(policy, "agent", tool("fetch")).grants.http == []
    assert decide(policy, "agent", tool("fetch")).limits.timeout_ms == 100
    assert decide(policy, "admin", tool("fetch")).limits == glovebox.Limits()
    loose = parse_policy("version: 1\nlimits: [{limits: {fuel: 999999999999}}]\n")
    assert decide(loose, "x", tool("t")).limits.fuel == glovebox.Limits().fuel


def test_dead_entries_are_reported() -> None:
    policy = parse_policy(TEAM + "  - {tool: nothing-here, principals: [ghost], limits: {fuel: 1}}\n")
    problems = dead_entries(policy, [tool("calc"), tool("fetch")])
    assert "limits[1]: tool pattern 'nothing-here' matches no registered tool" in problems
    assert "limits[1]: principals ['ghost'] match no principal in the policy" in problems
    assert [p for p in problems if p.startswith("rules")] == [
        "rules[2]: tool pattern 'calc@2.*' matches no registered tool"
    ]


# -- the runtime ---------------------------------------------------------------

SCOPES = ["s1", "s2", "s3"]
TOOLS = {"alpha": [], "beta": ["s1"], "gamma": ["s1", "s2"], "delta": ["s3"]}


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory, build_guest: Callable[[str], Path]) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("policy-home")
    with glovebox.Runtime(home=home) as rt:
        for name, scopes in TOOLS.items():
            rt.register(build_guest("echo"), {"name": name, "required_scopes": scopes})
    yield home


def test_no_policy_keeps_the_old_behaviour(shared_home: Path) -> None:
    with glovebox.Runtime(home=shared_home) as rt:
        assert rt.call("alpha", {"x": 1}).output == {"x": 1}
        refused = rt.call("beta", {}, principal="anyone")
        assert refused.code == "permission_denied" and refused.error is not None
        assert refused.error.details["missing_scopes"] == ["s1"]
        assert rt._grants == glovebox.Grants()  # with no policy, a call is granted the Runtime's grants: none


def test_default_policy_denies_everything(shared_home: Path) -> None:
    with glovebox.Runtime(home=shared_home, policy=POLICIES / "default.yaml") as rt:
        assert rt.call("alpha", {}).code == "permission_denied"


def test_policy_from_the_environment(shared_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOVEBOX_POLICY", str(POLICIES / "default.yaml"))
    with glovebox.Runtime(home=shared_home) as rt:
        assert rt.call("alpha", {}).code == "permission_denied"


def test_reload_keeps_the_previous_policy_when_the_file_is_broken(shared_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nrules: [{tool: alpha, action: allow}]\n")
    with glovebox.Runtime(home=shared_home, policy=path) as rt:
        now = [rt._gate._checked]  # the clock stands still until the test moves it
        rt._gate.clock = lambda: now[0]
        assert rt.call("alpha", {}).ok
        path.write_text("version: 1\nrules: [{tool: alpha, action: allow}\n")
        assert rt.reload_policy() is False
        assert rt.policy_error is not None and "policy.yaml:" in rt.policy_error
        assert rt.call("alpha", {}).ok, "the previous policy stays in force"
        path.write_text("version: 1\nrules: [{tool: alpha, action: block}]\n# changed\n")
        now[0] += 0.09
        assert rt.call("alpha", {}).ok, "the file is checked at most every 100 ms"
        now[0] += 0.02
        assert rt.call("alpha", {}).code == "permission_denied", "reloaded on the next call"
        assert rt.policy_error is None


def test_a_broken_file_at_start_is_an_error(shared_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 3\n")
    with pytest.raises(glovebox.InvalidPolicy, match="policy.yaml:1: version"):
        glovebox.Runtime(home=shared_home, policy=path)


def test_policy_limits_tighten_the_manifest(shared_home: Path) -> None:
    policy = parse_policy("version: 1\nrules: [{action: allow}]\nlimits: [{limits: {output_bytes: 4}}]\n")
    with glovebox.Runtime(home=shared_home, policy=policy) as rt:
        assert rt.call("alpha", {"long": "enough"}).code == "output_too_large"
        assert rt.explain("alpha").limits.output_bytes == 4


patterns = st.sampled_from(["*", "alpha", "beta", "gamma", "delta", "?e*", "*a", "al*"])
principal_patterns = st.lists(st.sampled_from(["*", "p1", "p2", "p*", "stranger"]), min_size=1, max_size=2)
actions = st.sampled_from(["allow", "require_approval", "block"])
rules = st.lists(st.fixed_dictionaries({"tool": patterns, "principals": principal_patterns, "action": actions}))
principals = st.dictionaries(
    st.sampled_from(["p1", "p2", "p3"]), st.fixed_dictionaries({"scopes": st.lists(st.sampled_from(SCOPES))})
)
SEVERITY = {"allow": 0, "require_approval": 1, "block": 2}


def expected(document: dict[str, object], caller: str, name: str) -> str:
    """An independent oracle: the code a call must end with (None -> 'ok')."""
    held = set(document["principals"].get(caller, {}).get("scopes", []))  # type: ignore[attr-defined]
    if not set(TOOLS[name]) <= held:
        return "permission_denied"
    matched = [
        r["action"]
        for r in document["rules"]  # type: ignore[attr-defined]
        if fnmatch.fnmatchcase(name, r["tool"]) and any(fnmatch.fnmatchcase(caller, p) for p in r["principals"])
    ]
    action = max(matched, key=SEVERITY.__getitem__) if matched else document["defaults"]["action"]  # type: ignore[index]
    return {"allow": "ok", "require_approval": "approval_required", "block": "permission_denied"}[action]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rules=rules,
    principals=principals,
    default=actions,
    caller=st.sampled_from(["p1", "p2", "p3", "stranger", None]),
)
def test_no_call_runs_without_scopes_or_against_a_block(
    shared_home: Path, rules: list[dict[str, object]], principals: dict[str, object], default: str, caller: str | None
) -> None:
    document = {"version": 1, "principals": principals, "rules": rules, "defaults": {"action": default}}
    policy = glovebox.Policy.model_validate(document)
    with glovebox.Runtime(home=shared_home, policy=policy) as rt:
        for name in TOOLS:
            result = rt.call(name, {"n": 1}, principal=caller)
            want = expected(document, caller or "anonymous", name)
            assert (result.code or "ok") == want, (name, caller, result.to_dict())
            if not result.ok:
                assert result.meta["fuel_used"] == 0 and "logs" not in result.meta, "a refused call never ran"
            else:
                assert set(TOOLS[name]) <= set(policy.scopes_of(caller or "anonymous"))


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://shop:hunter2-in-the-dsn@127.0.0.1:5432/shop",
        "postgresql://shop@127.0.0.1/shop?sslmode=disable&password=hunter2-in-the-dsn",
        "postgres://shop@127.0.0.1/shop?PASSWORD=hunter2-in-the-dsn",
    ],
)
def test_a_refused_dsn_is_quoted_without_its_password(dsn: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    text = (
        f"version: 1\ngrants:\n  - tool: shop-query\n    sql:\n      - database: shop\n        dsn: {json.dumps(dsn)}\n"
    )
    error = expect_error(text)
    assert error.details["field"] == "grants.0.sql.0.dsn" and "never carries the password" in error.message
    assert "hunter2" not in error.message and "hunter2" not in json.dumps(error.details)
    assert "***" in error.message
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    shown = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", str(tmp_path / "home"), "policy", "check", str(policy)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # the operator's terminal, through the real CLI
    assert shown.returncode != 0 and "error [invalid_policy]" in shown.stderr, shown.stderr
    assert "hunter2" not in shown.stdout + shown.stderr

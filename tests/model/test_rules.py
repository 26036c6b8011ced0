"""The one matcher: host, path, method, scheme and port patterns (its doctests run with the package's)."""

from __future__ import annotations

import pydantic
import pytest

import glovebox
from glovebox.model._manifest import parse_manifest
from glovebox.model._rules import Target, check_rules, host_matches, path_extras, path_matches, path_refusal


@pytest.mark.parametrize(
    ("pattern", "host", "expected"),
    [
        ("api.example.com", "api.example.com", True),
        ("api.example.com", "API.Example.com.", True),
        ("api.example.com", "example.com", False),
        ("*.example.com", "api.example.com", True),
        ("*.example.com", "a.b.example.com", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "evilexample.com", False),
        ("*.example.com", "example.com.evil.net", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("::1", "[::1]", True),
        ("*.example.com", "127.0.0.1", False),
    ],
)
def test_host_patterns(pattern: str, host: str, expected: bool) -> None:
    assert host_matches(pattern, host) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("/users/*", "/users/1", True),
        ("/users/*", "/users/1/keys", False),
        ("/users/*", "/users", False),
        ("/users/*/keys", "/users/7/keys", True),
        ("/v1/*.json", "/v1/a.json", True),
        ("/v1/*.json", "/v1/a.xml", False),
        ("/**", "/", True),
        ("/**", "/a/b/c", True),
        ("/api/**", "/api", True),
        ("/api/**", "/api/v1/x", True),
        ("/api/**", "/apix", False),
        ("/*", "/", True),
        ("/*", "/a/b", False),
    ],
)
def test_path_patterns(pattern: str, path: str, expected: bool) -> None:
    assert path_matches(pattern, path) is expected


@pytest.mark.parametrize(
    "rule",
    [
        {"host": "*.com"},
        {"host": "exa mple.com"},
        {"host": "*"},
        {"host": "a.example.com", "paths": ["users/*"]},
        {"host": "a.example.com", "paths": ["/a**b"]},
        {"host": "a.example.com", "methods": ["GE T"]},
        {"host": "a.example.com", "ports": [0]},
        {"host": "a.example.com", "schemes": ["ftp"]},
    ],
)
def test_bad_patterns_are_refused_at_model_construction(rule: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        glovebox.HttpRule.model_validate(rule)


def test_manifest_validation_uses_the_matcher() -> None:
    with pytest.raises(glovebox.InvalidManifest, match="capabilities.http.0.host"):
        parse_manifest({"name": "t", "capabilities": {"http": [{"host": "*.com"}]}})


def test_rule_normalises_host_and_methods() -> None:
    rule = glovebox.HttpRule(host="*.Example.COM", methods=["get", "post"])
    assert rule.host == "*.example.com"
    assert rule.methods == ["GET", "POST"]


def _target(method: str = "GET", path: str = "/users/1", host: str = "api.example.com", port: int = 443) -> Target:
    return Target("https", host, port, method, path)


RULES = [glovebox.HttpRule(host="api.example.com", methods=["GET"], paths=["/users/*"])]


def test_check_rules_allows_a_match() -> None:
    rule, reason = check_rules(RULES, _target(), "granted")
    assert rule is RULES[0]
    assert reason == ""


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (_target(method="DELETE"), "method DELETE not allowed for https://api.example.com/users/1 (granted: GET)"),
        (_target(host="evil.example.com"), "host evil.example.com not allowed (granted: api.example.com)"),
        (_target(path="/admin"), "path /admin not allowed for api.example.com (granted: /users/*)"),
        (_target(port=8443), "port 8443 not allowed for api.example.com (granted: default)"),
        (Target("http", "api.example.com", 80, "GET", "/users/1"), "scheme http not allowed for api.example.com"),
    ],
)
def test_check_rules_names_the_failing_part(target: Target, reason: str) -> None:
    rule, message = check_rules(RULES, target, "granted")
    assert rule is None
    assert message.startswith(reason)


def test_check_rules_without_rules() -> None:
    rule, reason = check_rules([], _target(), "granted")
    assert rule is None
    assert reason == "the http capability is not granted for this call (requested GET https://api.example.com/users/1)"


# -- paths a server could read differently ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/users/../admin", "dot segments"),
        ("/users/./1", "dot segments"),
        ("/users/..;/admin", "dot segments"),
        ("/users/.;x/admin", "dot segments"),
        ("/users/..;jsessionid=1/admin", "dot segments"),
        ("/users/%2e%2e/admin", "dot segments once decoded"),
        ("/users/.%2E/admin", "dot segments once decoded"),
        ("/users/%2e%2e;/admin", "dot segments once decoded"),
        ("/users/..%3b/admin", "dot segments once decoded"),
        ("/users/1%2f..%2fadmin", "dot segments once decoded"),
        ("/users/1%5c..%5cadmin", "dot segments once decoded"),
        ("/users/..%20/admin", "dot segments once decoded"),
        ("/users/%252e%252e/admin", "dot segments twice decoded"),
        ("/users/1%252f..%252fadmin", "dot segments twice decoded"),
        ("/users/%25252e%25252e", "dot segments decoded 3 times"),
        ("/users/" + "%" + "25" * 9 + "2e", "percent-encoding nested 8 times or more"),
        ("/users/\\..\\admin", "a backslash"),
        ("/users/1%00.json", "an encoded control character"),
        ("/users/1%0d%0aX: y", "an encoded control character"),
        ("/users/1%7f", "an encoded control character"),
        ("/users/1%2500", "an encoded control character"),
    ],
)
def test_paths_refused_under_any_rule(path: str, problem: str) -> None:
    assert path_refusal(path) == problem


@pytest.mark.parametrize("path", ["/users/1", "/users/a.b", "/users/...", "/users/..a", "/users/%41", "/v1/a%20b"])
def test_ordinary_paths_pass(path: str) -> None:
    assert path_refusal(path) is None
    assert path_extras(path) == (None, False)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/users/1;jsessionid=x", "path /users/1;jsessionid=x has ';' parameters (allow_path_params is off) (granted)"),
        ("/users/a%2fb", "path /users/a%2fb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators is off)"),
        ("/users/a%2Eb", "path /users/a%2Eb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators is off)"),
        ("/users/a%5cb", "path /users/a%5cb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators is off)"),
        ("/users/a%252fb", "path /users/a%252fb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators"),
        ("/users/a%c0%afb", "path /users/a%c0%afb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators"),
    ],
)
def test_params_and_encoded_separators_need_the_rule(path: str, reason: str) -> None:
    rule, message = check_rules(RULES, _target(path=path), "granted")
    assert rule is None
    assert message.startswith(reason)


def test_a_rule_can_allow_params_and_encoded_separators() -> None:
    params = glovebox.HttpRule(host="api.example.com", paths=["/users/*"], allow_path_params=True)
    encoded = glovebox.HttpRule(host="api.example.com", paths=["/users/*"], allow_encoded_separators=True)
    assert check_rules([params], _target(path="/users/1;v=2"), "granted")[0] is params
    assert check_rules([encoded], _target(path="/users/a%2Fb"), "granted")[0] is encoded
    assert check_rules([params], _target(path="/users/a%2Fb"), "granted")[0] is None
    assert check_rules([encoded, params], _target(path="/users/1;v=2"), "granted")[0] is params

"""No secret-shaped value leaves in a result: a real guest (``tests/guests/leaker.c``) echoes what it
is given into a log line and its output (or its error message), and the scan redacts, refuses or warns."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities._scan import SecretScanner

BuildGuest = Any

#: A rotated GitHub token: not one of the call's own secrets, so only its shape gives it away.
ROTATED = "ghp_" + "R0tat3dT0kenAbCdEfGhIjKlMnOpQrStUvWx"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZ2VudCIsImF1ZCI6ImFwaSJ9"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def leaker(home: Path, tmp_path: Path, build_guest: BuildGuest, **checks: Any) -> glovebox.Runtime:
    document: dict[str, Any] = {"version": 1, "rules": [{"tool": "*", "action": "allow"}]}
    if checks:
        document["guards"] = [{"tool": "leaker", "checks": checks}]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(document))
    rt = glovebox.Runtime(home=home, policy=policy)
    rt.register(build_guest("leaker"), {"name": "leaker"})
    return rt


def audit_row(rt: glovebox.Runtime, result: glovebox.CallResult) -> dict[str, Any]:
    [row] = [row for row in rt.audit.records() if row["call_id"] == result.meta["call_id"]]
    return row


def test_by_default_a_rotated_token_is_redacted_from_the_output_and_the_log(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    with leaker(_isolated_env, tmp_path, build_guest) as rt:
        clean = rt.call("leaker", {"note": "nothing secret, sha256 " + "ab" * 32})
        leaked = rt.call("leaker", {"note": f"old token {ROTATED}"})
        row = audit_row(rt, leaked)
    assert clean.ok and "secret_scan" not in clean.meta
    assert leaked.ok and leaked.output == {"note": "old token [REDACTED:github_token]"}
    envelope = json.dumps(leaked.to_dict())
    assert ROTATED not in envelope and "[REDACTED:github_token]" in leaked.meta["logs"][0]["message"]
    assert leaked.meta["secret_scan"] == {
        "action": "redact",
        "count": 2,
        "findings": [{"kind": "github_token", "path": "/logs/0"}, {"kind": "github_token", "path": "/output/note"}],
    }
    egress = json.loads(row["egress"])
    assert egress["secret_scan"]["findings"][1] == {"kind": "github_token", "path": "/output/note"}
    assert ROTATED not in json.dumps(row)


def test_a_private_key_inside_base64_is_refused(_isolated_env: Path, tmp_path: Path, build_guest: BuildGuest) -> None:
    wrapped = base64.b64encode(PRIVATE_KEY.encode()).decode()
    with leaker(_isolated_env, tmp_path, build_guest, secret_scan="refuse") as rt:
        refused = rt.call("leaker", {"files": [{"name": "id_ed25519", "content_b64": wrapped}]})
        row = audit_row(rt, refused)
    assert refused.error is not None and refused.error.code == "evaluation_failed"
    assert refused.output is None
    assert refused.error.details["check"] == "secret_scan"
    assert refused.error.details["findings"] == [{"kind": "base64_private_key", "path": "/output/files/0/content_b64"}]
    assert wrapped not in json.dumps(refused.to_dict())  # the log line that carried it is redacted too
    assert row["outcome"] == "evaluation_failed"
    assert json.loads(row["egress"])["evaluation"] == {"verdict": "fail", "check": "secret_scan"}
    assert wrapped not in json.dumps(row)


def test_a_jwt_in_a_log_line_and_an_error_message_is_redacted(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    with leaker(_isolated_env, tmp_path, build_guest, secret_scan="refuse") as rt:
        failed = rt.call("leaker", {"mode": "fail", "session": JWT})
    assert failed.error is not None and failed.error.code == "guest_error"
    assert JWT not in json.dumps(failed.to_dict())
    assert "[REDACTED:jwt]" in failed.error.message and "[REDACTED:jwt]" in failed.meta["logs"][0]["message"]
    assert {finding["path"] for finding in failed.meta["secret_scan"]["findings"]} == {"/logs/0", "/error/message"}


def test_warn_keeps_the_value_and_records_the_finding(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    with leaker(_isolated_env, tmp_path, build_guest, secret_scan="warn") as rt:
        warned = rt.call("leaker", {"aws": key})
        row = audit_row(rt, warned)
    assert warned.ok and warned.output == {"aws": key}
    assert warned.meta["secret_scan"]["action"] == "warn"
    assert {"kind": "aws_access_key_id", "path": "/output/aws"} in warned.meta["secret_scan"]["findings"]
    assert key not in row["egress"]


def test_a_manifest_may_tighten_the_policys_action_never_loosen_it(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "version": 1,
                "rules": [{"tool": "*", "action": "allow"}],
                "guards": [{"tool": "*", "checks": {"secret_scan": "redact"}}],
            }
        )
    )
    with glovebox.Runtime(home=_isolated_env, policy=policy) as rt:
        rt.register(build_guest("leaker"), {"name": "loose", "checks": {"secret_scan": "off"}})
        rt.register(build_guest("leaker"), {"name": "strict", "checks": {"secret_scan": "refuse"}})
        loose = rt.call("loose", {"k": ROTATED})
        strict = rt.call("strict", {"k": ROTATED})
    assert loose.ok and loose.output == {"k": "[REDACTED:github_token]"}
    assert strict.error is not None and strict.error.code == "evaluation_failed"


def test_high_entropy_strings_are_caught_only_when_asked(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    random_token = "q8Zr2LmX0vNw7TbK4pYs9HdJ6cFg1AeU"
    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    with leaker(_isolated_env, tmp_path, build_guest) as rt:
        assert rt.call("leaker", {"t": random_token}).output == {"t": random_token}
    with leaker(_isolated_env, tmp_path, build_guest, secret_entropy_bits=4.5) as rt:
        caught = rt.call("leaker", {"t": random_token, "digest": digest})
    assert caught.output == {"t": "[REDACTED:high_entropy]", "digest": digest}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "github_token"),
        ("sk-proj-" + "a1B2c3D4e5F6g7H8i9J0kLmN", "openai_key"),
        ("sk-ant-api03-" + "x" * 40, "anthropic_key"),
        ("xoxb-123456789012-abcdefABCDEF", "slack_token"),
        ("ASIA" + "Y34FZKBOKMUTVV7A", "aws_access_key_id"),
        (JWT, "jwt"),
        (PRIVATE_KEY.strip(), "private_key"),
        (base64.urlsafe_b64encode(f"token={ROTATED}".encode()).decode(), "base64_github_token"),
    ],
)
def test_each_known_format_is_found(text: str, kind: str) -> None:
    redacted, kinds = SecretScanner().redact_text(f"before {text} after")
    assert kinds == [kind] and redacted == f"before [REDACTED:{kind}] after"


@pytest.mark.parametrize(
    "text",
    ["task-runner-configuration-value", "sk-learn-pipeline-configuration", "a" * 64, "0123456789abcdef" * 4],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert SecretScanner().redact_text(text) == (text, [])

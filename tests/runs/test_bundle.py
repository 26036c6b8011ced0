"""Run bundles: ``glovebox runs export`` writes one signed file; ``runs verify`` checks it in a fresh home
with the public key only, and refuses it after any byte changes (runtime/_runbundle.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from .conftest import HitCounter

PUBLISH = """export default async function (input, tools) {
  const stats = await tools.call("text-stats", { text: input.text });
  const sent = await tools.call("hc-approve", { url: input.base + "/publish" });
  return { words: stats.words, status: sent.status };
}"""


def _finished_run(rt: glovebox.Runtime, upstream: HitCounter) -> glovebox.RunResult:
    """A run that paused for an approval, was approved by admin, and resumed to the end."""
    paused = rt.run(PUBLISH, input={"text": "a b c", "base": upstream.url("")}, principal="agent")
    assert paused.status == "paused" and paused.error is not None, paused.to_dict()
    rt.approve(paused.error.details["approval_id"], principal="admin")
    done = rt.runs.resume(paused.run_id)
    assert done.status == "done", done.to_dict()
    return done


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.mark.system
def test_an_exported_bundle_verifies_in_a_fresh_home_with_the_public_key_only(
    rt: glovebox.Runtime, upstream: HitCounter, tmp_path: Path
) -> None:
    done = _finished_run(rt, upstream)
    bundle = tmp_path / "run.bundle"
    code, out = _cli("--home", str(rt.home), "runs", "export", done.run_id, "-o", str(bundle), "--by", "auditor")
    assert code == 0, out
    public = rt.home / "keys" / "run-bundles.pub"
    assert f"public key: {public}" in out
    fresh = tmp_path / "elsewhere"
    code, out = _cli("--home", str(fresh), "runs", "verify", str(bundle), "--key", str(public))
    assert code == 0, out
    assert out.startswith(f"ok: run {done.run_id}, program sha256:") and "2 steps" in out and "1 approvals" in out

    payload = json.loads(bundle.read_text())["payload"]
    assert payload["program"]["source"] == PUBLISH and payload["exported_by"] == "auditor"
    assert payload["program"]["program_digest"] == rt.runs.store.program_digest(done.run_id)
    assert [step["kind"] for step in payload["journal"]] == ["call", "call"]
    nested = [row for row in payload["audit"] if row["tool"] != "glovebox:run"]
    assert {row["call_id"] for row in nested} >= {call["call_id"] for call in done.calls}
    attempts = [row for row in payload["audit"] if row["tool"] == "glovebox:run"]
    assert [row["outcome"] for row in attempts] == ["approval_required", "ok"]
    assert all(row["hash"] and row["prev_hash"] and row["seq"] for row in payload["audit"])  # chain positions
    [approval] = payload["approvals"]
    assert approval["approved_by"] == "admin" and approval["status"] in ("approved", "used")
    assert approval["approved_at"]
    assert {artifact["tool"] for artifact in payload["artifacts"]} == {"text-stats@1.0.0", "hc-approve@0.0.0"}
    assert all(artifact["digest"].startswith("sha256:") for artifact in payload["artifacts"])
    assert payload["policy_digest"].startswith("sha256:")


@pytest.mark.system
def test_any_changed_byte_is_refused(rt: glovebox.Runtime, upstream: HitCounter, tmp_path: Path) -> None:
    done = _finished_run(rt, upstream)
    bundle = tmp_path / "run.bundle"
    glovebox.export_run(rt, done.run_id, bundle)
    public = rt.home / "keys" / "run-bundles.pub"
    good = bundle.read_bytes()
    assert glovebox.verify_run_bundle(bundle, key=public).run_id == done.run_id
    positions = sorted({*range(0, len(good), max(1, len(good) // 150)), len(good) - 1, len(good) - 2})
    for position in positions:
        for new in {good[position] ^ 0x01, ord(" ")}:
            if new == good[position]:
                continue
            changed = tmp_path / "changed.bundle"
            changed.write_bytes(good[:position] + bytes([new]) + good[position + 1 :])
            with pytest.raises(glovebox.SignatureError):
                glovebox.verify_run_bundle(changed, key=public)
                context = good[position - 20 : position + 20]
                pytest.fail(f"byte {position} changed to {new} was not refused: {context!r}")
    changed.write_bytes(good + b"\n")  # a byte added at the end
    code, out = _cli("--home", str(tmp_path / "fresh"), "runs", "verify", str(changed), "--key", str(public))
    assert code == 1 and out.startswith("error [invalid_signature]:"), out


@pytest.mark.system
def test_another_signer_or_an_untrusted_key_is_refused(
    rt: glovebox.Runtime, upstream: HitCounter, tmp_path: Path
) -> None:
    done = _finished_run(rt, upstream)
    bundle = tmp_path / "run.bundle"
    glovebox.export_run(rt, done.run_id, bundle)
    _, other = glovebox.generate_keypair("other", tmp_path / "keys")
    with pytest.raises(glovebox.SignatureError, match="not signed by key"):
        glovebox.verify_run_bundle(bundle, key=other)
    fresh = tmp_path / "fresh"
    code, out = _cli("--home", str(fresh), "runs", "verify", str(bundle))  # a home that trusts nothing
    assert code == 1 and "does not trust" in out, out
    glovebox.Keyring(fresh).trust(rt.home / "keys" / "run-bundles.pub")  # once trusted, no --key is needed
    code, out = _cli("--home", str(fresh), "runs", "verify", str(bundle))
    assert code == 0 and out.startswith("ok: run"), out

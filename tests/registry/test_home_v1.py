"""A home written by the previous main (commit 1f39c8f) opens, verifies and calls its tools.

``tests/fixtures/home-v1/`` was written by ``tests/fixtures/make_home_v1.py``
with the old code (see its docstring); ``home-v1.json`` records what it did.
The fixture has no compiled cache, no ``-wal``/``-shm`` files and no journal
directory: the new code rebuilds them. Its bytes are v1 wire formats: the
signed manifest text, the remote descriptor, the approvals' input digests and
the audit hash chain must all still match, byte for byte, what
``glovebox.core._canonical`` produces now.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.audit._log import FIELDS
from glovebox.core._canonical import canonical_bytes, canonical_json, sha256_digest, sha256_hex
from glovebox.remote._proxy import Descriptor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORD: dict[str, Any] = json.loads((FIXTURES / "home-v1.json").read_text())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A copy of the v1 home (the fixture itself is never written to)."""
    copy = tmp_path / "home-v1"
    shutil.copytree(FIXTURES / "home-v1", copy)
    return copy


@pytest.fixture
def rt(home: Path, tmp_path: Path) -> Any:
    policy = tmp_path / "policy.yaml"
    policy.write_text(RECORD["policy"])
    with glovebox.Runtime(home=home, policy=policy, require_signatures=True) as rt:
        yield rt


def stored_rows(home: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(home / "audit.sqlite") as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM audit ORDER BY seq")]
    db.close()
    return rows


def test_the_fixture_is_what_the_old_code_left_without_its_rebuildable_parts() -> None:
    home = FIXTURES / "home-v1"
    assert not (home / "cache").exists() and not (home / "audit.journal").exists()
    assert not [p for p in home.rglob("*") if p.name.endswith(("-wal", "-shm"))]
    assert len(stored_rows(home)) == RECORD["audit_rows"] == len(RECORD["calls"])


def test_the_audit_chain_verifies_with_the_rows_it_was_written_with(rt: glovebox.Runtime) -> None:
    verification = rt.audit.verify()
    assert verification.ok, verification.problem
    assert verification.rows == RECORD["audit_rows"]
    assert [row["outcome"] for row in rt.audit.records()] == [call.get("code", "ok") for call in RECORD["calls"]]


def test_a_row_hash_recomputed_with_the_canonical_encoder_matches_byte_for_byte(home: Path) -> None:
    rows = stored_rows(home)
    unicode = next(row for row in rows if "日本語" in (row["input"] or ""))
    fields = {name: unicode[name] for name in FIELDS}
    assert not unicode["truncated"]
    assert sha256_hex(unicode["prev_hash"] + canonical_json(fields)) == unicode["hash"]
    assert unicode["prev_hash"] == rows[unicode["seq"] - 2]["hash"]


def test_an_input_digest_recomputed_with_the_canonical_encoder_matches(home: Path) -> None:
    value = RECORD["calls"][1]["input"]
    assert any(ord(ch) > 127 for ch in value["text"])
    (row,) = [row for row in stored_rows(home) if row["input"] and json.loads(row["input"]) == value]
    assert sha256_digest(canonical_bytes(value, allow_nan=False)) == row["input_digest"]


def test_the_signature_verifies_against_the_registered_manifest(rt: glovebox.Runtime, home: Path) -> None:
    info = rt.tool("text-stats")
    assert info.digest == RECORD["digest"] and info.signer == RECORD["signer"]
    assert rt.trusted_keys() == [RECORD["signer"]]
    assert not info.description.isascii()
    artifact = home / "blobs" / "sha256" / (info.digest.removeprefix("sha256:") + ".wasm")
    signature = FIXTURES / "home-v1.text-stats.wasm.sig"
    assert rt.verify(artifact, manifest=info.manifest, signature=signature) == RECORD["signer"]
    # The v1 signed form: the manifest's canonical text with non-ASCII characters escaped.
    with sqlite3.connect(home / "registry.sqlite") as db:
        (stored,) = db.execute("SELECT manifest FROM tools WHERE name = 'text-stats'").fetchone()
    db.close()
    assert stored.isascii() and info.manifest.to_json() == stored


def test_a_changed_manifest_no_longer_verifies(rt: glovebox.Runtime, home: Path) -> None:
    info = rt.tool("text-stats")
    artifact = home / "blobs" / "sha256" / (info.digest.removeprefix("sha256:") + ".wasm")
    changed = info.manifest.model_copy(update={"description": info.manifest.description + "!"})
    with pytest.raises(glovebox.SignatureError):
        rt.verify(artifact, manifest=changed, signature=FIXTURES / "home-v1.text-stats.wasm.sig")


def test_the_tool_answers_as_recorded(rt: glovebox.Runtime) -> None:
    for call in RECORD["calls"]:
        if call["principal"] != "agent":
            continue
        result = rt.call(call["tool"], call["input"], principal="agent")
        assert result.ok == call["ok"], result.to_dict()
        assert (result.output if result.ok else result.code) == call.get("output", call.get("code"))
    verification = rt.audit.verify()
    assert verification.ok and verification.rows == RECORD["audit_rows"] + 5


def test_a_fresh_process_rebuilds_the_compiled_cache_and_the_journal(home: Path, tmp_path: Path) -> None:
    # In a process of its own: this one's engine may hold the component already (another test built it).
    policy = tmp_path / "policy.yaml"
    policy.write_text(RECORD["policy"])
    call = RECORD["calls"][1]
    code = (
        "import json, sys, glovebox\n"
        "with glovebox.Runtime(home=sys.argv[1], policy=sys.argv[2], require_signatures=True) as rt:\n"
        "    print(json.dumps(rt.call('text-stats', json.loads(sys.argv[3]), principal='agent').to_dict()))\n"
    )
    argv = [sys.executable, "-c", code, str(home), str(policy), json.dumps(call["input"])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["output"] == call["output"]
    assert list((home / "cache" / "compiled").glob(f"{RECORD['digest']}-*.cwasm"))
    assert (home / "audit.journal").is_dir()
    assert stored_rows(home)[-1]["input"] == json.dumps(call["input"], ensure_ascii=False, sort_keys=True)


def test_the_pending_approval_is_still_pending_and_its_digest_still_matches(rt: glovebox.Runtime) -> None:
    (call,) = [call for call in RECORD["calls"] if call["principal"] == "intern"]
    (pending,) = rt.pending_approvals()
    assert [pending.id] == RECORD["pending_approvals"]
    assert pending.input_digest == sha256_digest(canonical_bytes(call["input"], allow_nan=False))
    rt.approve(pending.id, principal="admin")
    result = rt.call("text-stats", call["input"], principal="intern")
    assert result.ok, result.to_dict()
    assert result.output["bytes"] == len(call["input"]["text"].encode())
    assert rt.pending_approvals() == []


def test_the_remote_tool_descriptor_still_matches_its_digest(rt: glovebox.Runtime, home: Path) -> None:
    info = rt.tool("lab-add")
    assert info.kind == "mcp-remote" and not info.description.isascii()
    blob = (home / "blobs" / "sha256" / (info.digest.removeprefix("sha256:") + ".mcp-remote.json")).read_bytes()
    assert sha256_digest(blob) == info.digest
    assert canonical_bytes(json.loads(blob)) == blob
    descriptor = Descriptor.from_bytes(blob)
    assert descriptor.to_bytes() == blob and descriptor.origin == RECORD["mcp_url"].removesuffix("/mcp")

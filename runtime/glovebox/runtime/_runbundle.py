"""Run bundles: one signed file holding the evidence of a run, checked anywhere with the public key only.

:func:`export_run` writes one JSON document, its bytes the canonical JSON of::

    {"format": "glovebox-run-bundle/1",
     "payload": {"run", "program", "journal", "audit", "approvals", "artifacts", "policy_digest",
                 "exported_at", "exported_by"},
     "signature": {"algorithm": "ed25519", "key_id", "public_key", "value"}}

signed (Ed25519, the registry's keys: :mod:`glovebox.registry._signing`) over
``b"glovebox-run-bundle-v1\\n"`` and the payload's canonical JSON. The payload
holds the run (owner, status, attempts, input, result), its program (source,
script, ``program_digest`` and the script's digest), every journal step, every
audit row naming the run (each attempt's and each nested call's, with its chain
position: ``seq``, ``prev_hash``, ``hash``), the approvals those calls used
(approver and time), the digest of each tool version called, and the digest of
the policy in force at export.

The signing key is the home's (``HOME/keys/run-bundles.key``, made on first
export, its public half ``run-bundles.pub`` beside it) unless one is given.

:func:`verify_run_bundle` needs no home: it refuses a file that is not exactly
the canonical bytes of its own document (so any changed byte is refused, even
one JSON would read the same), a signature that the given public key (or a
trusted key of a home) did not make, a program whose digest is not the one
recorded, and an audit row whose hash is not its content chained to its
``prev_hash``.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit._rowform import row_hash
from ..core._canonical import canonical_json, sha256_digest
from ..core._errors import SignatureError
from ..policy._approvals import ApprovalStore
from ..registry._keyring import write_keypair
from ..registry._signing import TrustStore, key_id, load_private_key, load_public_key, new_keypair_pem
from ..runs._seal import program_digest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ._runtime import Runtime

__all__ = ["BUNDLE_FORMAT", "RunBundleCheck", "bundle_key", "export_run", "verify_run_bundle"]

BUNDLE_FORMAT = "glovebox-run-bundle/1"
_DOMAIN = b"glovebox-run-bundle-v1\n"
_KEY_NAME = "run-bundles"


def bundle_key(home: Path) -> Path:
    """The home's bundle signing key (``HOME/keys/run-bundles.key``), made on first use; its path."""
    private = home / "keys" / f"{_KEY_NAME}.key"
    if not private.exists():
        try:
            write_keypair(_KEY_NAME, home / "keys", new_keypair_pem)
        except FileExistsError:  # another process made it meanwhile
            pass
    return private


def _egress(row: dict[str, Any]) -> dict[str, Any]:
    egress = row.get("egress")
    parsed = json.loads(egress) if isinstance(egress, str) else egress
    return parsed if isinstance(parsed, dict) else {}


def _run_rows(rt: Runtime, run_id: str, call_ids: set[str]) -> list[dict[str, Any]]:
    """Every audit row naming the run (its attempts', cancels' and nested calls'), in chain order."""
    rows = []
    for row in rt.audit.records():
        run = _egress(row).get("run")
        if (isinstance(run, dict) and run.get("run_id") == run_id) or row.get("call_id") in call_ids:
            rows.append(row)
    return rows


def _approvals(home: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The approvals the run's nested calls asked for or used: who decided, and when."""
    ids = []
    for row in rows:
        approval = _egress(row).get("approval")
        if isinstance(approval, dict) and isinstance(approval.get("id"), str) and approval["id"] not in ids:
            ids.append(approval["id"])
    store = ApprovalStore(home)
    try:
        found = [store.get(approval_id) for approval_id in ids]
    finally:
        store.close()
    return [approval.to_dict() for approval in found if approval is not None]


def _payload(rt: Runtime, run_id: str, by: str | None) -> dict[str, Any]:
    record = rt.runs.record(run_id)
    if record is None:
        raise ValueError(f"no run {run_id!r} in this home")
    steps = [step.to_dict() for step in rt.runs.journal(run_id)]
    call_ids = {step["call_id"] for step in steps if step["call_id"]}
    rows = _run_rows(rt, run_id, call_ids)
    artifacts = sorted(
        {(row["tool"], row["digest"]) for row in rows if row.get("tool") != "glovebox:run" and row.get("digest")}
    )
    return {
        "run": {
            "run_id": record.run_id,
            "principal": record.principal,
            "status": record.status,
            "lang": record.lang,
            "attempts": record.attempts,
            "created": record.created,
            "updated": record.updated,
            "input": record.input,
            "result": record.result,
        },
        "program": {
            "source": record.source,
            "script": record.script,
            "program_digest": rt.runs.store.program_digest(run_id),
            "script_digest": sha256_digest(record.script.encode("utf-8", "surrogatepass")),
        },
        "journal": steps,
        "audit": rows,
        "approvals": _approvals(rt.home, rows),
        "artifacts": [{"tool": tool, "digest": digest} for tool, digest in artifacts],
        "policy_digest": sha256_digest(canonical_json(rt.policy.model_dump(mode="json"))),
        "exported_at": time.time(),
        "exported_by": by,
    }


def export_run(
    rt: Runtime, run_id: str, path: str | Path, *, key: str | Path | None = None, by: str | None = None
) -> dict[str, Any]:
    """Write run ``run_id``'s signed bundle to ``path`` (see the module docstring); its signature part.

    Args:
        rt: the Runtime whose home holds the run, its audit log and approvals.
        run_id: the run.
        path: where to write the bundle (replaced if it exists).
        key: an Ed25519 private key (PEM); default the home's (:func:`bundle_key`).
        by: who exported it (recorded in the bundle).

    Raises:
        ValueError: there is no run ``run_id``.
        SignatureError: ``key`` cannot be read or is not an Ed25519 private key.
    """
    from cryptography.hazmat.primitives import serialization

    private = load_private_key(Path(key) if key is not None else bundle_key(rt.home))
    payload = _payload(rt, run_id, by)
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    signature = {
        "algorithm": "ed25519",
        "key_id": key_id(private.public_key()),
        "public_key": base64.b64encode(raw).decode(),
        "value": base64.b64encode(private.sign(_signed_bytes(payload))).decode(),
    }
    document = {"format": BUNDLE_FORMAT, "payload": payload, "signature": signature}
    Path(path).write_bytes(_document_bytes(document))
    return signature


def _signed_bytes(payload: dict[str, Any]) -> bytes:
    return _DOMAIN + canonical_json(payload).encode("utf-8", "surrogatepass")


def _document_bytes(document: dict[str, Any]) -> bytes:
    return canonical_json(document).encode("utf-8", "surrogatepass") + b"\n"


@dataclass(frozen=True)
class RunBundleCheck:
    """What :func:`verify_run_bundle` found in a bundle it accepted."""

    run_id: str
    program_digest: str
    key_id: str
    steps: int
    audit_rows: int
    approvals: int
    payload: dict[str, Any] = field(repr=False)


def verify_run_bundle(
    path: str | Path, *, key: str | Path | None = None, home: str | Path | None = None
) -> RunBundleCheck:
    """Check a run bundle with a public key only (see the module docstring).

    Args:
        path: the bundle.
        key: the signer's Ed25519 public key (PEM); without it, the trusted keys of ``home``
            (``glovebox keys trust``).
        home: the home whose trusted keys are used when ``key`` is None.

    Raises:
        SignatureError: the bundle is not one, was changed, or was not signed by the key.
    """
    data = Path(path).read_bytes()
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignatureError(f"{path} is not a run bundle: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != BUNDLE_FORMAT or len(document) != 3:
        raise SignatureError(f"{path} is not a run bundle ({BUNDLE_FORMAT})")
    if _document_bytes(document) != data:
        raise SignatureError(f"{path}: the bundle's bytes are not the ones it was written with; refused")
    payload, signature = document.get("payload"), document.get("signature")
    if not isinstance(payload, dict) or not isinstance(signature, dict):
        raise SignatureError(f"{path} is not a run bundle: no payload or signature")
    public = _signer(signature, key, home)
    _check_signature(public, signature, payload, path)
    return _check_payload(payload, key_id(public), path)


def _signer(signature: dict[str, Any], key: str | Path | None, home: str | Path | None) -> Ed25519PublicKey:
    """The key the bundle must be signed by: ``key``, else the home's trusted key of its key id."""
    if key is not None:
        return load_public_key(Path(key))
    from ..core._settings import home_dir

    trusted = TrustStore.load(home_dir(home) / "trusted_keys")
    found = trusted.keys.get(str(signature.get("key_id")))
    if found is None:
        raise SignatureError(
            f"the bundle is signed by key {signature.get('key_id')!r}, which this home does not trust:"
            " pass --key PUB, or trust it with glovebox keys trust"
        )
    return found


def _check_signature(public: Ed25519PublicKey, signature: dict[str, Any], payload: dict[str, Any], path: Any) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    expected = {"algorithm": "ed25519", "key_id": key_id(public), "public_key": base64.b64encode(raw).decode()}
    if any(signature.get(name) != value for name, value in expected.items()) or set(signature) != {*expected, "value"}:
        raise SignatureError(f"{path}: the bundle was not signed by key {key_id(public)}; refused")
    value = str(signature.get("value"))
    try:
        decoded = base64.b64decode(value, validate=True)
        if base64.b64encode(decoded).decode() != value:  # one signature, one spelling (base64's spare bits)
            raise ValueError("not canonical base64")
        public.verify(decoded, _signed_bytes(payload))
    except (InvalidSignature, ValueError) as exc:
        raise SignatureError(f"{path}: the bundle's signature does not match its contents; refused") from exc


def _check_payload(payload: dict[str, Any], signer: str, path: Any) -> RunBundleCheck:
    """What a good signature still leaves to check: the program's digest, each audit row's hash."""
    try:
        program, run = payload["program"], payload["run"]
        digest = program_digest(program["source"])
        if digest != program["program_digest"]:
            raise SignatureError(f"{path}: the program is not the one its digest names; refused")
        for row in payload["audit"]:
            if row_hash(str(row["prev_hash"]), row) != row["hash"]:
                raise SignatureError(f"{path}: audit row {row.get('seq')} does not hash to its recorded hash")
        return RunBundleCheck(
            run["run_id"], digest, signer, len(payload["journal"]), len(payload["audit"]),
            len(payload["approvals"]), payload,
        )  # fmt: skip
    except (KeyError, TypeError) as exc:
        raise SignatureError(f"{path} is not a run bundle: {exc!r} is missing") from exc

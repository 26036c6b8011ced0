"""``glovebox.save_run``: a run's program registered as a tool (``kind = "program"``).

The tool's artifact is a descriptor (the program's language, source, digest,
the run it came from and who saved it) in the registry's blob store; calling
it runs the program as the caller (:mod:`glovebox.runtime.executors._program`).
Its input schema is the one given, or inferred from the run's input
(:func:`infer_schema`). Saving is governed by the policy: the saver needs the
scope :data:`SAVE_SCOPE`; a program saved with ``review`` waits for an
approver before its first use (:mod:`glovebox.runtime.executors._program`);
every use is an ordinary call the policy decides (a rule ``action:
require_approval`` for it holds each call for a person).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._canonical import canonical_json, sha256_digest
from ..core._errors import PermissionDenied
from ..model._manifest import Manifest
from ..model._result import ToolInfo

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["SAVE_SCOPE", "infer_schema", "save_run"]

#: The scope a principal needs to save a run's program as a tool.
SAVE_SCOPE = "glovebox:save"


def infer_schema(value: Any) -> dict[str, Any]:
    """A JSON Schema that ``value`` (a run's first input) matches, its objects' keys all required.

    >>> infer_schema({"text": "hi", "n": 2, "tags": ["a"]})["properties"]
    {'n': {'type': 'integer'}, 'tags': {'type': 'array', 'items': {'type': 'string'}}, 'text': {'type': 'string'}}
    """
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array", "items": infer_schema(value[0])} if value else {"type": "array"}
    if isinstance(value, dict):
        keys = sorted(value)
        return {"type": "object", "properties": {k: infer_schema(value[k]) for k in keys}, "required": keys}
    return {"type": "null"}


def save_run(
    rt: Runtime,
    run_id: str,
    name: str,
    *,
    input_schema: dict[str, Any] | bool | None = None,
    version: str = "1.0.0",
    description: str | None = None,
    by: str | None = None,
    review: bool = False,
) -> ToolInfo:
    """Register run ``run_id``'s program as the tool ``name@version``.

    Args:
        rt: the Runtime whose home holds the run and the registry.
        run_id: a run that finished ``done``.
        name: the tool's name.
        input_schema: its input schema (default: inferred from the run's input).
        version: its version.
        description: what it does (default: names the run).
        by: who saves it (default: the run's principal); needs the scope ``glovebox:save``.
        review: whether its first use waits for a person's approval (its review); once approved,
            it runs without one.

    Raises:
        ValueError: there is no such run, or it did not finish ``done``.
        PermissionDenied: ``by`` lacks ``glovebox:save``.
        ProgramChanged, JournalTampered: the stored run is not what it wrote.
        InvalidManifest: the name, version or schema is refused, or ``name@version`` exists.
    """
    record = rt.runs.record(run_id)
    if record is None:
        raise ValueError(f"no run {run_id!r} in this home")
    if record.status != "done":
        raise ValueError(f"run {run_id!r} is {record.status}: only a program that ran to the end is saved")
    rt.runs.store.check(run_id)
    saver = by or record.principal
    if SAVE_SCOPE not in rt.policy.scopes_of(saver):
        raise PermissionDenied(
            f"principal {saver!r} may not save a program as a tool: that takes the scope {SAVE_SCOPE!r}",
            details={"principal": saver, "scopes": [SAVE_SCOPE]},
        )
    manifest = Manifest(
        name=name,
        version=version,
        description=description or f"A saved program (run {run_id}).",
        input_schema=infer_schema(record.input) if input_schema is None else input_schema,
        kind="program",
    )
    descriptor: dict[str, Any] = {
        "lang": record.lang,
        "source": record.source,
        "program_digest": rt.runs.store.program_digest(run_id),
        "run_id": run_id,
        "saved_by": saver,
    }
    if review:
        descriptor["review"] = True
    data = canonical_json(descriptor).encode("utf-8", "surrogatepass")
    staging = rt.home / "cache"
    staging.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=staging, suffix=".program.json")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    try:
        [info] = rt.registry.add_descriptors([(manifest, sha256_digest(data), Path(staged))], {})
    finally:
        Path(staged).unlink(missing_ok=True)
    return info

"""Compile an untrusted artifact in a child process, within bounded time and memory.

A wasm bomb (thousands of functions, deep nesting, a huge module) can make
Cranelift spend minutes and gigabytes. Compiling in a child process with
``RLIMIT_AS`` / ``RLIMIT_CPU`` and a wall-clock timeout keeps the registering
process safe: the child either writes the serialized component (which the
parent then memory-maps) or fails with a message the parent turns into
``InvalidArtifact``. The child uses the same code-generation settings as the
engines, so its output loads on each of them, pooled or not (see ``_codegen``).
The limits are never raised above what the parent itself was given.

The child runs this file as a script (``python _compile.py SRC OUT CODEGEN``)
and imports only ``_codegen`` (stdlib + wasmtime), not the whole package, so
that it starts in a fraction of the time ``import glovebox`` takes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

if __package__:
    from ..core._errors import InvalidArtifact
    from ._settings import EngineSettings

__all__ = ["COMPILE_MEMORY_BYTES", "COMPILE_TIMEOUT_S", "precompile"]

COMPILE_TIMEOUT_S = 120
COMPILE_MEMORY_BYTES = 8 * 1024 * 1024 * 1024


def precompile(src: Path, out: Path, settings: EngineSettings, source: str) -> None:
    """Compile ``src`` into ``out`` in a resource-limited child; raise InvalidArtifact on failure."""
    argv = [sys.executable, "-I", __file__, str(src), str(out), json.dumps(settings.codegen())]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise InvalidArtifact(f"{source} took longer than {COMPILE_TIMEOUT_S} s to compile; refused") from exc
    if proc.returncode == 0 and out.is_file():
        return
    message = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if not message:
        message = f"the compiler ran out of its {COMPILE_MEMORY_BYTES >> 30} GiB memory or time budget"
    raise InvalidArtifact(f"{source} is not a valid component: {message}")


def _limit_resources() -> None:
    _lower_limit(resource.RLIMIT_AS, COMPILE_MEMORY_BYTES)
    _lower_limit(resource.RLIMIT_CPU, COMPILE_TIMEOUT_S)
    _lower_limit(resource.RLIMIT_CORE, 0)


def _lower_limit(which: int, value: int) -> None:
    """Set both limits to ``value``, or to the hard limit when that is already lower."""
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _main(src: str, out: str, codegen_json: str) -> int:
    _limit_resources()
    import wasmtime
    from wasmtime.component import Component

    sys.path.insert(0, str(Path(__file__).parent))
    import _codegen  # type: ignore[import-not-found]  # this directory, as a top-level module

    engine = wasmtime.Engine(_codegen.compile_config(**json.loads(codegen_json)))
    try:
        component = Component(engine, Path(src).read_bytes())
        data = component.serialize()
    except wasmtime.WasmtimeError as exc:
        print(" ".join(str(exc).strip().splitlines()[:3]))
        return 1
    except MemoryError:
        print(f"compiling needed more than {COMPILE_MEMORY_BYTES >> 30} GiB of memory")
        return 1
    tmp = f"{out}.tmp{os.getpid()}"
    Path(tmp).write_bytes(data)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through precompile()
    sys.exit(_main(*sys.argv[1:4]))

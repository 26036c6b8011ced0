"""Compile an untrusted artifact in a child process, within bounded time and memory.

A wasm bomb (thousands of functions, deep nesting, a huge module) can make
Cranelift spend minutes and gigabytes. Compiling in a child process with
``RLIMIT_AS`` / ``RLIMIT_CPU`` and a wall-clock timeout keeps the registering
process safe: the child either writes the serialized component (which the
parent then memory-maps) or fails with a message the parent turns into
``InvalidArtifact``. The child uses the same code-generation settings as the
engines, so its output loads on each of them, pooled or not (see ``_codegen``).
The limits are never raised above what the parent itself was given.

The time allowed grows with the artifact: :data:`COMPILE_TIMEOUT_S` plus
:data:`COMPILE_S_PER_MIB` per MiB (a 25 KB C tool gets two minutes, an 18 MB
componentize-py component about six and a half), or exactly
``GLOVEBOX_COMPILE_TIMEOUT_S`` seconds when that is set; the refusal names
both. On a terminal, a compile that takes more than a second shows how long it
has run and its limit on stderr.

The child runs this file as a script (``python _compile.py SRC OUT CODEGEN``)
and imports only ``_codegen`` (stdlib + wasmtime), not the whole package, so
that it starts in a fraction of the time ``import glovebox`` takes.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

if __package__:
    from ..core._errors import InvalidArtifact
    from ..core._settings import compile_timeout_s
    from ._settings import EngineSettings

__all__ = ["COMPILE_MEMORY_BYTES", "COMPILE_S_PER_MIB", "COMPILE_TIMEOUT_S", "compile_timeout", "precompile"]

COMPILE_TIMEOUT_S = 120
COMPILE_S_PER_MIB = 15
COMPILE_MEMORY_BYTES = 8 * 1024 * 1024 * 1024
_MIB = 1024 * 1024
#: Seconds a compile runs before a terminal is shown its progress.
_QUIET_S = 1.0


def compile_timeout(size_bytes: int) -> tuple[float, str]:
    """The seconds an artifact of ``size_bytes`` may compile for, and where that number came from."""
    try:
        fixed = compile_timeout_s()
    except ValueError as exc:
        raise InvalidArtifact(str(exc)) from exc
    if fixed is not None:
        return fixed, "set by GLOVEBOX_COMPILE_TIMEOUT_S"
    seconds = COMPILE_TIMEOUT_S + COMPILE_S_PER_MIB * size_bytes / _MIB
    why = f"{COMPILE_TIMEOUT_S} s + {COMPILE_S_PER_MIB} s per MiB of artifact"
    return round(seconds, 1), why + "; set GLOVEBOX_COMPILE_TIMEOUT_S to change it"


def precompile(src: Path, out: Path, settings: EngineSettings, source: str, *, native: bool = False) -> None:
    """Compile ``src`` into ``out`` in a resource-limited child; raise InvalidArtifact on failure.

    With ``native``, the child compiles with the native core's engine (``glovebox_native``) instead.
    """
    timeout, why = compile_timeout(src.stat().st_size)
    argv = [sys.executable, "-I", __file__, str(src), str(out), json.dumps(settings.codegen()), str(timeout)]
    argv += ["native"] if native else []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            stdout, _ = _wait(proc, timeout, source, src.stat().st_size)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.wait()
            raise _too_slow(source, timeout, why) from exc
    if proc.returncode == 0 and out.is_file():
        return
    if proc.returncode == -signal.SIGXCPU:  # its CPU time (several compiler threads) ran out first
        raise _too_slow(source, timeout, why)
    message = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    if not message:
        message = f"the compiler ran out of its {COMPILE_MEMORY_BYTES >> 30} GiB memory or {timeout:g} s time budget"
    raise InvalidArtifact(f"{source} is not a valid component: {message}")


def _too_slow(source: str, timeout: float, why: str) -> InvalidArtifact:
    return InvalidArtifact(
        f"{source} took longer than {timeout:g} s to compile ({why}); refused",
        details={"compile_timeout_s": timeout, "setting": "GLOVEBOX_COMPILE_TIMEOUT_S"},
    )


def _wait(proc: subprocess.Popen[str], timeout: float, source: str, size: int) -> tuple[str, str]:
    """The child's output once it exits; on a terminal, its progress meanwhile."""
    if timeout <= _QUIET_S or not sys.stderr.isatty():
        return proc.communicate(timeout=timeout)
    try:
        return proc.communicate(timeout=_QUIET_S)
    except subprocess.TimeoutExpired:
        pass
    started = time.monotonic() - _QUIET_S
    try:
        while True:
            elapsed = time.monotonic() - started
            sys.stderr.write(
                f"\rcompiling {Path(source).name} ({size / _MIB:.1f} MiB): {elapsed:.0f} s of at most {timeout:g} s "
            )
            sys.stderr.flush()
            try:
                return proc.communicate(timeout=min(1.0, max(0.01, timeout - elapsed)))
            except subprocess.TimeoutExpired:
                if time.monotonic() - started >= timeout:
                    raise
    finally:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _limit_resources(timeout: float) -> None:
    _lower_limit(resource.RLIMIT_AS, COMPILE_MEMORY_BYTES)
    _lower_limit(resource.RLIMIT_CPU, max(1, math.ceil(timeout)))
    _lower_limit(resource.RLIMIT_CORE, 0)


def _lower_limit(which: int, value: int) -> None:
    """Set both limits to ``value``, or to the hard limit when that is already lower."""
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _main(src: str, out: str, codegen_json: str, timeout: str, native: str = "") -> int:
    _limit_resources(float(timeout))
    if native:
        return _main_native(src, out, codegen_json)
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


def _main_native(src: str, out: str, codegen_json: str) -> int:
    import glovebox_native  # type: ignore[import-not-found,import-untyped,unused-ignore]

    try:
        glovebox_native.compile_file(src, out, json.loads(codegen_json))
    except ValueError as exc:
        print(" ".join(str(exc).strip().splitlines()[:3]))
        return 1
    except MemoryError:
        print(f"compiling needed more than {COMPILE_MEMORY_BYTES >> 30} GiB of memory")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through precompile()
    sys.exit(_main(*sys.argv[1:6]))

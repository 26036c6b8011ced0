"""The code runner of ``Runtime.run``, and a program's JavaScript or TypeScript made into its script.

The runner (``guest/js/runner.js``) is built once per engine and runner source,
like a JavaScript tool (bundle, pre-initialise, componentize; see ``_jsbuild``)
but on its own engine (the glue built with ``GB_CODE_RUNNER``, which imports
``host-call`` of ``guest/js/runner.wit``), in the ``code-runner`` world, and
initialised with ``gb_init_runner``, which keeps eval: the runner compiles the
program each run is given. It is cached in the toolchain directory
(``GLOVEBOX_TOOLCHAINS``), per user, like the engine it is built on.

A program (``export default async function (input, tools) { ... }``) is
transformed by the pinned esbuild into a script that sets ``__gb_program`` to
its exports: TypeScript loses its types, JavaScript passes through. esbuild's
errors are shown as it prints them (``<program>:line:column``).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ..core._errors import BuildError
from ._base import ONCE, Progress, announce
from ._binaries import tool_env
from ._jsbuild import _bundle, _cache_key, _componentize
from ._jstoolchain import _locked, esbuild_binary, js_engine

__all__ = ["PROGRAM_GLOBAL", "runner_component", "transpile"]

PROGRAM_GLOBAL = "__gb_program"
_TRANSFORM_FLAGS = (
    "--format=iife", f"--global-name={PROGRAM_GLOBAL}", "--platform=neutral", "--target=es2023",
    "--charset=utf8", "--log-level=error", "--color=false",
)  # fmt: skip
#: Seconds esbuild may take on one program.
TRANSPILE_TIMEOUT_S = 60


def runner_component(sdk: Path, cache_dir: Path, progress: Progress | None = None) -> Path:
    """The code runner's component (built on first need, then cached by content; told before it starts)."""
    src = sdk / "js" / "runner.js"
    engine = js_engine(sdk, runner=True, progress=progress)
    bundle = _bundle(src, sdk, progress)
    run_wit = sdk / "js" / "runner.wit"
    wit = [*sorted((sdk / "wit").glob("*.wit")), *sorted((sdk / "js" / "wit").rglob("*.wit")), run_wit]
    key = _cache_key(engine.key + "\0runner", bundle, wit)
    cached = cache_dir / f"code-runner-{key}.wasm"
    if not cached.is_file():
        with _locked(cache_dir):
            if not cached.is_file():
                announce(f"building the code runner of code mode into {cache_dir}, {ONCE}", progress, slow=True)
                _componentize(
                    src, bundle, sdk, engine.wasm, engine.module, cached,
                    init="gb_init_runner", world="code-runner", extra_wit=(run_wit,),
                )  # fmt: skip
    return cached


def transpile(source: str, lang: str, sdk: Path) -> str:
    """``source`` (``js`` or ``ts``) as the runner's script; raise BuildError naming line and column.

    Raises:
        ValueError: ``lang`` is neither ``js`` nor ``ts``.
    """
    if lang not in ("js", "ts"):
        raise ValueError(f"a program is js or ts, not {lang!r}")
    argv = [str(esbuild_binary(sdk)), f"--loader={lang}", "--sourcefile=<program>", *_TRANSFORM_FLAGS]
    try:
        proc = subprocess.run(
            argv, input=source, capture_output=True, text=True, timeout=TRANSPILE_TIMEOUT_S, env=tool_env({})
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"esbuild did not transform the program within {TRANSPILE_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise BuildError(f"the program does not compile:\n{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def program_digest(script: str) -> str:
    """A short digest of a transpiled program (the run records it)."""
    return hashlib.sha256(script.encode()).hexdigest()[:16]

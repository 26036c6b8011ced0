"""JavaScript and TypeScript tools (``.js``, ``.mjs``, ``.ts``, ``.mts``): bundled by esbuild, run once at
build time by QuickJS-NG and snapshotted into a component (see ``_jsbuild``).

The manifest: a ``glovebox.toml`` beside the source, with the limits
JavaScript needs where it says nothing and, when it gives no input schema, the
schema of the default export's parameter type (``_jstypes``).
"""

from __future__ import annotations

from pathlib import Path

from ._base import BuildContext, Toolchain

__all__ = ["JsToolchain"]


class JsToolchain(Toolchain):
    """JavaScript and TypeScript, with the guest helper imported as ``glovebox``."""

    name = "js"
    suffixes = (".js", ".mjs", ".ts", ".mts")

    def build(self, src: Path, out: Path, context: BuildContext) -> None:
        from ._jsbuild import build_js  # esbuild and the engine load only when needed

        build_js(src, out, context)

    def generated_manifest(self, src: Path, context: BuildContext) -> str:
        from ._jsbuild import js_manifest

        return js_manifest(src, context.sdk, context.cache_dir, context.progress)

"""Python tools (``.py``): a ``@tool`` function bundled with CPython by componentize-py (see ``_pybuild``).

The manifest is generated from the source, read with ``ast`` and never
imported (``_pyanalyze``): the function's name, docstring and type hints, the
limits Python needs, under the folder's ``glovebox.toml``.
"""

from __future__ import annotations

from pathlib import Path

from ._base import BuildContext, Toolchain

__all__ = ["PythonToolchain"]


class PythonToolchain(Toolchain):
    """Python, with the guest helper ``glovebox_guest``."""

    name = "python"
    suffixes = (".py",)

    def build(self, src: Path, out: Path, context: BuildContext) -> None:
        from ._pybuild import build_python  # componentize-py's side loads only when needed

        build_python(src, out, context)

    def generated_manifest(self, src: Path, context: BuildContext) -> str:
        from ._pybuild import python_manifest

        return python_manifest(src)

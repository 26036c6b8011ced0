"""The registered toolchains: the built-ins of :data:`DEFAULT_TOOLCHAINS` and the entry points of :data:`GROUP`.

Built-ins register the way a third party does: each is an entry point
(``name = "module:Class"``), loaded and checked by the same code, the
built-ins first. :func:`toolchain_for` finds the one toolchain for a source's
suffix; a suffix no toolchain claims, or one two toolchains claim, is a
``BuildError`` that names what is registered.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from pathlib import Path

from ..core._errors import BuildError
from ._base import Toolchain

__all__ = ["DEFAULT_TOOLCHAINS", "GROUP", "registered", "toolchain_for"]

#: The entry-point group a package names its toolchains in.
GROUP = "glovebox.toolchains"
#: The built-in toolchains, as entry points would name them.
DEFAULT_TOOLCHAINS: tuple[tuple[str, str], ...] = (
    ("c", "glovebox.toolchains._c:CToolchain"),
    ("python", "glovebox.toolchains._python:PythonToolchain"),
    ("js", "glovebox.toolchains._js:JsToolchain"),
    ("rust", "glovebox.toolchains._rust:RustToolchain"),
    ("go", "glovebox.toolchains._go:GoToolchain"),
)


def registered() -> list[Toolchain]:
    """Every registered toolchain, built-ins first, then the installed packages' entry points.

    Raises:
        BuildError: an entry point cannot be loaded or does not name a Toolchain subclass.
    """
    defaults = [importlib.metadata.EntryPoint(name, value, GROUP) for name, value in DEFAULT_TOOLCHAINS]
    return [_load(entry) for entry in [*defaults, *importlib.metadata.entry_points(group=GROUP)]]


def toolchain_for(src: Path, toolchains: Iterable[Toolchain] | None = None) -> Toolchain:
    """The toolchain that builds ``src``: a project folder by the file that marks it (``Cargo.toml``,
    ``go.mod``), that file by its name, any other file by its suffix (case-sensitive, as compilers take it).

    Raises:
        BuildError: no toolchain, or more than one, claims the suffix; the message lists what is registered.
    """
    found = list(registered() if toolchains is None else toolchains)
    if src.is_dir():
        claims = [tc for tc in found if any((src / name).is_file() for name in tc.project_files)]
        if len(claims) == 1:
            return claims[0]
        marks = sorted({name for tc in found for name in tc.project_files})
        detail = "more than one of" if claims else "none of"
        raise BuildError(f"cannot build the folder {src}: it holds {detail} {', '.join(marks)}")
    claims = [tc for tc in found if src.name in tc.project_files] or [
        toolchain for toolchain in found if src.suffix in toolchain.suffixes
    ]
    if len(claims) == 1:
        return claims[0]
    if claims:
        names = ", ".join(f"{toolchain.name} ({type(toolchain).__module__})" for toolchain in claims)
        raise BuildError(f"cannot build {src}: more than one toolchain builds {src.suffix} sources: {names}")
    known = "; ".join(f"{toolchain.name}: {', '.join(toolchain.suffixes)}" for toolchain in found)
    kind = f"{src.suffix} sources" if src.suffix else "a source without a suffix"
    raise BuildError(f"cannot build {src}: no toolchain builds {kind}; the registered toolchains build {known}")


def _load(entry: importlib.metadata.EntryPoint) -> Toolchain:
    where = f"toolchain {entry.name!r} ({entry.value}, entry point group {GROUP})"
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plug-in is named, never a traceback from inside it
        raise BuildError(f"cannot load {where}: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Toolchain)):
        raise BuildError(f"{where} is not a subclass of glovebox.toolchains Toolchain")
    toolchain = loaded()
    suffixes = getattr(toolchain, "suffixes", None)
    if not isinstance(suffixes, tuple) or not suffixes or not all(_is_suffix(s) for s in suffixes):
        raise BuildError(f"{where} declares no suffixes (a tuple such as ('.c',)): {suffixes!r}")
    return toolchain


def _is_suffix(value: object) -> bool:
    return isinstance(value, str) and value.startswith(".") and len(value) > 1 and "/" not in value

"""Any component is a tool: one manifest per typed export, schemas from its WIT types.

A component that does not export glovebox's ``call`` registers as one tool per
exported function (:func:`typed_manifests`), each of kind ``component``:

- named ``<name>-<function>`` (``<name>`` is the manifest's name, by default the
  file's stem), lowercased; when two exported interfaces have a function of the
  same name, each of those is ``<name>-<interface>-<function>`` (the interface's
  own name, without package or version);
- its input schema an object of the parameters, its output schema the result's
  (see ``glovebox.sandbox._wittypes`` for the JSON form of each WIT type);
- described by the WIT doc comment of the function, when the component carries a
  ``package-docs`` custom section (``wasm-tools component wit WIT --wasm`` writes
  one; :func:`package_docs` reads it), else by the manifest's description, else
  by the export's name;
- the rest (version, limits, capabilities, scopes) from the manifest.

Refused with the reason (``invalid_artifact``): a function using a resource, a
future or a stream, a type nested too deeply, a name that is not a tool name,
and a manifest giving schemas (they come from the WIT types).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..core._errors import InvalidArtifact, InvalidManifest
from ..model._manifest import NAME_PATTERN, Manifest
from ..sandbox._typed import TypedExport
from ..sandbox._wittypes import output_schema, params_schema

__all__ = ["package_docs", "typed_manifests"]

_DOCS_SECTION = b"package-docs"
#: A package-docs section larger than this is ignored (descriptions are short).
_MAX_DOCS_BYTES = 1024 * 1024
_MAX_DESCRIPTION_CHARS = 4096


def typed_manifests(base: Manifest, exports: list[TypedExport], docs: dict[str, str], source: str) -> list[Manifest]:
    """One manifest per export, from ``base`` (the manifest given or the defaults)."""
    if not exports:
        raise InvalidArtifact(
            f"{source} exports no function: a tool exports glovebox's "
            "`call: func(input: string) -> result<string, string>` or functions of its own"
        )
    if base.input_schema is not True or base.output_schema is not True:
        raise InvalidManifest(
            f"manifest of {base.name!r}: input_schema and output_schema come from the component's WIT types; "
            "leave them out",
            details={"field": "input_schema"},
        )
    clashing = {name for name, n in Counter(e.function for e in exports).items() if n > 1}
    manifests = []
    for export in exports:
        name = _tool_name(base.name, export, export.function in clashing, source)
        description = docs_for(docs, export) or base.description or f"{export.qualified} of {Path(source).name}"
        document = base.model_dump(mode="json", exclude_none=True)
        document.update(
            name=name,
            description=description[:_MAX_DESCRIPTION_CHARS],
            input_schema=params_schema(export.shape),
            output_schema=output_schema(export.shape),
            kind="component",
            export={"interface": export.interface, "function": export.function},
        )
        manifests.append(Manifest.model_validate(document))
    return manifests


def _tool_name(base: str, export: TypedExport, qualify: bool, source: str) -> str:
    parts = [base]
    if qualify and export.interface:
        parts.append(_interface_name(export.interface))
    parts.append(export.function)
    name = "-".join(parts).lower()
    if not re.match(NAME_PATTERN, name):
        raise InvalidArtifact(
            f"{source}: the export {export.qualified} would be the tool {name!r}, which is not a tool name "
            f"({NAME_PATTERN}); give the component a shorter name in its manifest"
        )
    return name


def _interface_name(interface: str) -> str:
    """``demo:greeter/greet@0.1.0`` → ``greet``."""
    return interface.split("/")[-1].split("@")[0]


# -- package-docs ----------------------------------------------------------------------------------


def package_docs(data: bytes) -> dict[str, str]:
    """The WIT doc comments a component carries, by export (``function`` or ``interface#function``).

    Read from a ``package-docs`` custom section at the component's top level
    (version byte 0 or 1, then JSON, as ``wit-parser`` writes it). Interfaces
    are matched by their own name; anything unreadable is ignored.
    """
    payload = _custom_section(data, _DOCS_SECTION)
    if payload is None or len(payload) > _MAX_DOCS_BYTES or payload[:1] not in (b"\x00", b"\x01"):
        return {}
    try:
        document = json.loads(payload[1:])
    except (ValueError, RecursionError):
        return {}
    return _docs_of(document) if isinstance(document, dict) else {}


def _docs_of(document: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for world in _mapping(document.get("worlds")).values():
        for function, meta in _mapping(_mapping(world).get("func_exports")).items():
            _add(found, function, meta)
        for function, meta in _mapping(_mapping(world).get("funcs")).items():
            _add(found, function, meta)
    for interface, meta in _mapping(document.get("interfaces")).items():
        for function, fmeta in _mapping(_mapping(meta).get("funcs")).items():
            _add(found, f"{interface}#{function}", fmeta)
    return found


def _add(found: dict[str, str], key: str, meta: Any) -> None:
    text = meta if isinstance(meta, str) else _mapping(meta).get("docs")
    if isinstance(text, str) and text.strip():
        found[key] = text.strip()


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def docs_for(docs: dict[str, str], export: TypedExport) -> str | None:
    """The doc comment of ``export``: by its function, or its interface's own name and function."""
    if not export.interface:
        return docs.get(export.function)
    return docs.get(f"{_interface_name(export.interface)}#{export.function}")


def _custom_section(data: bytes, wanted: bytes) -> bytes | None:
    """The payload of the first top-level custom section named ``wanted``."""
    position = 8
    while position < len(data):
        section_id = data[position]
        size, position = _leb(data, position + 1)
        end = position + size
        if section_id == 0:
            name_size, name_at = _leb(data, position)
            if data[name_at : name_at + name_size] == wanted:
                return data[name_at + name_size : end]
        position = end
    return None


def _leb(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data) and shift < 35:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return value, position

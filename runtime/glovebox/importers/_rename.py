"""The rename map of ``glovebox import openapi --rename``: chosen names for some of the tools.

A key names an operation as its operationId, as ``METHOD /path``, or as the tool
name the import would give it; its value is the tool's name, ``<api>-`` added in
front unless it starts so (the policy fragment's grant, ``<api>-*``, must cover
it). A rename is applied after the names are made unique, so a chosen name never
gets a hash suffix: one that another tool holds refuses the import; a key that
matches no operation is reported in a note.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core._errors import InvalidSpec
from ._common import MAX_NAME

__all__ = ["apply_renames", "parse_renames"]


def parse_renames(values: Iterable[str]) -> dict[str, str]:
    """The rename map of ``--rename`` values: each ``OLD=NEW``, or a file (YAML or JSON) mapping old to new.

    Raises:
        ValueError: a value is neither (the message names it).
    """
    renames: dict[str, str] = {}
    for value in values:
        if "=" in value and not Path(value).is_file():
            old, _, new = value.partition("=")
            if not old.strip() or not new.strip():
                raise ValueError(f"--rename {value!r}: expected OLD=NEW or a file")
            renames[old.strip()] = new.strip()
            continue
        path = Path(value)
        if not path.is_file():
            raise ValueError(f"--rename {value!r}: expected OLD=NEW or a file (YAML or JSON) mapping old to new")
        renames.update(_read_map(path))
    return renames


def _read_map(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except ValueError:
        import yaml

        data = yaml.safe_load(text)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"--rename {path}: expected a mapping of old names to new names")
    return {str(key): value for key, value in data.items()}


def apply_renames(
    api: str, keys: Sequence[tuple[str, ...]], names: list[str], renames: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """``names`` (one per operation, ``keys`` naming each) with ``renames`` applied; and notes.

    Raises:
        InvalidSpec: a new name is not a tool name, or two tools would have one name.
    """
    from ._common import _NAME

    if not renames:
        return names, []
    renamed, used = list(names), set()
    for index, operation_keys in enumerate(keys):
        for key in operation_keys:
            if key in renames:
                new = renames[key] if renames[key].startswith(f"{api}-") else f"{api}-{renames[key]}"
                if not _NAME.match(new) or len(new) > MAX_NAME:
                    raise InvalidSpec(f"--rename {key}={renames[key]}: {new!r} is not a tool name (a-z, 0-9, _, -)")
                renamed[index] = new
                used.add(key)
                break
    seen: dict[str, int] = {}
    for index, name in enumerate(renamed):
        if name in seen:
            raise InvalidSpec(
                f"--rename: {name!r} would name two tools ({' / '.join(keys[seen[name]][:1])} and "
                f"{' / '.join(keys[index][:1])})"
            )
        seen[name] = index
    unknown = sorted(set(renames) - used)
    notes = [f"--rename {key!r} matches no imported operation" for key in unknown]
    return renamed, notes

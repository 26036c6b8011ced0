"""The capability grant model, shared by manifests (what a tool asks for),
policies (what an operator grants) and the host functions (what is enforced).

A request is allowed when it matches at least one rule the tool's manifest
declares AND at least one rule the call was granted: the effective grant is
the intersection of the two, computed per request by one matcher. Nothing is
granted by default.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError, create_model

from ..core._errors import InvalidGrants
from ..core._frozen import Frozen
from ._capability import registered
from ._grantrules import (
    SQL_KINDS,
    HttpLimits,
    HttpRule,
    SecretRule,
    SqlActions,
    SqlGrant,
    SqlPassword,
    SqlRule,
)

__all__ = [
    "SQL_KINDS",
    "Grants",
    "compose",
    "GrantsSource",
    "HttpLimits",
    "HttpRule",
    "SecretRule",
    "SqlActions",
    "SqlGrant",
    "SqlPassword",
    "SqlRule",
    "load_grants",
]


def compose(name: str, module: str, base: type[Frozen], doc: str, fields: dict[str, Any]) -> Any:
    """A model ``module.name`` on ``base`` with ``fields`` (those every registered capability adds)."""
    return create_model(name, __base__=base, __doc__=doc, __module__=module, **fields)


if TYPE_CHECKING:

    class Grants(Frozen):
        """What one call may use beyond its own memory (the built-ins, for type checkers)."""

        http: list[HttpRule] = []
        http_limits: HttpLimits = HttpLimits()
        secrets: list[SecretRule] = []
        sql: list[SqlGrant] = []

        def __getattr__(self, name: str) -> Any: ...  # a registered capability's fields

else:
    Grants = compose(
        "Grants",
        __name__,
        Frozen,
        "What one call may use beyond its own memory: the default is nothing.",
        {key: spec for capability in registered() for key, spec in capability.grant_fields().items()},
    )


GrantsSource = Grants | dict[str, Any] | str | os.PathLike[str] | None


def load_grants(source: GrantsSource) -> Grants:
    """A :class:`Grants` from a model, a dict, or a JSON/TOML file (``None``: nothing granted).

    Raises:
        InvalidGrants: the file cannot be read or parsed, or the file or dict does
            not describe valid grants; the message names the file and the field,
            and ``details`` has ``file``, ``field`` and ``problems``.
        TypeError: ``source`` is none of the above.
    """
    if source is None:
        return Grants()
    if isinstance(source, Grants):
        return source
    if isinstance(source, dict):
        return _validate(source, "(dict)")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"grants must be a Grants, a dict or a path, not {type(source).__name__}")
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(str(path), "(file)", f"cannot read: {exc}") from exc
    except ValueError as exc:  # a syntax error, or an integer too long to convert
        raise _invalid(
            str(path), "(syntax)", f"not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}"
        ) from exc
    except RecursionError as exc:  # both parsers recurse once per nesting level
        raise _invalid(str(path), "(syntax)", "nested too deeply") from exc
    if not isinstance(data, dict):
        raise _invalid(str(path), "(root)", f"expected a table/object, got {type(data).__name__}")
    return _validate(data, str(path))


def _validate(data: dict[str, Any], source: str) -> Grants:
    try:
        return Grants.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": _field(err["loc"]), "message": err["msg"].removeprefix("Value error, ")} for err in exc.errors()
        ]
        text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        first = problems[0]
        error = InvalidGrants(
            f"invalid grants {source}: {text}",
            details={"file": source, "field": first["field"], "problems": problems},
        )
        raise error from exc


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-"))) or "(root)"


def _invalid(source: str, field: str, message: str) -> InvalidGrants:
    return InvalidGrants(
        f"invalid grants {source}: {field}: {message}",
        details={"file": source, "field": field, "problems": [{"field": field, "message": message}]},
    )

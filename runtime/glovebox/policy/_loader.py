"""Policy files: YAML text → a validated :class:`Policy`.

Every error is an :class:`~glovebox.InvalidPolicy` whose message names the
file, the line (from the YAML node marks) and the field, and says what was
expected. ``details`` carries ``file``, ``line`` and ``field`` of the first
problem, and ``problems`` lists them all. PyYAML is imported when the first
policy is parsed, not with the package.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..core._errors import InvalidPolicy
from ._models import Policy

if TYPE_CHECKING:
    import yaml

__all__ = ["load_policy", "parse_policy", "policy_schema"]

SUPPORTED_VERSIONS = (1,)
#: The most values a policy document may hold once YAML aliases are expanded
#: (a few aliases can otherwise stand for billions of values).
MAX_NODES = 100_000


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidPolicy(f"cannot read policy {path}: {exc}", details={"file": str(path)}) from exc
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str = "(inline)") -> Policy:
    """Validate policy YAML text; ``source`` names it in errors."""
    import yaml

    node = _compose(text, source)
    try:
        data = yaml.safe_load(text) if node is not None else None
    except (yaml.YAMLError, ValueError) as exc:  # an unknown tag, bad base64, a date or integer out of range
        raise _error(source, 1, "(yaml)", f"not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise _error(source, 1, "(root)", f"expected a mapping with 'version: 1', got {type(data).__name__}")
    version = data.get("version")
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        line = _line(node, ("version",)) if "version" in data else 1
        raise _error(source, line, "version", f"unsupported policy version {version!r} (expected 1)")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise _describe(exc, source, node) from exc


def policy_schema() -> dict[str, Any]:
    """The JSON Schema of policy documents (what ``policies/schema.json`` holds)."""
    schema = Policy.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://glovebox.dev/schemas/policy-v1.json"
    return json.loads(json.dumps(schema, sort_keys=True))  # type: ignore[no-any-return]


def _compose(text: str, source: str) -> yaml.Node | None:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise _error(source, line, "(yaml)", f"not valid YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise _error(source, 1, "(yaml)", f"not valid YAML: {exc}") from exc
    except RecursionError as exc:  # the composer recurses once per nesting level
        raise _error(source, 1, "(yaml)", "nested too deeply") from exc
    if node is not None:
        if _expanded_size(node, {}) > MAX_NODES:
            raise _error(source, 1, "(yaml)", f"more than {MAX_NODES} values once aliases are expanded")
        _check_duplicates(node, source)
    return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for with every alias expanded (each shared node sized once)."""
    import yaml

    known = sizes.get(id(node))
    if known is not None:
        return known
    size = 1
    if isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, sizes) for item in node.value)
    sizes[id(node)] = size
    return size


def _check_duplicates(node: yaml.Node, source: str, path: str = "") -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                raise _error(source, key.start_mark.line + 1, f"{path}{name}", "duplicate key (expected each once)")
            seen.add(name)
            _check_duplicates(value, source, f"{path}{name}.")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicates(item, source, f"{path}{index}.")


def _line(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the deepest YAML node along ``loc``."""
    if node is None:
        return 1
    line = node.start_mark.line + 1
    for part in loc:
        child = _child(node, part)
        if child is None:
            break
        node, line = child[1], child[0]
    return line


def _child(node: yaml.Node, part: int | str) -> tuple[int, yaml.Node] | None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if str(key.value) == str(part):
                return key.start_mark.line + 1, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item = node.value[part]
        return item.start_mark.line + 1, item
    return None


def _describe(exc: ValidationError, source: str, node: yaml.Node | None) -> InvalidPolicy:
    problems: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        field = ".".join(str(p) for p in loc) or "(root)"
        problems.append({"line": _line(node, loc), "field": field, "message": _message(err)})
    text = "; ".join(f"{source}:{p['line']}: {p['field']}: {p['message']}" for p in problems)
    first = problems[0]
    return InvalidPolicy(
        f"invalid policy {text}",
        details={"file": source, "line": first["line"], "field": first["field"], "problems": problems},
    )


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown field (not part of the policy format; see policies/schema.json)"
    if err["type"] == "missing":
        return "required field is missing"
    return f"{err['msg']} (got {_shown(err.get('input'))})"


#: A password in a URL's user part (``scheme://user:PASSWORD@``) or its query (``password=...``).
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^@/\s]*(@)|((?:^|[?&;])password=)[^&;\s'\"]*", re.IGNORECASE)


def _shown(given: Any) -> str:
    """The value an error quotes, with any URL password in it masked: an error is printed and logged."""
    text = repr(given)
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}***{m[2]}" if m[1] else f"{m[3]}***", text)


def _error(source: str, line: int, field: str, message: str) -> InvalidPolicy:
    return InvalidPolicy(
        f"invalid policy {source}:{line}: {field}: {message}",
        details={
            "file": source,
            "line": line,
            "field": field,
            "problems": [{"line": line, "field": field, "message": message}],
        },
    )

"""``glovebox import graphql``: each Query field a read tool, each Mutation field a write tool.

The schema is SDL or an introspection result (JSON) of at most ``max_spec_bytes`` (a regular
file), parsed by ``graphql-core``; a schema that does not parse or build is
refused naming the line and column, one nested too deeply to parse is refused,
and an argument whose type nests more than :data:`MAX_INPUT_DEPTH` lists and
input objects is refused naming the field and argument. A field's arguments make the input schema (scalars, enums,
input objects as ``$defs``, lists, non-null as required); its output is
selected to a bounded depth (``depth``, default 2): scalar and enum fields
always, object fields while depth remains and the type is not already on the
path (cycles are cut), fields with required arguments never. That selection
is the default: a tool whose answer is an object also takes ``fields`` (or
``selection`` when the GraphQL field has an argument named ``fields``), a GraphQL
selection set the host checks against the schema at call time (see
``glovebox.runtime._selection``); the schema is printed once, its digest goes into
each tool's operation, and ``import_graphql`` stores it in the home.

A field defined twice in one type of an SDL (GitHub's published schema has two)
is a note, not a refusal: the first definition is kept. Every tool POSTs
``{"query": <document>, "variables": <input>}`` to the one endpoint through
the generic guest, with the secrets of ``--bearer-env``/``--header-env``
injected by the host. An answer with ``errors`` and no data for the field is a
``guest_error``; an answer with data and ``errors`` (a partial error) is
``{"data": <the field's value>, "errors": [...]}``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core._errors import InvalidSpec
from ..model._manifest import GraphqlField, Manifest, Operation
from ..runtime._selection import MAX_SELECTION_CHARS
from ._batch import Planned, SecretHint
from ._common import (
    MAX_SPEC_BYTES,
    OPERATION_LIMITS,
    Server,
    api_name,
    http_rule,
    parse_spec,
    read_source,
    tool_name,
)

__all__ = ["MAX_INPUT_DEPTH", "MAX_SELECTION_DEPTH", "GraphqlPlan", "check_bearer", "plan_graphql"]

#: Levels of lists and input objects an argument's type may nest (an input is at most 64 levels deep).
MAX_INPUT_DEPTH = 64
#: The deepest output selection a tool may make (``--depth``).
MAX_SELECTION_DEPTH = 8

_SCALARS: dict[str, Any] = {
    "Int": {"type": "integer"},
    "Float": {"type": "number"},
    "String": {"type": "string"},
    "Boolean": {"type": "boolean"},
    "ID": {"type": ["string", "integer"]},
}


@dataclass
class GraphqlPlan:
    """The tools of one GraphQL schema, and what the import keeps besides them."""

    api: str
    planned: list[Planned]
    secrets: list[SecretHint]
    notes: list[str]
    #: The schema as printed (SDL): the home keeps it, by ``digest``, for the selections chosen at call time.
    schema_text: str = ""
    digest: str = ""


def plan_graphql(
    source: str | Path,
    *,
    endpoint: str,
    name: str | None = None,
    depth: int = 2,
    max_spec_bytes: int = MAX_SPEC_BYTES,
    bearer_env: str | None = None,
    header_env: dict[str, str] | None = None,
    bearer_secret: str | None = None,
) -> GraphqlPlan:
    """Plan the tools of a GraphQL schema.

    ``bearer_env`` names the environment variable whose value the host sends as
    ``Authorization: Bearer <value>``; ``bearer_secret`` is a secret reference sent so
    instead (``connection://API/{principal}``: each principal's OAuth connection,
    ``keyring://…``, ``exec://…``); ``header_env`` maps a header to the variable whose
    value the host sends in it. All become secrets of the policy fragment.

    Raises:
        InvalidSpec: the schema does not parse or has nothing to import.
        ValueError: ``depth`` is below 1 or above :data:`MAX_SELECTION_DEPTH`, a header or
            variable name is not one, ``bearer_secret`` is not a reference, or both bearers are given.
    """
    from graphql import print_schema

    if not 1 <= depth <= MAX_SELECTION_DEPTH:
        raise ValueError(f"depth must be from 1 to {MAX_SELECTION_DEPTH}, not {depth}")
    schema, origin, notes = _load(source, max_spec_bytes)
    server = Server(endpoint, "--endpoint")
    api = api_name(name or Path(str(source)).stem, "--name")
    text = print_schema(schema)
    digest = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    planned: list[Planned] = []
    seen: dict[str, str] = {}
    for root, action in ((schema.query_type, "allow"), (schema.mutation_type, "require_approval")):
        if root is None:
            continue
        for field_name, graphql_field in root.fields.items():
            place = f"{origin}: {root.name}.{field_name}"
            plan = _field(api, server, (root.name, field_name), graphql_field, action, depth, place, digest)
            if plan.manifest.name in seen:
                raise InvalidSpec(
                    f"{place}: tool name {plan.manifest.name!r} is also made by {seen[plan.manifest.name]}",
                    details={"place": place},
                )
            seen[plan.manifest.name] = place
            planned.append(plan)
    if not planned:
        raise InvalidSpec(f"{origin}: the schema has no Query or Mutation fields")
    secrets = _secrets(api, server, bearer_env, header_env or {}, bearer_secret)
    return GraphqlPlan(api, planned, secrets, notes, text, digest)


def check_bearer(bearer_env: str | None, bearer_secret: str | None) -> None:
    """Refuse a bearer secret that is not a reference, or one given beside ``bearer_env``.

    Raises:
        ValueError: naming what is wrong (the command line says it as a usage error).
    """
    if bearer_secret is None:
        return
    if bearer_env is not None:
        raise ValueError("give the bearer token once: --bearer-env or --bearer-secret, not both")
    if "://" not in bearer_secret:
        raise ValueError(
            f"{bearer_secret!r} is not a secret reference (connection://API/{{principal}}, keyring://SERVICE/USER, "
            "exec://..., env://VAR)"
        )


def _secrets(
    api: str, server: Server, bearer_env: str | None, header_env: dict[str, str], bearer_secret: str | None = None
) -> list[SecretHint]:
    """The secrets the host injects into every request of the API: a bearer token and named headers."""
    import re

    hints = []
    check_bearer(bearer_env, bearer_secret)
    if bearer_secret is not None:
        env = f"{api}_AUTHORIZATION".upper().replace("-", "_")
        hints.append(
            SecretHint(f"{api}-authorization", env, "Authorization", "Bearer {value}", server.scheme, bearer_secret)
        )
    wanted = ([("Authorization", bearer_env, "Bearer {value}")] if bearer_env else []) + [
        (header, env, "{value}") for header, env in header_env.items()
    ]
    for header, env, format in wanted:
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}", header):
            raise ValueError(f"{header!r} is not an HTTP header name")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", env):
            raise ValueError(f"{env!r} is not an environment variable name")
        secret = f"{api}-{header.lower()}".replace("_", "-")
        hints.append(SecretHint(secret, env, header, format, server.scheme))
    return hints


def _load(source: str | Path, max_spec_bytes: int) -> tuple[Any, str, list[str]]:
    from graphql import GraphQLError, build_client_schema

    path = Path(source)
    text, origin = read_source(path, max_spec_bytes)  # SDL or JSON: the same byte bound, a regular file only
    try:
        if text.lstrip().startswith("{"):
            data = parse_spec(text, origin)
            data = data.get("data", data) if isinstance(data, dict) else data
            return build_client_schema(data), origin, []
        return _build_sdl(text, origin)
    except GraphQLError as exc:
        where = ", ".join(f"line {loc.line}, column {loc.column}" for loc in exc.locations or [])
        raise InvalidSpec(f"{path}: {where or 'schema'}: {exc.message}", details={"place": where}) from exc
    except RecursionError as exc:  # graphql-core parses and builds types recursively
        raise InvalidSpec(f"{path}: the schema is nested too deeply to parse") from exc
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidSpec(f"{path}: not a GraphQL schema or introspection result: {exc}") from exc


def _build_sdl(text: str, origin: str) -> tuple[Any, str, list[str]]:
    """The schema of an SDL text, with a field defined twice in one type kept once (noted): the
    later definitions are cut out of the text, which is parsed again."""
    from graphql import build_schema, parse

    notes, cuts = [], []
    definition: Any
    for definition in parse(text).definitions:
        seen: set[str] = set()
        for node in getattr(definition, "fields", None) or ():
            if node.name.value not in seen:
                seen.add(node.name.value)
                continue
            line = node.loc.source.get_location(node.loc.start).line
            notes.append(
                f"{origin}: {definition.name.value}.{node.name.value} is defined twice (again on line {line}): "
                "the first definition is kept"
            )
            cuts.append((node.loc.start, node.loc.end))
    for start, end in sorted(cuts, reverse=True):
        text = text[:start] + text[end:]
    return build_schema(text), origin, notes


def _field(
    api: str, server: Server, names: tuple[str, str], field: Any, action: str, depth: int, where: str, digest: str
) -> Planned:
    root, name = names
    defs: dict[str, Any] = {}
    properties = {arg: _input_type(spec.type, defs, f"{where}({arg})") for arg, spec in field.args.items()}
    for arg, spec in field.args.items():
        if spec.description:
            properties[arg] = {**properties[arg], "description": spec.description}
    required = [arg for arg, spec in field.args.items() if _non_null(spec.type) and spec.default_value is _undefined()]
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if defs:
        input_schema["$defs"] = defs
    variables = ", ".join(f"${arg}: {spec.type}" for arg, spec in field.args.items())
    arguments = ", ".join(f"{arg}: ${arg}" for arg in field.args)
    keyword = "query" if action == "allow" else "mutation"
    selection = _selection(field.type, depth, frozenset())
    document = (
        f"{keyword} {_op_name(name)}{f'({variables})' if variables else ''} "
        f"{{ {name}{f'({arguments})' if arguments else ''}{f' {selection}' if selection else ''} }}"
    )
    chooser = None
    if selection:
        chooser = next(key for key in ("fields", "selection", "_fields", "_selection") if key not in field.args)
        shown = selection if len(selection) <= 400 else selection[:399] + "…"
        input_schema["properties"][chooser] = {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_SELECTION_CHARS,
            "description": "The fields to answer, as a GraphQL selection set checked against the schema "
            f"(e.g. `id owner {{ login }}`; arguments and `... on Type` work). Default: {shown}",
        }
    operation = Operation(
        api=api,
        source_id=f"{root}.{name}",
        method="POST",
        url=server.url.removesuffix(server.base_path),
        path=server.base_path or "/",
        graphql=GraphqlField(
            query=document, field=name, schema_digest=digest if chooser else None, selection_input=chooser
        ),
    )
    description = (field.description or "").strip() or f"GraphQL {root}.{name}"
    manifest: dict[str, Any] = {
        "name": tool_name(api, name, where),
        "version": "1.0.0",
        "description": description,
        "kind": "graphql",
        "input_schema": input_schema,
        "output_schema": True,
        "limits": OPERATION_LIMITS,
        "capabilities": {"http": [http_rule(server, "POST", "" if server.base_path else "/", where)]},
        "required_scopes": [f"{api}:{'read' if action == 'allow' else 'write'}"],
        "operation": operation,
    }
    return Planned(manifest=Manifest.model_validate(manifest), action=action, where=where)


def _op_name(field: str) -> str:
    return field[:1].upper() + field[1:]


def _undefined() -> Any:
    from graphql import Undefined

    return Undefined


def _non_null(kind: Any) -> bool:
    from graphql import GraphQLNonNull

    return isinstance(kind, GraphQLNonNull)


def _input_type(kind: Any, defs: dict[str, Any], where: str, depth: int = 0) -> Any:
    """The JSON Schema of a GraphQL input type (non-null only makes an argument or field required).

    Raises:
        InvalidSpec: the type nests deeper than :data:`MAX_INPUT_DEPTH` levels, naming the argument and type.
    """
    from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLList, GraphQLNonNull, GraphQLScalarType

    if depth > MAX_INPUT_DEPTH:
        raise InvalidSpec(
            f"{where}: input type {kind} is nested deeper than {MAX_INPUT_DEPTH} levels (lists and input objects)",
            details={"place": where, "type": str(kind)},
        )
    if isinstance(kind, GraphQLNonNull):
        return _input_type(kind.of_type, defs, where, depth)
    if isinstance(kind, GraphQLList):
        return {"type": "array", "items": _input_type(kind.of_type, defs, where, depth + 1)}
    if isinstance(kind, GraphQLEnumType):
        return {"enum": list(kind.values)}
    if isinstance(kind, GraphQLScalarType):
        return dict(_SCALARS.get(kind.name, {}))
    if isinstance(kind, GraphQLInputObjectType):
        if kind.name not in defs:
            defs[kind.name] = True  # placeholder: a recursive input type refers to itself by name
            fields = kind.fields
            defs[kind.name] = {
                "type": "object",
                "properties": {key: _input_type(value.type, defs, where, depth + 1) for key, value in fields.items()},
                "required": [
                    key
                    for key, value in fields.items()
                    if _non_null(value.type) and value.default_value is _undefined()
                ],
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{kind.name}"}
    return {}


def _selection(kind: Any, depth: int, path: frozenset[str]) -> str:
    """The selection set of an output type to ``depth`` levels ('' for a scalar or enum)."""
    from graphql import GraphQLInterfaceType, GraphQLObjectType, GraphQLUnionType, get_named_type

    named = get_named_type(kind)
    if isinstance(named, GraphQLUnionType):
        parts = [f"... on {member.name} {_selection(member, depth, path)}" for member in named.types]
        return "{ __typename " + " ".join(parts) + " }"
    if not isinstance(named, (GraphQLObjectType, GraphQLInterfaceType)):
        return ""
    inner = path | {named.name}
    picked = []
    for field_name, field in named.fields.items():
        if any(_non_null(arg.type) and arg.default_value is _undefined() for arg in field.args.values()):
            continue
        sub = get_named_type(field.type)
        if not isinstance(sub, (GraphQLObjectType, GraphQLInterfaceType, GraphQLUnionType)):
            picked.append(field_name)
        elif depth > 1 and sub.name not in inner:
            nested = _selection(field.type, depth - 1, inner)
            if nested:
                picked.append(f"{field_name} {nested}")
    return "{ " + " ".join(picked or ["__typename"]) + " }"

"""The fields an agent chooses from a GraphQL tool: its selection, checked against the API's schema.

``glovebox import graphql`` stores the schema once per API in the home
(``graphql/<hex>.graphql``, named by the SHA-256 of its text, see :func:`store_schema`)
and gives each tool whose answer is an object an input field (``fields``, or
``selection`` when the GraphQL field already has an argument named ``fields``)
that takes a GraphQL selection set: ``name owner { login } issues(first: 5) { nodes
{ title } }``. At call time :meth:`Selections.document` makes the document the tool
sends:

1. the selection is parsed on its own, as one anonymous query with no variables
   and no directives on it, holding no fragment definitions: text that would close
   the braces and start another operation does not parse as one;
2. it is bounded: at most :data:`MAX_SELECTION_CHARS` characters,
   :data:`MAX_SELECTION_DEPTH` levels of nested selections and
   :data:`MAX_SELECTION_FIELDS` fields in all;
3. it is printed again (never spliced as the caller wrote it) in place of the
   selection of the document the import made, and the whole document is validated
   against the schema (unknown fields, wrong arguments, selections on scalars ...).

Any failure is ``invalid_input`` naming the input field and why; nothing is sent.
The schema's text is checked against its digest each time it is read from the
home, and the built schema is kept per digest in the process (building GitHub's
takes a few seconds, once).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from ..core._errors import InvalidInput
from ..model._manifest import GraphqlField

__all__ = [
    "MAX_SELECTION_CHARS",
    "MAX_SELECTION_DEPTH",
    "MAX_SELECTION_FIELDS",
    "Selections",
    "schema_file",
    "store_schema",
]

#: The longest selection an agent may send (characters).
MAX_SELECTION_CHARS = 8192
#: The deepest selection: levels of nested selection sets below the tool's field.
MAX_SELECTION_DEPTH = 8
#: Fields (aliases and inline fragments' fields included) one selection may name in all.
MAX_SELECTION_FIELDS = 500
#: Built schemas kept per process (by digest: the same text whichever home holds it).
KEPT_SCHEMAS = 8
_BUILT: dict[str, Any] = {}
_LOCK = threading.Lock()


def schema_file(home: Path, digest: str) -> Path:
    """Where the schema of ``digest`` (``sha256:<hex>``) lives in ``home``."""
    return home / "graphql" / f"{digest.removeprefix('sha256:')}.graphql"


def store_schema(home: Path, text: str) -> str:
    """Store a schema's SDL in ``home`` (once: its name is its digest); return the digest."""
    digest = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    path = schema_file(home, digest)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{threading.get_ident()}.part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    return digest


class Selections:
    """Builds the document of a GraphQL tool for a selection an agent chose (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self._home = home

    def document(self, graphql: GraphqlField, selection: Any) -> str:
        """The document to send with ``selection`` in place of the import's own.

        Raises:
            InvalidInput: the selection is not a bounded selection set valid against the schema.
        """
        name = graphql.selection_input or "fields"
        if not isinstance(selection, str):
            raise InvalidInput(f"{name}: a GraphQL selection set is a string", details={"field": name})
        try:
            from graphql import GraphQLError, parse, print_ast, validate
        except ImportError:
            raise InvalidInput(
                f"{name}: the host cannot check GraphQL selections: install glovebox-runtime[import]",
                details={"field": name},
            ) from None
        chosen = _parsed(selection, name, parse, GraphQLError)
        _bounded(chosen, name)
        document = parse(graphql.query, no_location=False)
        root: Any = document.definitions[0]
        root = root.selection_set.selections[0]
        if root.selection_set is None or root.selection_set.loc is None:
            raise InvalidInput(f"{name}: the field {graphql.field} answers a scalar: it has no fields to choose")
        start, end = root.selection_set.loc.start, root.selection_set.loc.end
        text = graphql.query[:start] + print_ast(chosen) + graphql.query[end:]
        schema = self._schema(graphql)
        errors = validate(schema, parse(text))
        if errors:
            reason = "; ".join(error.message for error in errors[:3])
            raise InvalidInput(f"{name}: {reason}", details={"field": name, "errors": len(errors)})
        return text

    def _schema(self, graphql: GraphqlField) -> Any:
        digest = graphql.schema_digest
        if digest is None:
            raise InvalidInput(f"{graphql.selection_input}: this tool was imported without its schema")
        with _LOCK:
            schema = _BUILT.get(digest)
        if schema is not None:
            return schema
        from graphql import build_schema

        path = schema_file(self._home, digest)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            raise InvalidInput(f"the GraphQL schema {digest} is missing from the home: import the API again") from None
        if "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
            raise InvalidInput(f"the GraphQL schema {digest} in the home was changed: import the API again")
        schema = build_schema(text, assume_valid_sdl=True, assume_valid=True)  # the import built it; a newer
        # graphql-core may hold a published schema to rules its server never met (GitHub's deprecations)
        with _LOCK:
            if len(_BUILT) >= KEPT_SCHEMAS:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[digest] = schema
        return schema


def _parsed(selection: str, name: str, parse: Any, error_type: type[Exception]) -> Any:
    """The selection set of ``selection`` (with or without its outer braces), parsed on its own."""
    if len(selection) > MAX_SELECTION_CHARS:
        raise InvalidInput(f"{name}: the selection is over {MAX_SELECTION_CHARS} characters", details={"field": name})
    text = selection.strip()
    braced = text if text.startswith("{") else "{ " + text + " }"
    try:
        document = parse(braced, no_location=True, max_tokens=4 * MAX_SELECTION_FIELDS + 100)
    except error_type as exc:
        reason = getattr(exc, "message", str(exc))
        raise InvalidInput(f"{name}: not a GraphQL selection set: {reason}", details={"field": name}) from None
    except RecursionError:
        raise InvalidInput(f"{name}: the selection is nested too deeply", details={"field": name}) from None
    definitions = document.definitions
    only = definitions[0] if len(definitions) == 1 else None
    if (
        only is None
        or type(only).__name__ != "OperationDefinitionNode"
        or only.name is not None
        or only.variable_definitions
        or only.directives
        or only.operation.value != "query"
    ):
        raise InvalidInput(
            f"{name}: a selection set of fields only (no operations, fragments or variables)", details={"field": name}
        )
    return only.selection_set


def _bounded(selection_set: Any, name: str) -> None:
    """Refuse a selection deeper than :data:`MAX_SELECTION_DEPTH` or naming more than :data:`MAX_SELECTION_FIELDS`."""
    if not selection_set.selections:
        raise InvalidInput(f"{name}: the selection names no field", details={"field": name})
    count = 0
    level = [(selection_set, 1)]
    while level:
        node, depth = level.pop()
        if depth > MAX_SELECTION_DEPTH:
            raise InvalidInput(
                f"{name}: the selection is deeper than {MAX_SELECTION_DEPTH} levels", details={"field": name}
            )
        for item in node.selections:
            kind = type(item).__name__
            if kind == "FragmentSpreadNode":
                raise InvalidInput(f"{name}: fragment spreads are refused (inline fragments work)")
            count += kind == "FieldNode"
            if count > MAX_SELECTION_FIELDS:
                raise InvalidInput(
                    f"{name}: the selection names more than {MAX_SELECTION_FIELDS} fields", details={"field": name}
                )
            if item.selection_set is not None:
                level.append((item.selection_set, depth + (kind == "FieldNode")))

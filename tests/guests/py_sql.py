"""A Python guest on the sql capability: one statement, its parameters, its answer or the host's refusal."""

from glovebox_guest import SqlError, sql, tool


@tool
def run(database: str, statement: str, params: list[object] | None = None) -> object:
    """Run one statement through the host and answer the rows, or the refusal's kind and reason."""
    try:
        return sql.query(database, statement, params or [])
    except SqlError as error:
        return {"error": error.kind, "reason": error.reason}

"""A Python guest on the kv capability: its input's operations in order, each answer or the host's refusal."""

from glovebox_guest import KvError, kv, tool


@tool
def run(ops: list[dict[str, str]]) -> dict[str, object]:
    """Run each kv operation through the host; answer the values, or the refusals' kind and reason."""
    results: list[object] = []
    for op in ops:
        try:
            if op["op"] == "get":
                value = kv.get(op["ns"], op["key"])
                results.append({"missing": True} if value is None else {"value": value})
            elif op["op"] == "set":
                kv.set(op["ns"], op["key"], op["value"])
                results.append({})
            else:
                kv.delete(op["ns"], op["key"])
                results.append({})
        except KvError as error:
            results.append({"error": error.kind, "reason": error.reason})
    return {"results": results}

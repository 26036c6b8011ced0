"""A Python tool that uses the host's HTTP capability: fetch a JSON document, pick a field."""

from glovebox_guest import HttpError, ToolError, http, log, tool


@tool
def fetch_json(url: str, pointer: str = "") -> dict[str, object]:
    """Fetch a JSON document over HTTP and return it, or the part a JSON pointer selects.

    Args:
        url: An http(s) URL the policy lets this tool reach.
        pointer: A JSON pointer such as /items/0/name ("" for the whole document).
    """
    try:
        response = http.get(url, headers={"accept": "application/json"})
    except HttpError as exc:
        log("warn", f"fetch refused: {exc.kind}")
        raise ToolError(f"cannot fetch {url}: {exc.kind}: {exc.reason}") from None
    if response.status != 200:
        raise ToolError(f"{url} answered HTTP {response.status}")
    value = response.json()
    for part in [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return {"url": url, "status": response.status, "value": value}

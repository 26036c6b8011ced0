"""A Python guest asking the MCP client of its call: `kind` (sample or elicit) with `params`."""

from glovebox_guest import ClientError, client, tool


@tool
def run(kind: str, params: dict[str, object]) -> dict[str, object]:
    """Ask the client through the host; answer its result, or the refusal's kind and reason."""
    try:
        answer = client.sample(params) if kind == "sample" else client.elicit(params)
    except ClientError as error:
        return {"error": error.kind, "reason": error.reason}
    return {"answer": answer}

"""echo: answers {"text": ...} with the text it was given."""

from glovebox_guest import tool


@tool
def echo(text: str) -> dict[str, str]:
    """Echo the text."""
    return {"text": text}

"""A pure Python tool: turn a title into a URL slug."""

import re
import unicodedata

from glovebox_guest import ToolError, log, tool


@tool
def slugify(text: str, separator: str = "-", max_length: int = 80) -> dict[str, str | int]:
    """Turn a text into a lowercase ASCII URL slug.

    Accents are folded (é → e), everything that is not a letter or a digit
    becomes the separator, and the slug is cut at a word boundary.

    Args:
        text: The text to slugify.
        separator: What joins the words.
        max_length: The longest slug to return.
    """
    if separator not in ("-", "_", "."):
        raise ToolError(f"separator must be one of - _ . (got {separator!r})")
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", folded.lower())
    if not words:
        raise ToolError("the text has no letters or digits to make a slug from")
    slug = ""
    for word in words:
        candidate = f"{slug}{separator}{word}" if slug else word
        if len(candidate) > max_length:
            break
        slug = candidate
    log("debug", f"{len(words)} words, slug of {len(slug)} characters")
    return {"slug": slug, "words": len(words)}

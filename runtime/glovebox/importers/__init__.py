"""Whole APIs as tools: ``import_mcp`` registers every tool of a remote MCP server.

Each import registers all of its tools or none, and a repeated import refreshes
them: changed tools become new versions (patch bump), removed ones are
deprecated, new ones are added; the returned :class:`ImportResult` says which.
"""

from ._batch import ImportResult
from ._mcp import import_mcp

__all__ = ["ImportResult", "import_mcp"]

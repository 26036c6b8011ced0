/* mcp_text: one text block (a fixture of the MCP conformance suite,
 * tests/servers/test_mcp_conformance.py). Its output is MCP content blocks under
 * "content", which glovebox mcp answers as the call's content (docs/guide/mcp.md). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "{\"content\": [" "{\"type\": \"text\", \"text\": \"This is a simple text response for testing.\"}" "]}");
    return GB_OK;
}

/* mcp_image: one image block, a 1x1 red PNG (a fixture of the MCP conformance suite,
 * tests/servers/test_mcp_conformance.py). Its output is MCP content blocks under
 * "content", which glovebox mcp answers as the call's content (docs/guide/mcp.md). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "{\"content\": [" "{\"type\": \"image\", \"mimeType\": \"image/png\", \"data\": \"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\"}" "]}");
    return GB_OK;
}

/* mcp_mixed: text, image and an embedded resource (a fixture of the MCP conformance suite,
 * tests/servers/test_mcp_conformance.py). Its output is MCP content blocks under
 * "content", which glovebox mcp answers as the call's content (docs/guide/mcp.md). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "{\"content\": [" "{\"type\": \"text\", \"text\": \"Multiple content types test:\"}, "
    "{\"type\": \"image\", \"mimeType\": \"image/png\", \"data\": \"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\"}, "
    "{\"type\": \"resource\", \"resource\": {\"uri\": \"test://mixed-content-resource\", "
    "\"mimeType\": \"application/json\", \"text\": \"{\\\"test\\\":\\\"data\\\",\\\"value\\\":123}\"}}" "]}");
    return GB_OK;
}

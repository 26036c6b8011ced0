/* mcp_audio: one audio block, a short silent WAV (a fixture of the MCP conformance suite,
 * tests/servers/test_mcp_conformance.py). Its output is MCP content blocks under
 * "content", which glovebox mcp answers as the call's content (docs/guide/mcp.md). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "{\"content\": [" "{\"type\": \"audio\", \"mimeType\": \"audio/wav\", \"data\": \"UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA\"}" "]}");
    return GB_OK;
}

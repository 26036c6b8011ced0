/* mcp_logging: three info log lines, then a text block (a fixture of the MCP conformance
 * suite, tests/servers/test_mcp_conformance.py). glovebox mcp relays a call's log lines to
 * the client as notifications/message, at or above the level the client set. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_log(GB_INFO, "Tool execution started");
    gb_log(GB_INFO, "Tool processing data");
    gb_log(GB_INFO, "Tool execution completed");
    gb_buf_puts(out, "{\"content\": [{\"type\": \"text\", \"text\": \"Tool with logging executed successfully\"}]}");
    return GB_OK;
}

/* mcp_progress: reports progress 0, 50 and 100 of 100, then a text block (a fixture of the
 * MCP conformance suite, tests/servers/test_mcp_conformance.py). A log line whose message is
 * a JSON object with a number "progress" is a progress report: glovebox mcp relays it as
 * notifications/progress when the client gave a progress token (docs/guide/mcp.md). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    for (int step = 0; step <= 100; step += 50)
        gb_log(GB_INFO, "{\"progress\": %d, \"total\": 100, \"message\": \"step %d of 3\"}", step, step / 50 + 1);
    gb_buf_puts(out, "{\"content\": [{\"type\": \"text\", \"text\": \"Tool with progress executed successfully\"}]}");
    return GB_OK;
}

/* mcp_error: always fails with a message (a fixture of the MCP conformance suite,
 * tests/servers/test_mcp_conformance.py): the call answers guest_error, over MCP isError. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    return gb_error(out, "This tool intentionally returns an error for testing");
}

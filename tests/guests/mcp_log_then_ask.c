/* mcp_log_then_ask: logs a line and a progress report, then asks the MCP client's model
 * (sampling/createMessage) and answers its text. The client is asked while the call runs, so
 * a client that hears the line and the progress before it is asked heard them in real time
 * (tests/servers/test_mcp_client_requests.py). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf answer = {0}, reason = {0};
    gb_log(GB_INFO, "about to ask the client");
    gb_log(GB_INFO, "{\"progress\": 1, \"total\": 2, \"message\": \"asking\"}");
    gb_client_status st = gb_client_sample(
        "{\"messages\": [{\"role\": \"user\", \"content\": {\"type\": \"text\", \"text\": \"hi\"}}]}", &answer, &reason);
    if (st != GB_CLIENT_OK)
        return gb_error(out, "sampling: %s: %.*s", gb_client_status_name(st), (int)reason.len, reason.data);
    gb_log(GB_INFO, "{\"progress\": 2, \"total\": 2}");
    gb_buf_append(out, answer.data, answer.len);
    return GB_OK;
}

/* log_then_fetch: logs a line, then fetches the URL of its input and answers the body. The
 * upstream of tests/servers/test_mcp_live_logs.py answers only once the MCP client heard the
 * line (or after a while, saying it did not): so the line must reach the client while the
 * call still runs, on the native core as on the Python path. Input: {"url"}. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf url = {0}, reason = {0};
    if (gb_json_get(input, len, "url", &val, &val_len) != 0 || gb_json_string(val, val_len, &url) != 0)
        return gb_error(out, "input needs a url");
    gb_log(GB_INFO, "fetching the answer");
    gb_http_request req = {.method = "GET", .url = url.data};
    gb_http_response resp = {0};
    if (gb_http_fetch(&req, &resp, &reason) != GB_HTTP_OK)
        return gb_error(out, "fetch failed: %.*s", (int)reason.len, reason.data);
    gb_buf_puts(out, "{\"body\": ");
    gb_buf_json_string(out, resp.body ? resp.body : "", resp.body_len);
    gb_buf_puts(out, "}");
    return GB_OK;
}

/* http_denied: asks the host for https://example.com/ without any grant and
 * reports what came back as {"status": ..., "reason": ...}. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_http_request req = {.method = "GET", .url = "https://example.com/"};
    gb_http_response resp = {0};
    gb_buf reason = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, &reason);
    static const char *names[] = {"denied", "timeout", "too-large", "network"};
    if (st == GB_HTTP_OK) {
        gb_buf_printf(out, "{\"status\": \"ok\", \"http_status\": %u}", (unsigned)resp.status);
        gb_http_response_free(&resp);
        return GB_OK;
    }
    gb_buf_printf(out, "{\"status\": \"%s\", \"reason\": ", names[st]);
    gb_buf_json_string(out, reason.data ? reason.data : "", reason.len);
    gb_buf_puts(out, "}");
    gb_buf_free(&reason);
    return GB_OK;
}

/* http_flood: calls http-fetch "count" times with the input's "url" and reports
 * how many answers of each kind came back and the last refusal's reason:
 * {"ok": N, "denied": N, "timeout": N, "too-large": N, "network": N, "last_reason": "..."}. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    double count = 0;
    gb_buf url = {0}, reason = {0};
    if (gb_json_get(input, len, "count", &val, &val_len) != 0 || gb_json_number(val, val_len, &count) != 0 ||
        gb_json_get(input, len, "url", &val, &val_len) != 0 || gb_json_string(val, val_len, &url) != 0) {
        gb_buf_puts(out, "input needs \"url\" and \"count\"");
        return GB_ERR;
    }
    unsigned kinds[5] = {0};
    gb_http_request req = {.method = "GET", .url = url.data};
    for (unsigned i = 0; i < (unsigned)count; i++) {
        gb_http_response resp = {0};
        gb_buf_free(&reason);
        gb_http_status st = gb_http_fetch(&req, &resp, &reason);
        if (st == GB_HTTP_OK) {
            kinds[4]++;
            gb_http_response_free(&resp);
        } else {
            kinds[st]++;
        }
    }
    gb_buf_printf(out, "{\"denied\": %u, \"timeout\": %u, \"too-large\": %u, \"network\": %u, \"ok\": %u, ",
                  kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
    gb_buf_puts(out, "\"last_reason\": ");
    gb_buf_json_string(out, reason.data ? reason.data : "", reason.len);
    gb_buf_puts(out, "}");
    gb_buf_free(&url);
    gb_buf_free(&reason);
    return GB_OK;
}

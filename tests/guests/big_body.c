/* big_body: POSTs a request body of `bytes` bytes (made in the guest, not sent as input)
 * to `url`, to find what the host does with host-call arguments past its copy budget.
 * Input: {"url", "bytes"}. Output: {"status": "<http status name>"}. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf url = {0};
    if (gb_json_get(input, len, "url", &val, &val_len) != 0 || gb_json_string(val, val_len, &url) != 0) return GB_ERR;
    size_t n = 0;
    if (gb_json_get(input, len, "bytes", &val, &val_len) == 0) n = (size_t)strtoull(val, NULL, 10);
    char *body = malloc(n ? n : 1);
    if (!body) return GB_ERR;
    memset(body, 'x', n);
    gb_http_request req = {.method = "POST", .url = url.data, .body = body, .body_len = n};
    gb_http_response resp = {0};
    gb_buf reason = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, &reason);
    gb_buf_printf(out, "{\"status\": \"%s\"}", gb_http_status_name(st));
    if (st == GB_HTTP_OK) gb_http_response_free(&resp);
    gb_buf_free(&reason), gb_buf_free(&url), free(body);
    return GB_OK;
}

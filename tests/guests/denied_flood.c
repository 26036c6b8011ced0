/* denied_flood: asks the host, again and again, for a URL the call may not fetch.
 * Input: {"url": prefix, "pad": bytes appended to the prefix, "count": requests,
 * "fail": whether to end with an error}. Each refusal used to be recorded in full;
 * with a 256 KiB URL the records grew without bound. Output: {"denied": n}. */
#include "glovebox.h"

static double number(const char *input, size_t len, const char *key, double fallback) {
    const char *val;
    size_t val_len;
    double n;
    if (gb_json_get(input, len, key, &val, &val_len) != 0 || gb_json_number(val, val_len, &n) != 0) return fallback;
    return n;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf url = {0};
    if (gb_json_get(input, len, "url", &val, &val_len) != 0 || gb_json_string(val, val_len, &url) != 0)
        return gb_error(out, "input needs a \"url\"");
    size_t pad = (size_t)number(input, len, "pad", 0);
    int count = (int)number(input, len, "count", 1);
    if (gb_buf_reserve(&url, pad + 1) != 0) return gb_error(out, "out of memory");
    memset(url.data + url.len, 'a', pad);
    url.len += pad;
    url.data[url.len] = '\0';
    int denied = 0;
    for (int i = 0; i < count; i++) {
        gb_http_request req = {.method = "GET", .url = url.data};
        gb_http_response resp = {0};
        gb_buf reason = {0};
        if (gb_http_fetch(&req, &resp, &reason) == GB_HTTP_DENIED) denied++;
        else gb_http_response_free(&resp);
        gb_buf_free(&reason);
    }
    gb_buf_free(&url);
    if (number(input, len, "fail", 0)) return gb_error(out, "refused %d times", denied);
    gb_buf_printf(out, "{\"denied\": %d}", denied);
    return GB_OK;
}

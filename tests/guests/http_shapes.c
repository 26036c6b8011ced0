/* http_shapes: sends one request of a chosen shape and reports exactly what came back,
 * to check the host's reading of requests and writing of responses byte for byte.
 * Input: {"url", "method"?, "headers": N, "name"?, "value"?, "body": n}: N headers
 * named `name`-<i> (default "X-H") with value `value` (default "v"); a body of n bytes
 * (byte i is (7*i + 3) & 0xff, so every byte value occurs), an empty body for 0, none for -1.
 * Output: {"status": "ok", "http_status", "body_len", "body_fnv", "headers": [[name, value]...]}
 * (body_fnv: FNV-1a 64 of the body, in hex) or {"status": "<http-error kind>", "reason"}. */
#include "glovebox.h"

static char *field(const char *input, size_t len, const char *key, const char *fallback) {
    const char *val;
    size_t val_len;
    gb_buf s = {0};
    if (gb_json_get(input, len, key, &val, &val_len) != 0 || gb_json_string(val, val_len, &s) != 0) {
        gb_buf_free(&s);
        return strdup(fallback);
    }
    return s.data ? s.data : strdup("");
}

static double number(const char *input, size_t len, const char *key, double fallback) {
    const char *val;
    size_t val_len;
    double n = fallback;
    if (gb_json_get(input, len, key, &val, &val_len) == 0) gb_json_number(val, val_len, &n);
    return n;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    char *url = field(input, len, "url", ""), *method = field(input, len, "method", "GET");
    char *prefix = field(input, len, "name", "X-H"), *value = field(input, len, "value", "v");
    size_t count = (size_t)number(input, len, "headers", 0);
    double body_n = number(input, len, "body", -1);
    gb_header *headers = calloc(count ? count : 1, sizeof *headers);
    char **names = calloc(count ? count : 1, sizeof *names);
    size_t body_len = body_n < 0 ? 0 : (size_t)body_n;
    char *body = body_n < 0 ? NULL : malloc(body_len ? body_len : 1);
    if (!headers || !names || (body_n >= 0 && !body)) return gb_error(out, "out of memory");
    for (size_t i = 0; i < count; i++) {
        names[i] = malloc(strlen(prefix) + 24);
        sprintf(names[i], "%s-%zu", prefix, i);
        headers[i].name = names[i];
        headers[i].value = value;
    }
    for (size_t i = 0; i < body_len; i++) body[i] = (char)((7 * i + 3) & 0xff);
    gb_http_request req = {.method = method, .url = url, .headers = headers, .header_count = count,
                           .body = body, .body_len = body_len};
    gb_http_response resp = {0};
    gb_buf reason = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, &reason);
    if (st == GB_HTTP_OK) {
        uint64_t hash = 1469598103934665603ULL;
        for (size_t i = 0; i < resp.body_len; i++) hash = (hash ^ (uint8_t)resp.body[i]) * 1099511628211ULL;
        gb_buf_printf(out, "{\"status\": \"ok\", \"http_status\": %u, \"body_len\": %zu, \"body_fnv\": \"%016llx\", "
                      "\"headers\": [", (unsigned)resp.status, resp.body_len, (unsigned long long)hash);
        for (size_t i = 0; i < resp.header_count; i++) {
            gb_buf_puts(out, i ? ", [" : "[");
            gb_buf_json_string(out, resp.headers[i].name.ptr, resp.headers[i].name.len);
            gb_buf_puts(out, ", ");
            gb_buf_json_string(out, resp.headers[i].value.ptr, resp.headers[i].value.len);
            gb_buf_puts(out, "]");
        }
        gb_buf_puts(out, "]}");
        gb_http_response_free(&resp);
    } else {
        gb_buf_printf(out, "{\"status\": \"%s\", \"reason\": ", gb_http_status_name(st));
        gb_buf_json_string(out, reason.data ? reason.data : "", reason.len);
        gb_buf_puts(out, "}");
    }
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names), free(headers), free(body), free(url), free(method), free(prefix), free(value);
    gb_buf_free(&reason);
    return GB_OK;
}

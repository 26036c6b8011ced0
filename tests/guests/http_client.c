/* http_client: performs the request described by its input and reports what
 * came back. Input: {"method", "url", "header_name"?, "header_value"?, "body"?}.
 * Output: {"status": "ok", "http_status", "body", "headers": [[name, value]...]}
 * or {"status": "<http-error kind>", "reason"}. */
#include "glovebox.h"

static char *field(const char *input, size_t len, const char *key, const char *fallback) {
    const char *val;
    size_t val_len;
    gb_buf s = {0};
    if (gb_json_get(input, len, key, &val, &val_len) != 0 || gb_json_string(val, val_len, &s) != 0) {
        gb_buf_free(&s);
        return fallback ? strdup(fallback) : NULL;
    }
    return s.data ? s.data : strdup("");
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    char *method = field(input, len, "method", "GET");
    char *url = field(input, len, "url", "");
    char *hname = field(input, len, "header_name", NULL);
    char *hvalue = field(input, len, "header_value", "");
    char *body = field(input, len, "body", NULL);
    gb_header header = {hname, hvalue};
    gb_http_request req = {.method = method, .url = url, .headers = &header, .header_count = hname ? 1 : 0,
                           .body = body, .body_len = body ? strlen(body) : 0};
    gb_http_response resp = {0};
    gb_buf reason = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, &reason);
    if (st == GB_HTTP_OK) {
        gb_buf_printf(out, "{\"status\": \"ok\", \"http_status\": %u, \"body\": ", (unsigned)resp.status);
        gb_buf_json_string(out, resp.body ? resp.body : "", resp.body_len);
        gb_buf_puts(out, ", \"headers\": [");
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
    gb_buf_free(&reason);
    free(method), free(url), free(hname), free(hvalue), free(body);
    return GB_OK;
}

/* lookup: fetch one record from the records API at {"url": ...} and return it.
 * The API wants a bearer token; the host adds it, and the tool never sees it. */
#include "glovebox.h"

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf url = {0}, body = {0}, reason = {0};
    int status = 0;
    if (gb_json_get(input, input_len, "url", &val, &val_len) != 0 || gb_json_string(val, val_len, &url) != 0)
        return gb_error(out, "input must have a string field \"url\"");
    gb_buf_append(&url, "", 1); /* a C string for gb_http_get */
    gb_http_status st = gb_http_get(url.data, &status, &body, &reason);
    int rc = GB_OK;
    if (st != GB_HTTP_OK) {
        rc = gb_error(out, "records API (%s): %.*s", gb_http_status_name(st), (int)reason.len,
                      reason.data ? reason.data : "");
    } else {
        gb_buf_printf(out, "{\"status\": %d, \"body\": ", status);
        gb_buf_json_string(out, body.data ? body.data : "", body.len);
        gb_buf_puts(out, "}");
    }
    gb_buf_free(&url);
    gb_buf_free(&body);
    gb_buf_free(&reason);
    return rc;
}

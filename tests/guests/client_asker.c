/* client_asker: asks the MCP client of its call `times` times (default 1) with the request text
 * `request`, by `sample` or `elicit` (`kind`), and answers each outcome: {"answers": [{"status":
 * "ok"|"denied"|..., "text": <the answer or the reason>}]} (tests/capabilities/test_client.py). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf kind = {0}, request = {0};
    double times = 1;
    if (gb_json_get(input, len, "kind", &val, &val_len) != 0 || gb_json_string(val, val_len, &kind) != 0 ||
        gb_json_get(input, len, "request", &val, &val_len) != 0 || gb_json_string(val, val_len, &request) != 0)
        return gb_error(out, "the input needs a kind and a request");
    if (gb_json_get(input, len, "times", &val, &val_len) == 0) gb_json_number(val, val_len, &times);
    gb_buf_append(&request, "", 1); /* NUL-terminated for the SDK */
    gb_buf_puts(out, "{\"answers\": [");
    for (int i = 0; i < (int)times; i++) {
        gb_buf answer = {0}, reason = {0};
        gb_client_status st = kind.len == 6 && memcmp(kind.data, "sample", 6) == 0
                                  ? gb_client_sample(request.data, &answer, &reason)
                                  : gb_client_elicit(request.data, &answer, &reason);
        gb_buf *text = st == GB_CLIENT_OK ? &answer : &reason;
        gb_buf_printf(out, "%s{\"status\": \"%s\", \"text\": ", i ? ", " : "", gb_client_status_name(st));
        gb_buf_json_string(out, text->data ? text->data : "", text->len);
        gb_buf_puts(out, "}");
        gb_buf_free(&answer);
        gb_buf_free(&reason);
    }
    gb_buf_puts(out, "]}");
    return GB_OK;
}

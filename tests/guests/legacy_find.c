/* A tool written before gb_json_get: it tests gb_json_find's old result (1 when found).
 * It must still build (with a deprecation warning) and answer as it always did. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    if (!gb_json_find(input, len, "name", &val, &val_len)) return gb_error(out, "no name");
    if (gb_json_find(input, len, "missing", &val, &val_len)) return gb_error(out, "found a key that is not there");
    gb_json_find(input, len, "name", &val, &val_len);
    gb_buf_puts(out, "{\"name\": ");
    gb_buf_append(out, val, val_len);
    gb_buf_puts(out, "}");
    return GB_OK;
}

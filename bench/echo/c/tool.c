/* echo: answers {"text": ...} with the text it was given. */
#include "glovebox.h"

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    if (gb_json_get(input, input_len, "text", &val, &val_len) != 0) return gb_error(out, "no text");
    gb_buf_puts(out, "{\"text\": ");
    gb_buf_append(out, val, val_len);
    gb_buf_puts(out, "}");
    return GB_OK;
}

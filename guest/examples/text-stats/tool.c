/* text-stats: counts characters, words and lines of a text. A pure function. */
#include "glovebox.h"

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf text = {0};
    if (gb_json_get(input, input_len, "text", &val, &val_len) != 0 ||
        gb_json_string(val, val_len, &text) != 0)
        return gb_error(out, "input must be an object with a string field \"text\"");
    size_t chars = 0, words = 0, lines = 0, in_word = 0;
    for (size_t i = 0; i < text.len; i++) {
        unsigned char c = (unsigned char)text.data[i];
        if ((c & 0xC0) != 0x80) chars++;
        if (c == '\n') lines++;
        int space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
        if (!space && !in_word) words++;
        in_word = !space;
    }
    if (text.len > 0 && text.data[text.len - 1] != '\n') lines++;
    gb_buf_printf(out, "{\"characters\": %zu, \"words\": %zu, \"lines\": %zu, \"bytes\": %zu}",
                  chars, words, lines, text.len);
    gb_buf_free(&text);
    return GB_OK;
}

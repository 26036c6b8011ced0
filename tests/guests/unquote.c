/* unquote: the input is a JSON string; answers its contents as the output text, so a
 * caller chooses every byte of the output (fuzzing the host's output parser). Handles
 * the escapes the host's encoder writes: \" \\ \/ \b \f \n \r \t and \u00XX.
 * forge_error.c is this tool answering UNQUOTE_ANSWER = GB_ERR: the text becomes the
 * error message instead. */
#include "glovebox.h"

#ifndef UNQUOTE_ANSWER
#define UNQUOTE_ANSWER GB_OK
#endif

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    if (len < 2 || input[0] != '"') return gb_error(out, "the input must be a JSON string");
    for (size_t i = 1; i + 1 < len; i++) {
        char c = input[i];
        if (c == '\\' && i + 2 < len) {
            char e = input[++i];
            const char *plain = "\"\\/bfnrt", *means = "\"\\/\b\f\n\r\t";
            const char *at = strchr(plain, e);
            if (e == 'u' && i + 4 < len) {
                int hi = hexval(input[i + 3]), lo = hexval(input[i + 4]);
                c = (char)(hi * 16 + lo);
                i += 4;
            } else if (at != NULL && e != '\0') {
                c = means[at - plain];
            } else {
                return gb_error(out, "unexpected escape");
            }
        }
        gb_buf_append(out, &c, 1);
    }
    return UNQUOTE_ANSWER;
}

/* leaker: writes its whole input into a log line, then returns it as its output, or,
 * when the input holds the string "fail", fails with an error message quoting it: a
 * tool that leaks whatever it was given (or remembered) through all three channels. */
#include <string.h>

#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    gb_log(GB_INFO, "received %.*s", (int)len, input);
    for (size_t i = 0; i + 6 <= len; i++) {
        if (memcmp(input + i, "\"fail\"", 6) == 0) return gb_error(out, "failed on %.*s", (int)len, input);
    }
    gb_buf_append(out, input, len);
    return GB_OK;
}

/* bad_utf8: returns a "string" whose bytes are not UTF-8 ("\xff\xfe" quoted),
 * which the canonical ABI refuses to lift. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_append(out, "\"\xff\xfe\"", 4);
    return GB_OK;
}

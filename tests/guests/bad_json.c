/* bad_json: returns text that is not JSON. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "not json");
    return GB_OK;
}

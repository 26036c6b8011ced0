/* wrong_shape: returns {"x": 1}; its test manifest's output schema requires "y". */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "{\"x\": 1}");
    return GB_OK;
}

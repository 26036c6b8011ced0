/* bad_pointer: claims its result string is 1 GiB long, far past the end of
 * linear memory; the host must refuse to lift it rather than read beyond. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf_puts(out, "\"short\"");
    out->len = (size_t)1 << 30;
    return GB_OK;
}

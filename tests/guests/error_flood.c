/* error_flood: returns a 1 MiB error message; the host keeps a bounded prefix. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_error(out, "flood:");
    static char chunk[1024];
    memset(chunk, 'e', sizeof chunk);
    for (int i = 0; i < 1024; i++) gb_buf_append(out, chunk, sizeof chunk);
    return out->oom ? gb_error(out, "out of memory") : GB_ERR;
}

/* malloc_bomb_sdk: appends 64 KiB chunks to the output buffer, ignoring the
 * return value, until the buffer records oom; it then returns GB_OK with the
 * oom buffer and leaves it to the SDK glue to report memory_limit. */
#include "glovebox.h"

static char chunk[64 * 1024];

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    memset(chunk, 'x', sizeof chunk);
    while (!out->oom) gb_buf_append(out, chunk, sizeof chunk);
    return GB_OK;
}

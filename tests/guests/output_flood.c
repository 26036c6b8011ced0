/* output_flood: returns a JSON string of 2 MiB ('"' + 2 MiB - 2 of 'a' + '"'),
 * twice the default 1 MiB output limit. */
#include "glovebox.h"

#define FLOOD_BYTES (2u << 20)

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    if (gb_buf_reserve(out, FLOOD_BYTES) != 0) return gb_error(out, "out of memory");
    out->data[0] = '"';
    memset(out->data + 1, 'a', FLOOD_BYTES - 2);
    out->data[FLOOD_BYTES - 1] = '"';
    out->len = FLOOD_BYTES;
    out->data[out->len] = '\0';
    return GB_OK;
}

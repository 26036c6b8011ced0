/* big_static: an 8 MiB static array makes the initial linear memory larger
 * than a 4 MiB memory cap, so the tool cannot even be instantiated. The array
 * is volatile so that -O2 cannot delete it (a global only written to, or read
 * back at a known index, would be optimised away). */
#include "glovebox.h"

static volatile char big[8 << 20];

int gb_tool(const char *input, size_t len, gb_buf *out) {
    big[len] = input[0];
    big[sizeof big - 1 - len] = input[0];
    gb_buf_printf(out, "%d", big[len] + big[sizeof big - 1 - len]);
    return GB_OK;
}

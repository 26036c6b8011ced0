/* fuel_burner: a bounded but long loop (about 10^10 iterations), so a small
 * fuel budget runs out long before it ends, and it does end eventually. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    volatile unsigned long long counter = 0;
    for (unsigned long long i = 0; i < 10000000000ULL; i++) counter++;
    gb_buf_printf(out, "%llu", (unsigned long long)counter);
    return GB_OK;
}

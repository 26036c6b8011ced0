/* loop_forever: never returns. The volatile counter keeps the loop from being
 * optimised away; only the epoch deadline (or fuel) can stop it. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    (void)out;
    volatile unsigned long counter = 0;
    for (;;) {
        counter++;
    }
}

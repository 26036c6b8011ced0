/* stack_overflow: unbounded recursion whose frames live on C's shadow stack
 * in linear memory (a volatile array per frame). The 64 KiB shadow stack sits
 * below the data, so running off its bottom wraps the stack pointer past the
 * end of memory instead of corrupting the tool's data. */
#include "glovebox.h"

static unsigned long deep(unsigned long n) {
    volatile unsigned long frame[32];
    frame[n & 31] = n;
    return deep(n + 1) + frame[(n + 1) & 31];
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    gb_buf_printf(out, "%lu", deep(len));
    return GB_OK;
}

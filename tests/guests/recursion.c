/* recursion: unbounded, non-tail recursion on the wasm call stack. It keeps
 * no locals in linear memory (nothing has its address taken), so it does not
 * touch C's shadow stack: it is the engine's call stack that runs out. The
 * volatile stores around the recursive call stop clang from turning it into
 * a loop. */
#include "glovebox.h"

static volatile unsigned long sink;

static unsigned long deep(unsigned long n) {
    sink = n;
    unsigned long r = deep(n + 1);
    sink = r;
    return r + n;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    gb_buf_printf(out, "%lu", deep(len));
    return GB_OK;
}

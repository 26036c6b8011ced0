/* malloc_bomb: mallocs and dirties 1 MiB blocks until malloc returns NULL,
 * then handles it by returning a guest error. Every block is chained into a
 * list reachable from a volatile global, so the compiler cannot elide the
 * allocations (clang may drop an unused malloc and assume it succeeded). */
#include "glovebox.h"

static void *volatile head;

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    size_t mib = 0;
    for (;;) {
        char *p = (char *)malloc(1 << 20);
        if (!p) break;
        memset(p, 0xAB, 1 << 20);
        *(void **)p = head;
        head = p;
        mib++;
    }
    return gb_error(out, "malloc failed after %zu MiB", mib);
}

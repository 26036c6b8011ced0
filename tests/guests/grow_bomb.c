/* grow_bomb: grows linear memory 1 MiB (16 pages) at a time until the host
 * refuses (memory.grow returns -1). Then, with the input "raw", it touches the
 * first byte past the end of memory (a bare out-of-bounds store, as the SDK
 * once did on OOM); with any other input it calls the SDK's
 * gb_out_of_memory(), which tells the host before it traps. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)out;
    while (__builtin_wasm_memory_grow(0, 16) != (size_t)-1) {
    }
    if (len == 5 && memcmp(input, "\"raw\"", 5) == 0) {
        volatile char *end = (volatile char *)(__builtin_wasm_memory_size(0) * 65536);
        *end = 1;
        __builtin_trap();
    }
    gb_out_of_memory();
}

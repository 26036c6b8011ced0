/* stress: deliberately exceeds one limit, so that you can watch the sandbox
 * stop it. {"mode": "spin"} never returns; {"mode": "burn", "steps": n} does n
 * steps of arithmetic; {"mode": "allocate", "mib": n} holds n MiB of memory. */
#include "glovebox.h"

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf mode = {0};
    double amount = 0;
    if (gb_json_get(input, input_len, "mode", &val, &val_len) != 0 || gb_json_string(val, val_len, &mode) != 0)
        return gb_error(out, "input must have a string field \"mode\"");
    if (gb_json_get(input, input_len, "steps", &val, &val_len) == 0 ||
        gb_json_get(input, input_len, "mib", &val, &val_len) == 0)
        gb_json_number(val, val_len, &amount);

    if (strcmp(mode.data, "spin") == 0) {
        volatile uint64_t spins = 0;
        for (;;) spins++;
    }
    if (strcmp(mode.data, "burn") == 0) {
        volatile uint64_t acc = 1;
        for (uint64_t i = 0; i < (uint64_t)amount; i++) acc = acc * 6364136223846793005ULL + 1;
        return gb_buf_printf(out, "{\"steps\": %llu}", (unsigned long long)amount), GB_OK;
    }
    if (strcmp(mode.data, "allocate") == 0) {
        /* Hold n MiB in 64 KiB blocks, each written to so that it is really used. */
        size_t blocks = (size_t)amount * 16, held = 0;
        void **chain = NULL;
        for (size_t i = 0; i < blocks; i++) {
            void **block = malloc(65536);
            if (!block) gb_out_of_memory(); /* the host reports memory_limit */
            memset(block, (int)i, 65536);
            block[0] = chain; /* keep every block reachable */
            chain = block;
        }
        for (void **b = chain; b; b = (void **)b[0]) held += 65536;
        return gb_buf_printf(out, "{\"held_bytes\": %zu}", held), GB_OK;
    }
    return gb_error(out, "unknown mode \"%s\" (expected spin, burn or allocate)", mode.data);
}

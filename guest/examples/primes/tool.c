/* primes: count the primes up to n by trial division. A pure, CPU-bound tool:
 * a large n runs out of fuel long before it runs out of time. */
#include "glovebox.h"

static int is_prime(uint64_t k) {
    if (k < 2) return 0;
    if (k % 2 == 0) return k == 2;
    for (uint64_t d = 3; d * d <= k; d += 2)
        if (k % d == 0) return 0;
    return 1;
}

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    double n;
    if (gb_json_get(input, input_len, "n", &val, &val_len) != 0 || gb_json_number(val, val_len, &n) != 0)
        return gb_error(out, "input must be an object with a number field \"n\"");
    uint64_t count = 0, largest = 0;
    for (uint64_t k = 2; k <= (uint64_t)n; k++) {
        if (is_prime(k)) {
            count++;
            largest = k;
        }
    }
    gb_buf_printf(out, "{\"n\": %llu, \"count\": %llu, \"largest\": %llu}", (unsigned long long)n,
                  (unsigned long long)count, (unsigned long long)largest);
    return GB_OK;
}

/* hostile_json: answers JSON text built to break a host's parser. The input is a
 * JSON string "KIND N":
 *   deep N       N nested arrays: [[[...1...]]]
 *   number N     an integer of N digits
 *   fraction N   the number 1.000... with N zeros after the point
 *   overflow N   the number 1e(N), which overflows a double when N > 308
 *   surrogate N  {"text": "\ud800"} (a lone surrogate escape), N ignored
 *   surrokey N   {"\udc00": 1} (a lone surrogate in a key), N ignored
 *   nan N        NaN (not JSON), N ignored
 */
#include "glovebox.h"

static void repeat(gb_buf *out, const char *s, size_t times) {
    for (size_t i = 0; i < times; i++) gb_buf_puts(out, s);
}

static const char *KINDS[] = {"deep", "number", "fraction", "overflow", "surrogate", "surrokey", "nan"};

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)len;
    const char *kind = NULL, *at = NULL;
    for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS && at == NULL; i++) {
        at = strstr(input, KINDS[i]);
        kind = KINDS[i];
    }
    if (at == NULL) return gb_error(out, "want \"KIND N\"");
    long n = strtol(at + strlen(kind), NULL, 10);
    if (strcmp(kind, "deep") == 0) {
        repeat(out, "[", (size_t)n);
        gb_buf_puts(out, "1");
        repeat(out, "]", (size_t)n);
    } else if (strcmp(kind, "number") == 0) {
        repeat(out, "7", (size_t)n);
    } else if (strcmp(kind, "fraction") == 0) {
        gb_buf_puts(out, "1.");
        repeat(out, "0", (size_t)n);
    } else if (strcmp(kind, "overflow") == 0) {
        gb_buf_printf(out, "1e%ld", n);
    } else if (strcmp(kind, "surrogate") == 0) {
        gb_buf_puts(out, "{\"text\": \"\\ud800\"}");
    } else if (strcmp(kind, "surrokey") == 0) {
        gb_buf_puts(out, "{\"\\udc00\": 1}");
    } else if (strcmp(kind, "nan") == 0) {
        gb_buf_puts(out, "NaN");
    }
    return GB_OK;
}

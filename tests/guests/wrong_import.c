/* wrong_import: imports `http-fetch` as `func(n: u32) -> u32`, not the world's type.
 * Built against a WIT world changed to match (see tests/test_hostabi.py): the
 * component links (host functions are defined untyped), and its first call of
 * the import must trap, not be read as an http-request. */
#include "glovebox.h"

__attribute__((import_module("glovebox:tool/host@0.1.0"), import_name("http-fetch")))
extern int32_t gb__wrong_fetch(int32_t n);

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input, (void)len;
    gb_buf_printf(out, "{\"n\": %d}", (int)gb__wrong_fetch(7));
    return GB_OK;
}

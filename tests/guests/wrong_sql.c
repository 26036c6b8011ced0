/* wrong_sql: imports the sql interface's `query` as `func(n: u32) -> u32`, not the world's type.
 * Built against a WIT world changed to match (see tests/capabilities/test_sql.py): its first
 * call of the import must trap, never be read as a statement. */
#include "glovebox.h"

__attribute__((import_module("glovebox:tool/sql@0.1.0"), import_name("query")))
extern int32_t gb__wrong_query(int32_t n);

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input, (void)len;
    gb_buf_printf(out, "{\"n\": %d}", (int)gb__wrong_query(7));
    return GB_OK;
}

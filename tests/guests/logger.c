/* logger: three ordinary log lines, then a flood of 20,000 more (~500 KB, thirty
 * times the default log budget), which the host must bound (keeping what fits its
 * log budget and counting the rest). */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_log(GB_INFO, "starting");
    gb_log(GB_INFO, "working on %d things", 3);
    gb_log(GB_INFO, "done");
    for (int i = 0; i < 20000; i++) gb_log(GB_DEBUG, "flood line %d of 20000", i);
    gb_buf_puts(out, "{\"logged\": true}");
    return GB_OK;
}

/* guest_error: reports a tool-level error with a formatted message. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    return gb_error(out, "boom: %s (%zu input bytes)", "the widget is broken", len);
}

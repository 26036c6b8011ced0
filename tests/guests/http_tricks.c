/* http_tricks: a hostile tool that tries every URL, address and header trick it
 * knows in one call against a host that granted it GET on /public/** of
 * 127.0.0.1:PORT, then makes one honest request. Input: {"port": N}.
 * Output: {"results": ["<kind>", ...]} in the order of TRICKS below, where kind is
 * "ok" or the http-error kind the host answered. */
#include "glovebox.h"

typedef struct trick {
    const char *method;
    const char *url;          /* "%d" is replaced by the port (at most once) */
    const char *header_name;  /* NULL for none */
    const char *header_value;
} trick;

static const trick TRICKS[] = {
    {"GET", "http://127.0.0.1:%d/admin", NULL, NULL},
    {"DELETE", "http://127.0.0.1:%d/public/x", NULL, NULL},
    {"GET", "http://127.0.0.1:1/public/x", NULL, NULL},
    {"GET", "https://127.0.0.1:%d/public/x", NULL, NULL},
    {"GET", "http://user:pw@127.0.0.1:%d/public/x", NULL, NULL},
    {"GET", "http://localhost:%d/public/x", NULL, NULL},
    {"GET", "http://0177.0.0.1:%d/public/x", NULL, NULL},
    {"GET", "http://2130706433:%d/public/x", NULL, NULL},
    {"GET", "http://[::ffff:127.0.0.1]:%d/public/x", NULL, NULL},
    {"GET", "http://[::127.0.0.1]:%d/public/x", NULL, NULL},
    {"GET", "http://169.254.169.254/latest/meta-data/", NULL, NULL},
    {"GET", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/../admin", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/..;/admin", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/%%2e%%2e/admin", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/%%252e%%252e/admin", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/%%2fadmin", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public\\..\\admin", NULL, NULL},
    {"GET", "file:///etc/passwd", NULL, NULL},
    {"GET", "gopher://127.0.0.1:%d/_x", NULL, NULL},
    {"GET", "http://127.0.0.1:%d/public/x", "X-A", "v\r\nX-Injected: 1"},
    {"GET", "http://127.0.0.1:%d/public/x", "X-A\r\nX-Injected", "1"},
    {"GET", "http://127.0.0.1:%d/public/x", "X-A", "caf\xc3\xa9"},
    {"GET", "http://127.0.0.1:%d/public/host", "Host", "evil.example"},
    {"GET", "http://127.0.0.1:%d/public/te", "Transfer-Encoding", "chunked"},
    {"GET", "http://127.0.0.1:%d/public/ok", NULL, NULL},
};

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    double port = 0;
    if (gb_json_get(input, len, "port", &val, &val_len) != 0 || gb_json_number(val, val_len, &port) != 0)
        return gb_error(out, "input needs a number field \"port\"");
    gb_buf_puts(out, "{\"results\": [");
    for (size_t i = 0; i < sizeof TRICKS / sizeof TRICKS[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, TRICKS[i].url, (int)port);
        gb_header header = {TRICKS[i].header_name, TRICKS[i].header_value};
        gb_http_request req = {.method = TRICKS[i].method, .url = url, .headers = &header,
                               .header_count = TRICKS[i].header_name ? 1 : 0};
        gb_http_response resp = {0};
        gb_http_status st = gb_http_fetch(&req, &resp, NULL);
        if (st == GB_HTTP_OK) gb_http_response_free(&resp);
        gb_buf_printf(out, "%s\"%s\"", i ? ", " : "", st == GB_HTTP_OK ? "ok" : gb_http_status_name(st));
    }
    gb_buf_puts(out, "]}");
    return GB_OK;
}

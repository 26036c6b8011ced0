/*
 * glovebox.h — the single-header C SDK for glovebox tools.
 *
 * A tool is one C file that includes this header and defines one function:
 *
 *     #include "glovebox.h"
 *
 *     int gb_tool(const char *input, size_t input_len, gb_buf *out) {
 *         // input: the call's JSON text (already validated against the
 *         // manifest's input schema; not NUL-terminated, but input[input_len]
 *         // is a NUL byte for convenience).
 *         gb_buf_puts(out, "{\"ok\": true}");
 *         return GB_OK;            // out holds the JSON result
 *         // or: return gb_error(out, "bad thing: %s", why);  // a guest error
 *     }
 *
 * Build it with `glovebox build tool.c -o tool.wasm`. Everything below — the
 * canonical-ABI glue for the `glovebox:tool@0.1.0` world, a growable buffer,
 * JSON helpers, `gb_log`, `gb_http_fetch`, `gb_http_get`, `gb_sql_query`, `gb_kv_get`/`gb_kv_set`/`gb_kv_delete` and `gb_client_sample`/`gb_client_elicit` — lives in this header so that a
 * tool carries no boilerplate. The header is written for a single translation
 * unit (one tool = one .c file).
 *
 * There is no stdio, no files, no environment and no clock-dependent behaviour
 * in a sandbox: use gb_log() instead of printf().
 */
#ifndef GLOVEBOX_H
#define GLOVEBOX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB_OK 0
#define GB_ERR 1

/*
 * One convention for every helper that can fail: 0 (GB_OK) when it did what
 * it says, -1 when it did not (a missing key, a value of another type, no
 * memory). Test it with `== 0` or `!= 0`. Before 0.2 one helper differed:
 * gb_json_find returned 1 when it found the key. It still does, so no tool
 * breaks, but it is deprecated (a compiler warning names its replacement,
 * gb_json_get); define GB_NO_DEPRECATED before the #include to leave it out.
 */
#if defined(__GNUC__) || defined(__clang__)
#define GB_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define GB_DEPRECATED(why)
#endif

/* ------------------------------------------------------------------------ */
/* A growable byte buffer. A failed allocation sets `oom`; later appends are  */
/* ignored, and the glue reports an out-of-memory result as memory_limit.   */
/* ------------------------------------------------------------------------ */

typedef struct gb_buf {
    char *data;
    size_t len;
    size_t cap;
    int oom;
} gb_buf;

static int gb_buf_reserve(gb_buf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = (char *)realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Append n bytes. Returns 0, or -1 when memory ran out. */
static int gb_buf_append(gb_buf *b, const char *s, size_t n) {
    if (gb_buf_reserve(b, n) != 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int gb_buf_puts(gb_buf *b, const char *s) { return gb_buf_append(b, s, strlen(s)); }

static int gb_buf_vprintf(gb_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || gb_buf_reserve(b, (size_t)n) != 0) return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

static int gb_buf_printf(gb_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = gb_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

/* Append s (n bytes of UTF-8) as a quoted, escaped JSON string. */
static int gb_buf_json_string(gb_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (gb_buf_append(b, "\"", 1) != 0) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            gb_buf_append(b, esc, 2);
        } else if (c == '\n') {
            gb_buf_append(b, "\\n", 2);
        } else if (c == '\r') {
            gb_buf_append(b, "\\r", 2);
        } else if (c == '\t') {
            gb_buf_append(b, "\\t", 2);
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            gb_buf_append(b, esc, 6);
        } else {
            gb_buf_append(b, (const char *)&s[i], 1);
        }
    }
    return gb_buf_append(b, "\"", 1);
}

static void gb_buf_free(gb_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

/* Replace out's contents with a formatted error message; returns GB_ERR so a */
/* tool can write `return gb_error(out, "...", ...);`.                        */
static int gb_error(gb_buf *out, const char *fmt, ...) {
    out->len = 0;
    out->oom = 0;
    va_list ap;
    va_start(ap, fmt);
    gb_buf_vprintf(out, fmt, ap);
    va_end(ap);
    return GB_ERR;
}

/* ------------------------------------------------------------------------ */
/* JSON reading helpers. The input was validated as JSON by the host, so      */
/* these helpers scan without building a tree.                                */
/* ------------------------------------------------------------------------ */

static const char *gb__ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* Returns a pointer just past the JSON value starting at p, or NULL. */
static const char *gb__skip(const char *p, const char *end) {
    p = gb__ws(p, end);
    if (p >= end) return NULL;
    if (*p == '"') {
        for (p++; p < end; p++) {
            if (*p == '\\') p++;
            else if (*p == '"') return p + 1;
        }
        return NULL;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < end; p++) {
            if (*p == '"') {
                p = gb__skip(p, end);
                if (!p) return NULL;
                p--;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
           *p != '\r' && *p != '\t')
        p++;
    return p;
}

/* Find `key` in the top-level JSON object json[0..len). Sets *val and         */
/* *val_len to the raw value text and returns 0 when it is there; returns -1  */
/* otherwise (no such key, or not an object).                                  */
static int gb_json_get(const char *json, size_t len, const char *key, const char **val,
                       size_t *val_len) {
    const char *p = json, *end = json + len;
    size_t klen = strlen(key);
    p = gb__ws(p, end);
    if (p >= end || *p != '{') return -1;
    p++;
    for (;;) {
        p = gb__ws(p, end);
        if (p >= end || *p != '"') return -1;
        const char *kstart = p + 1;
        const char *kend = gb__skip(p, end);
        if (!kend) return -1;
        int match = (size_t)(kend - 1 - kstart) == klen && memcmp(kstart, key, klen) == 0;
        p = gb__ws(kend, end);
        if (p >= end || *p != ':') return -1;
        p = gb__ws(p + 1, end);
        const char *vend = gb__skip(p, end);
        if (!vend) return -1;
        if (match) {
            *val = p;
            *val_len = (size_t)(vend - p);
            return 0;
        }
        p = gb__ws(vend, end);
        if (p >= end || *p != ',') return -1;
        p++;
    }
}

#ifndef GB_NO_DEPRECATED
/* Deprecated: gb_json_get, with the opposite result (this returns 1 when found). */
GB_DEPRECATED("use gb_json_get, which returns 0 when it finds the key, like every helper")
static int gb_json_find(const char *json, size_t len, const char *key, const char **val, size_t *val_len) {
    return gb_json_get(json, len, key, val, val_len) == 0;
}
#endif
/* Walk a JSON array: set `p` to the array's first byte, then each call sets    */
/* *val and *val_len to the next element's raw text and returns 0; it returns  */
/* -1 after the last element (or at malformed input). Elements may be any JSON */
/* value: `while (gb_json_next(&p, end, &v, &n) == 0) { ... }`.                */
static int gb_json_next(const char **p, const char *end, const char **val, size_t *val_len) {
    const char *q = gb__ws(*p, end);
    if (q >= end || (*q != '[' && *q != ',')) return -1;
    q = gb__ws(q + 1, end);
    if (q >= end || *q == ']') return -1;
    const char *stop = gb__skip(q, end);
    if (!stop) return -1;
    *val = q;
    *val_len = (size_t)(stop - q);
    *p = gb__ws(stop, end);
    return 0;
}

static int gb__hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static void gb__utf8(gb_buf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        gb_buf_append(b, u, 1);
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        gb_buf_append(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        gb_buf_append(b, u, 3);
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        gb_buf_append(b, u, 4);
    }
}

/* Decode the JSON string value val[0..len) (with its quotes) into out as     */
/* UTF-8. Returns 0, or -1 when the value is not a string.                    */
static int gb_json_string(const char *val, size_t len, gb_buf *out) {
    if (len < 2 || val[0] != '"' || val[len - 1] != '"') return -1;
    const char *p = val + 1, *end = val + len - 1;
    while (p < end) {
        if (*p != '\\') {
            const char *run = p;
            while (p < end && *p != '\\') p++;
            gb_buf_append(out, run, (size_t)(p - run));
            continue;
        }
        if (++p >= end) return -1;
        char c = *p++;
        switch (c) {
        case 'n': gb_buf_append(out, "\n", 1); break;
        case 't': gb_buf_append(out, "\t", 1); break;
        case 'r': gb_buf_append(out, "\r", 1); break;
        case 'b': gb_buf_append(out, "\b", 1); break;
        case 'f': gb_buf_append(out, "\f", 1); break;
        case 'u': {
            unsigned cp, lo;
            if (end - p < 4 || gb__hex4(p, &cp) != 0) return -1;
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                gb__hex4(p + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            gb__utf8(out, cp);
            break;
        }
        default: gb_buf_append(out, &c, 1); break;
        }
    }
    return out->oom ? -1 : 0;
}

/* Read the number value val[0..len). Returns 0, or -1 when it is not one.    */
static int gb_json_number(const char *val, size_t len, double *out) {
    char tmp[64];
    if (len == 0 || len >= sizeof tmp) return -1;
    memcpy(tmp, val, len);
    tmp[len] = '\0';
    char *endp;
    *out = strtod(tmp, &endp);
    return (endp == tmp + len) ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Host imports: interface glovebox:tool/host@0.1.0                           */
/* ------------------------------------------------------------------------ */

typedef enum gb_level { GB_DEBUG = 0, GB_INFO = 1, GB_WARN = 2, GB_ERROR = 3 } gb_level;

__attribute__((import_module("glovebox:tool/host@0.1.0"), import_name("log")))
extern void gb__host_log(int32_t level, int32_t ptr, int32_t len);

/* Append a line to the call's log; the host bounds and returns it in meta. */
static void gb_log(gb_level level, const char *fmt, ...) {
    gb_buf line = {0};
    va_list ap;
    va_start(ap, fmt);
    gb_buf_vprintf(&line, fmt, ap);
    va_end(ap);
    if (!line.oom && line.data) gb__host_log((int32_t)level, (int32_t)(uintptr_t)line.data,
                                             (int32_t)line.len);
    gb_buf_free(&line);
}

typedef struct gb_header {
    const char *name;
    const char *value;
} gb_header;

typedef struct gb_http_request {
    const char *method;      /* "GET", "POST", ... */
    const char *url;         /* absolute http(s) URL */
    const gb_header *headers;
    size_t header_count;
    const char *body;        /* NULL for no body */
    size_t body_len;
} gb_http_request;

typedef struct gb_str {
    char *ptr;
    size_t len;
} gb_str;

typedef struct gb_http_response {
    uint16_t status;
    struct {
        gb_str name, value;
    } *headers;
    size_t header_count;
    char *body;              /* not NUL-terminated */
    size_t body_len;
} gb_http_response;

typedef enum gb_http_status {
    GB_HTTP_OK = -1,
    GB_HTTP_DENIED = 0,
    GB_HTTP_TIMEOUT = 1,
    GB_HTTP_TOO_LARGE = 2,
    GB_HTTP_NETWORK = 3,
} gb_http_status;

__attribute__((import_module("glovebox:tool/host@0.1.0"), import_name("http-fetch")))
extern void gb__host_http_fetch(int32_t method, int32_t method_len, int32_t url, int32_t url_len,
                                int32_t headers, int32_t headers_len, int32_t has_body,
                                int32_t body, int32_t body_len, int32_t ret);

/* Perform an HTTP request through the host. On GB_HTTP_OK, *resp holds the   */
/* response (free it with gb_http_response_free); otherwise `reason` (when not */
/* NULL) receives the host's explanation, e.g. why the request was denied.    */
static gb_http_status gb_http_fetch(const gb_http_request *req, gb_http_response *resp,
                                    gb_buf *reason) {
    size_t n = req->header_count;
    uint32_t *flat = n ? (uint32_t *)malloc(n * 16) : NULL;
    if (n && !flat) {
        if (reason) gb_buf_puts(reason, "out of memory");
        return GB_HTTP_NETWORK;
    }
    for (size_t i = 0; i < n; i++) {
        flat[i * 4 + 0] = (uint32_t)(uintptr_t)req->headers[i].name;
        flat[i * 4 + 1] = (uint32_t)strlen(req->headers[i].name);
        flat[i * 4 + 2] = (uint32_t)(uintptr_t)req->headers[i].value;
        flat[i * 4 + 3] = (uint32_t)strlen(req->headers[i].value);
    }
    _Alignas(4) uint8_t ret[24];
    gb__host_http_fetch((int32_t)(uintptr_t)req->method, (int32_t)strlen(req->method),
                        (int32_t)(uintptr_t)req->url, (int32_t)strlen(req->url),
                        (int32_t)(uintptr_t)flat, (int32_t)n, req->body != NULL,
                        (int32_t)(uintptr_t)req->body, (int32_t)req->body_len,
                        (int32_t)(uintptr_t)ret);
    free(flat);
    if (ret[0] == 0) {
        uint32_t *w = (uint32_t *)(ret + 4);
        resp->status = *(uint16_t *)(ret + 4);
        resp->headers = (void *)(uintptr_t)w[1];
        resp->header_count = w[2];
        resp->body = (char *)(uintptr_t)w[3];
        resp->body_len = w[4];
        return GB_HTTP_OK;
    }
    uint8_t kind = ret[4];
    char *msg = (char *)(uintptr_t)(*(uint32_t *)(ret + 8));
    size_t msg_len = *(uint32_t *)(ret + 12);
    if (reason) gb_buf_append(reason, msg, msg_len);
    free(msg);
    return (gb_http_status)kind;
}

static void gb_http_response_free(gb_http_response *resp) {
    for (size_t i = 0; i < resp->header_count; i++) {
        free(resp->headers[i].name.ptr);
        free(resp->headers[i].value.ptr);
    }
    free(resp->headers);
    free(resp->body);
    memset(resp, 0, sizeof *resp);
}

/* The simplest request: GET `url` with no headers. On GB_HTTP_OK the body is */
/* appended to `body` and, when `status` is not NULL, *status holds the HTTP   */
/* status; otherwise `reason` (when not NULL) receives the host's explanation. */
/* Secrets the host adds (e.g. an Authorization header) never reach the tool. */
static gb_http_status gb_http_get(const char *url, int *status, gb_buf *body, gb_buf *reason) {
    gb_http_request req = {.method = "GET", .url = url};
    gb_http_response resp = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, reason);
    if (st != GB_HTTP_OK) return st;
    if (status) *status = resp.status;
    if (body) gb_buf_append(body, resp.body ? resp.body : "", resp.body_len);
    gb_http_response_free(&resp);
    return GB_HTTP_OK;
}

/* The name of an http-error kind, e.g. for messages: "denied", "timeout"...  */
static const char *gb_http_status_name(gb_http_status st) {
    static const char *names[] = {"denied", "timeout", "too-large", "network"};
    return st == GB_HTTP_OK ? "ok" : (st >= 0 && st <= 3 ? names[st] : "unknown");
}

/* ------------------------------------------------------------------------ */
/* Host imports: interface glovebox:tool/sql@0.1.0                            */
/* ------------------------------------------------------------------------ */

/* A statement parameter: the WIT `sql-value` variant, laid out as the        */
/* canonical ABI lays it out (a tag byte, the payload 8-aligned at offset 8). */
typedef enum gb_sql_type {
    GB_SQL_NULL = 0,
    GB_SQL_INTEGER = 1,
    GB_SQL_FLOAT = 2,
    GB_SQL_TEXT = 3,
    GB_SQL_BLOB = 4,
} gb_sql_type;

typedef struct gb_sql_value {
    uint8_t type; /* a gb_sql_type */
    union {
        int64_t integer;
        double real;
        struct {
            const char *ptr;
            size_t len;
        } bytes; /* GB_SQL_TEXT (UTF-8) and GB_SQL_BLOB */
    } of;
} gb_sql_value;

_Static_assert(sizeof(gb_sql_value) == 16, "gb_sql_value must match the canonical ABI layout");

static gb_sql_value gb_sql_null(void) { gb_sql_value v = {.type = GB_SQL_NULL}; return v; }
static gb_sql_value gb_sql_integer(int64_t i) { gb_sql_value v = {.type = GB_SQL_INTEGER, .of.integer = i}; return v; }
static gb_sql_value gb_sql_float(double f) { gb_sql_value v = {.type = GB_SQL_FLOAT, .of.real = f}; return v; }
static gb_sql_value gb_sql_text(const char *s) {
    gb_sql_value v = {.type = GB_SQL_TEXT, .of.bytes = {s, strlen(s)}};
    return v;
}
static gb_sql_value gb_sql_blob(const void *p, size_t n) {
    gb_sql_value v = {.type = GB_SQL_BLOB, .of.bytes = {(const char *)p, n}};
    return v;
}

typedef enum gb_sql_status {
    GB_SQL_OK = -1,
    GB_SQL_DENIED = 0,            /* the grant does not allow it, or it does not parse */
    GB_SQL_APPROVAL_REQUIRED = 1, /* its kind needs approval; the reason names the request */
    GB_SQL_TIMEOUT = 2,
    GB_SQL_DATABASE = 3,          /* the database refused or failed it */
} gb_sql_status;

__attribute__((import_module("glovebox:tool/sql@0.1.0"), import_name("query")))
extern void gb__host_sql_query(int32_t database, int32_t database_len, int32_t statement,
                               int32_t statement_len, int32_t params, int32_t params_len, int32_t ret);

/* Run one statement (with `?` placeholders) on the database granted under the */
/* alias `database`. On GB_SQL_OK the answer's JSON text is appended to `rows`: */
/* {"columns": [...], "rows": [[...]], "row_count": N, "truncated": bool,      */
/* "rows_changed": N}; otherwise `reason` (when not NULL) gets the host's words. */
static gb_sql_status gb_sql_query(const char *database, const char *statement, const gb_sql_value *params,
                                  size_t params_len, gb_buf *rows, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_sql_query((int32_t)(uintptr_t)database, (int32_t)strlen(database),
                       (int32_t)(uintptr_t)statement, (int32_t)strlen(statement),
                       (int32_t)(uintptr_t)params, (int32_t)params_len, (int32_t)(uintptr_t)ret);
    if (ret[0] == 0) {
        char *text = (char *)(uintptr_t)(*(uint32_t *)(ret + 4));
        size_t len = *(uint32_t *)(ret + 8);
        if (rows) gb_buf_append(rows, text, len);
        free(text);
        return GB_SQL_OK;
    }
    uint8_t kind = ret[4];
    char *msg = (char *)(uintptr_t)(*(uint32_t *)(ret + 8));
    size_t msg_len = *(uint32_t *)(ret + 12);
    if (reason) gb_buf_append(reason, msg, msg_len);
    free(msg);
    return (gb_sql_status)kind;
}

/* The name of a sql-error kind: "denied", "approval-required", "timeout", "database". */
static const char *gb_sql_status_name(gb_sql_status st) {
    static const char *names[] = {"denied", "approval-required", "timeout", "database"};
    return st == GB_SQL_OK ? "ok" : (st >= 0 && st <= 3 ? names[st] : "unknown");
}

/* ------------------------------------------------------------------------ */
/* Host imports: interface glovebox:tool/kv@0.1.0                             */
/* ------------------------------------------------------------------------ */

typedef enum gb_kv_status {
    GB_KV_OK = -1,
    GB_KV_DENIED = 0,         /* the namespace is not granted (or only for reading) */
    GB_KV_QUOTA_EXCEEDED = 1, /* the write would take the namespace past its byte quota */
    GB_KV_INVALID = 2,        /* the key is empty or longer than 512 bytes */
    GB_KV_STORAGE = 3,        /* the store failed */
    GB_KV_NOT_FOUND = 4,      /* gb_kv_get only: the key has no value (not a host error) */
} gb_kv_status;

__attribute__((import_module("glovebox:tool/kv@0.1.0"), import_name("get")))
extern void gb__host_kv_get(int32_t ns, int32_t ns_len, int32_t key, int32_t key_len, int32_t ret);
__attribute__((import_module("glovebox:tool/kv@0.1.0"), import_name("set")))
extern void gb__host_kv_set(int32_t ns, int32_t ns_len, int32_t key, int32_t key_len, int32_t value,
                            int32_t value_len, int32_t ret);
__attribute__((import_module("glovebox:tool/kv@0.1.0"), import_name("delete")))
extern void gb__host_kv_delete(int32_t ns, int32_t ns_len, int32_t key, int32_t key_len, int32_t ret);

/* A kv-error at ret + 4 (its case byte, then the reason's pointer and length). */
static gb_kv_status gb__kv_error(const uint8_t *ret, gb_buf *reason) {
    char *msg = (char *)(uintptr_t)(*(const uint32_t *)(ret + 8));
    size_t msg_len = *(const uint32_t *)(ret + 12);
    if (reason) gb_buf_append(reason, msg, msg_len);
    free(msg);
    return (gb_kv_status)ret[4];
}

/* The value of `key` in `namespace`, appended to `value`: GB_KV_OK, GB_KV_NOT_FOUND */
/* when the key has none, or a host error whose words go to `reason` (when not NULL). */
static gb_kv_status gb_kv_get(const char *ns, const char *key, gb_buf *value, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_kv_get((int32_t)(uintptr_t)ns, (int32_t)strlen(ns), (int32_t)(uintptr_t)key, (int32_t)strlen(key),
                    (int32_t)(uintptr_t)ret);
    if (ret[0] != 0) return gb__kv_error(ret, reason);
    if (ret[4] == 0) return GB_KV_NOT_FOUND;
    char *text = (char *)(uintptr_t)(*(uint32_t *)(ret + 8));
    size_t len = *(uint32_t *)(ret + 12);
    if (value) gb_buf_append(value, text, len);
    free(text);
    return GB_KV_OK;
}

/* Set `key` in `namespace` to the `value_len` bytes (UTF-8) at `value`. */
static gb_kv_status gb_kv_set(const char *ns, const char *key, const char *value, size_t value_len, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_kv_set((int32_t)(uintptr_t)ns, (int32_t)strlen(ns), (int32_t)(uintptr_t)key, (int32_t)strlen(key),
                    (int32_t)(uintptr_t)value, (int32_t)value_len, (int32_t)(uintptr_t)ret);
    return ret[0] == 0 ? GB_KV_OK : gb__kv_error(ret, reason);
}

/* Remove `key` from `namespace` (GB_KV_OK when it had no value either). */
static gb_kv_status gb_kv_delete(const char *ns, const char *key, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_kv_delete((int32_t)(uintptr_t)ns, (int32_t)strlen(ns), (int32_t)(uintptr_t)key, (int32_t)strlen(key),
                       (int32_t)(uintptr_t)ret);
    return ret[0] == 0 ? GB_KV_OK : gb__kv_error(ret, reason);
}

/* The name of a kv status: "ok", "denied", "quota-exceeded", "invalid", "storage", "not-found". */
static const char *gb_kv_status_name(gb_kv_status st) {
    static const char *names[] = {"denied", "quota-exceeded", "invalid", "storage", "not-found"};
    return st == GB_KV_OK ? "ok" : (st >= 0 && st <= 4 ? names[st] : "unknown");
}

/* ------------------------------------------------------------------------ */
/* Host imports: interface glovebox:tool/client@0.1.0                         */
/* ------------------------------------------------------------------------ */

typedef enum gb_client_status {
    GB_CLIENT_OK = -1,
    GB_CLIENT_DENIED = 0,      /* not granted, or past the grant's number of requests */
    GB_CLIENT_UNSUPPORTED = 1, /* no MCP client waits on this call, or it lacks the capability */
    GB_CLIENT_INVALID = 2,     /* the request is not what the grant allows */
    GB_CLIENT_TIMEOUT = 3,     /* the call's deadline came first */
    GB_CLIENT_FAILED = 4,      /* the client answered an error */
} gb_client_status;

__attribute__((import_module("glovebox:tool/client@0.1.0"), import_name("sample")))
extern void gb__host_client_sample(int32_t request, int32_t request_len, int32_t ret);
__attribute__((import_module("glovebox:tool/client@0.1.0"), import_name("elicit")))
extern void gb__host_client_elicit(int32_t request, int32_t request_len, int32_t ret);

/* A result<string, client-error> at ret: the answer to `answer`, or the reason to `reason`. */
static gb_client_status gb__client_result(const uint8_t *ret, gb_buf *answer, gb_buf *reason) {
    if (ret[0] == 0) {
        char *text = (char *)(uintptr_t)(*(uint32_t *)(ret + 4));
        if (answer) gb_buf_append(answer, text, *(uint32_t *)(ret + 8));
        free(text);
        return GB_CLIENT_OK;
    }
    char *msg = (char *)(uintptr_t)(*(uint32_t *)(ret + 8));
    if (reason) gb_buf_append(reason, msg, *(uint32_t *)(ret + 12));
    free(msg);
    return (gb_client_status)ret[4];
}

/* Ask the call's MCP client's model (`sampling/createMessage`). `request` is the JSON of the */
/* request's params ({"messages": [...], "maxTokens": N}); on GB_CLIENT_OK the JSON of the    */
/* client's CreateMessageResult is appended to `answer`, else `reason` gets the host's words.  */
static gb_client_status gb_client_sample(const char *request, gb_buf *answer, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_client_sample((int32_t)(uintptr_t)request, (int32_t)strlen(request), (int32_t)(uintptr_t)ret);
    return gb__client_result(ret, answer, reason);
}

/* Ask the call's MCP client's user (`elicitation/create`, form mode): `request` is             */
/* {"message": ..., "requestedSchema": {...}}; on GB_CLIENT_OK `answer` gets the ElicitResult's  */
/* JSON ({"action": "accept"|"decline"|"cancel", "content": {...}}).                             */
static gb_client_status gb_client_elicit(const char *request, gb_buf *answer, gb_buf *reason) {
    _Alignas(4) uint8_t ret[16];
    gb__host_client_elicit((int32_t)(uintptr_t)request, (int32_t)strlen(request), (int32_t)(uintptr_t)ret);
    return gb__client_result(ret, answer, reason);
}

/* The name of a client status: "ok", "denied", "unsupported", "invalid", "timeout", "failed". */
static const char *gb_client_status_name(gb_client_status st) {
    static const char *names[] = {"denied", "unsupported", "invalid", "timeout", "failed"};
    return st == GB_CLIENT_OK ? "ok" : (st >= 0 && st <= 4 ? names[st] : "unknown");
}

/* ------------------------------------------------------------------------ */
/* Export glue: `call: func(input: string) -> result<string, string>`         */
/* ------------------------------------------------------------------------ */

int gb_tool(const char *input, size_t input_len, gb_buf *out);

/* Out of memory where no error can be returned: tell the host, then trap.   */
/* The host reports the call as `memory_limit` instead of a crash. Call it    */
/* yourself when malloc returns NULL and the tool cannot go on.               */
__attribute__((noreturn)) static void gb_out_of_memory(void) {
    static const char msg[] = "glovebox: out of memory";
    gb__host_log(GB_ERROR, (int32_t)(uintptr_t)msg, (int32_t)(sizeof msg - 1));
    __builtin_trap();
}

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *old, size_t old_size, size_t align, size_t new_size) {
    (void)old_size;
    (void)align; /* malloc's alignment (16) covers every canonical-ABI type */
    if (new_size == 0) new_size = 1; /* a real pointer, so free() works on empty values */
    void *p = realloc(old, new_size);
    if (!p) gb_out_of_memory(); /* the host cannot receive NULL */
    return p;
}

static _Alignas(4) uint8_t gb__ret[12];
static char *gb__owned; /* the result text, freed by cabi_post_call */

__attribute__((export_name("call")))
uint8_t *gb__export_call(char *input, size_t len) {
    /* cabi_realloc gave us exactly len bytes; keep a NUL after them. */
    char *in = (char *)realloc(input, len + 1);
    if (in) {
        in[len] = '\0';
        input = in;
    }
    gb_buf out = {0};
    if (!in) gb_out_of_memory();
    int rc = gb_tool(input, len, &out);
    free(input);
    if (out.oom) gb_out_of_memory();
    const char *text = out.data ? out.data : "";
    gb__owned = out.data;
    gb__ret[0] = rc == GB_OK ? 0 : 1;
    *(uint32_t *)(gb__ret + 4) = (uint32_t)(uintptr_t)text;
    *(uint32_t *)(gb__ret + 8) = (uint32_t)out.len;
    return gb__ret;
}

__attribute__((export_name("cabi_post_call")))
void gb__post_call(uint8_t *ret) {
    (void)ret;
    free(gb__owned);
    gb__owned = NULL;
}

#endif /* GLOVEBOX_H */

/*
 * engine.c — QuickJS-NG behind the glovebox world: the engine every
 * JavaScript and TypeScript tool runs on.
 *
 * `glovebox build tool.js` bundles the tool (esbuild) into one ES module; the
 * build then runs `gb_init` once on that text, in wasmtime (the module's top
 * level, a top-level `await` included, to its end), and snapshots the memory
 * into the component (Wizer-style). A call therefore starts with the runtime, the
 * context and the tool's function already made: `call` parses the input,
 * calls the default export, settles its Promise and returns JSON.
 *
 * Host access: `log` and `http-fetch` of the glovebox host interface (through
 * glovebox.h), the wall clock and random numbers of WASI 0.2 (Date.now(),
 * Math.random()). No other WASI function is linked: the stubs below answer
 * "not supported", so there is no file, environment or stdio to reach.
 *
 * Compiled with GB_CODE_RUNNER (the code runner of `Runtime.run` only), the
 * engine also imports `host-call` of glovebox:tool/run (guest/js/runner.wit):
 * one string in, one JSON answer out, for every host call a program makes.
 */
#include "glovebox.h"
#include "quickjs.h"

#include <errno.h>
#include <math.h>
#include <sys/time.h>
#include <time.h>

/* How much of the C stack (256 KiB, -z stack-size in _jstoolchain.py) JavaScript  */
/* may use: deep recursion then throws RangeError (~500 frames) before the wasm    */
/* stack of the host (512 KiB, about 1,300 frames) runs out and the call traps.    */
#define GB_JS_STACK_BYTES (160 * 1024)

void gb_js_disable_eval(JSContext *ctx);

/* ---- host time and randomness (WASI 0.2) ---------------------------------- */

__attribute__((import_module("wasi:clocks/wall-clock@0.2.0"), import_name("now")))
extern void gb__wall_now(int32_t ret);
__attribute__((import_module("wasi:random/random@0.2.0"), import_name("get-random-u64")))
extern int64_t gb__random_u64(void);

static void gb__now(struct timespec *ts) {
    _Alignas(8) uint8_t ret[16];
    gb__wall_now((int32_t)(uintptr_t)ret);
    ts->tv_sec = (time_t)(*(uint64_t *)ret);
    ts->tv_nsec = (long)(*(uint32_t *)(ret + 8));
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    gb__now(&ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    (void)clk; /* one clock: the host's wall clock */
    gb__now(ts);
    return 0;
}

/* ---- WASI preview 1 as seen by wasi-libc: nothing there ------------------- */
/* wasi-libc reaches these for stdio, the environment and exit; defining them  */
/* here means the component imports none of them.                             */

#define GB_ENOTSUP 58
#define GB_STUB(name, ...)                                                           \
    int32_t __imported_wasi_snapshot_preview1_##name(__VA_ARGS__) { return GB_ENOTSUP; }
GB_STUB(fd_write, int32_t a, int32_t b, int32_t c, int32_t d)
GB_STUB(fd_read, int32_t a, int32_t b, int32_t c, int32_t d)
GB_STUB(fd_close, int32_t a)
GB_STUB(fd_seek, int32_t a, int64_t b, int32_t c, int32_t d)
GB_STUB(fd_fdstat_get, int32_t a, int32_t b)
GB_STUB(fd_fdstat_set_flags, int32_t a, int32_t b)
GB_STUB(fd_prestat_get, int32_t a, int32_t b)
GB_STUB(fd_prestat_dir_name, int32_t a, int32_t b, int32_t c)
GB_STUB(path_open, int32_t a, int32_t b, int32_t c, int32_t d, int32_t e, int64_t f, int64_t g,
        int32_t h, int32_t i)
GB_STUB(clock_time_get, int32_t a, int64_t b, int32_t c)
GB_STUB(random_get, int32_t a, int32_t b)

int32_t __imported_wasi_snapshot_preview1_environ_sizes_get(int32_t count, int32_t size) {
    *(uint32_t *)(uintptr_t)count = 0;
    *(uint32_t *)(uintptr_t)size = 0;
    return 0;
}
int32_t __imported_wasi_snapshot_preview1_environ_get(int32_t a, int32_t b) {
    (void)a, (void)b;
    return 0;
}
int32_t __imported_wasi_snapshot_preview1_args_sizes_get(int32_t count, int32_t size) {
    *(uint32_t *)(uintptr_t)count = 0;
    *(uint32_t *)(uintptr_t)size = 0;
    return 0;
}
int32_t __imported_wasi_snapshot_preview1_args_get(int32_t a, int32_t b) {
    (void)a, (void)b;
    return 0;
}
/* Zig's libc closes files itself (stdio reaches it); there are none to close. */
int close(int fd) {
    (void)fd;
    errno = EBADF;
    return -1;
}
__attribute__((noreturn)) void __imported_wasi_snapshot_preview1_proc_exit(int32_t code) {
    (void)code;
    __builtin_trap();
}

/* ---- the engine's state: made by gb_init, kept in the snapshot ------------ */

static JSRuntime *gb_rt;
static JSContext *gb_ctx;
static JSValue gb_fn;  /* the tool's default export */
static int gb_oom;     /* an allocation failed during this call */
static int gb_keep_eval; /* set by gb_init_runner only: the code runner compiles programs */

static void *gb_js_calloc(void *opaque, size_t count, size_t size) {
    (void)opaque;
    void *p = calloc(count, size);
    if (!p) gb_oom = 1;
    return p;
}
static void *gb_js_malloc(void *opaque, size_t size) {
    (void)opaque;
    void *p = malloc(size);
    if (!p && size) gb_oom = 1;
    return p;
}
static void gb_js_free(void *opaque, void *ptr) {
    (void)opaque;
    free(ptr);
}
static void *gb_js_realloc(void *opaque, void *ptr, size_t size) {
    (void)opaque;
    void *p = realloc(ptr, size);
    if (!p && size) gb_oom = 1;
    return p;
}
extern size_t malloc_usable_size(void *);
static size_t gb_js_usable(const void *ptr) { return malloc_usable_size((void *)ptr); }
static const JSMallocFunctions gb_malloc = {gb_js_calloc, gb_js_malloc, gb_js_free, gb_js_realloc,
                                            gb_js_usable};

/* ---- natives the guest helper (glovebox.js) is built on ------------------- */

static JSValue gb_native_log(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    int32_t level = GB_INFO;
    if (argc < 2 || JS_ToInt32(ctx, &level, argv[0])) return JS_EXCEPTION;
    size_t len;
    const char *text = JS_ToCStringLen(ctx, &len, argv[1]);
    if (!text) return JS_EXCEPTION;
    gb__host_log(level < 0 || level > 3 ? GB_INFO : level, (int32_t)(uintptr_t)text, (int32_t)len);
    JS_FreeCString(ctx, text);
    return JS_UNDEFINED;
}

static JSValue gb_native_random(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val, (void)argc, (void)argv;
    uint64_t bits = (uint64_t)gb__random_u64() >> 11; /* 53 bits: every double in [0, 1) equally */
    return JS_NewFloat64(ctx, (double)bits / 9007199254740992.0);
}

/* Free the strings of a request built by gb__request. */
static void gb__free_request(JSContext *ctx, gb_http_request *req, gb_header *headers, size_t n,
                             const char *body) {
    for (size_t i = 0; i < n; i++) {
        JS_FreeCString(ctx, headers[i].name);
        JS_FreeCString(ctx, headers[i].value);
    }
    free(headers);
    if (req->method) JS_FreeCString(ctx, req->method);
    if (req->url) JS_FreeCString(ctx, req->url);
    if (body) JS_FreeCString(ctx, body);
}

static JSValue gb__response(JSContext *ctx, gb_http_response *resp) {
    JSValue obj = JS_NewObject(ctx);
    JS_SetPropertyStr(ctx, obj, "status", JS_NewInt32(ctx, resp->status));
    JSValue headers = JS_NewArray(ctx);
    for (size_t i = 0; i < resp->header_count; i++) {
        JSValue pair = JS_NewArray(ctx);
        JS_SetPropertyUint32(ctx, pair, 0,
                             JS_NewStringLen(ctx, resp->headers[i].name.ptr, resp->headers[i].name.len));
        JS_SetPropertyUint32(ctx, pair, 1,
                             JS_NewStringLen(ctx, resp->headers[i].value.ptr, resp->headers[i].value.len));
        JS_SetPropertyUint32(ctx, headers, (uint32_t)i, pair);
    }
    JS_SetPropertyStr(ctx, obj, "headers", headers);
    JS_SetPropertyStr(ctx, obj, "body",
                      JS_NewUint8ArrayCopy(ctx, (const uint8_t *)(resp->body ? resp->body : ""),
                                           resp->body_len));
    return obj;
}

/* fetch(method, url, [[name, value], ...], body: string | Uint8Array | undefined) */
/*   -> {status, headers, body: Uint8Array} or {error: kind, reason}              */
static JSValue gb_native_fetch(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    if (argc < 4) return JS_ThrowTypeError(ctx, "fetch needs (method, url, headers, body)");
    gb_http_request req = {0};
    int64_t n = 0;
    if (JS_GetLength(ctx, argv[2], &n) || n < 0 || n > 1000)
        return JS_ThrowTypeError(ctx, "headers must be a list of at most 1000 [name, value] pairs");
    gb_header *headers = calloc((size_t)(n ? n : 1), sizeof *headers);
    const char *body_text = NULL;
    JSValue result = JS_EXCEPTION;
    if (!headers) return JS_ThrowOutOfMemory(ctx);
    req.method = JS_ToCString(ctx, argv[0]);
    req.url = JS_ToCString(ctx, argv[1]);
    if (!req.method || !req.url) goto done;
    for (int64_t i = 0; i < n; i++) {
        JSValue pair = JS_GetPropertyInt64(ctx, argv[2], i);
        JSValue name = JS_GetPropertyUint32(ctx, pair, 0), value = JS_GetPropertyUint32(ctx, pair, 1);
        headers[i].name = JS_ToCString(ctx, name);
        headers[i].value = JS_ToCString(ctx, value);
        JS_FreeValue(ctx, name);
        JS_FreeValue(ctx, value);
        JS_FreeValue(ctx, pair);
        req.header_count = (size_t)i + 1;
        if (!headers[i].name || !headers[i].value) goto done;
    }
    req.headers = headers;
    if (!JS_IsUndefined(argv[3]) && !JS_IsNull(argv[3])) {
        size_t len;
        uint8_t *bytes = JS_GetUint8Array(ctx, &len, argv[3]);
        if (bytes) {
            req.body = (const char *)bytes;
        } else {
            JS_FreeValue(ctx, JS_GetException(ctx));
            body_text = JS_ToCStringLen(ctx, &len, argv[3]);
            if (!body_text) goto done;
            req.body = body_text;
        }
        req.body_len = len;
    }
    gb_http_response resp = {0};
    gb_buf reason = {0};
    gb_http_status st = gb_http_fetch(&req, &resp, &reason);
    if (st == GB_HTTP_OK) {
        result = gb__response(ctx, &resp);
        gb_http_response_free(&resp);
    } else {
        result = JS_NewObject(ctx);
        JS_SetPropertyStr(ctx, result, "error", JS_NewString(ctx, gb_http_status_name(st)));
        JS_SetPropertyStr(ctx, result, "reason", JS_NewStringLen(ctx, reason.data ? reason.data : "",
                                                                reason.len));
    }
    gb_buf_free(&reason);
done:
    gb__free_request(ctx, &req, headers, req.header_count, body_text);
    return result;
}

/* query(database, statement, params: [null | boolean | number | bigint | string | Uint8Array]) */
/*   -> {text: the rows' JSON} or {error: kind, reason}                                        */
static JSValue gb_native_query(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    if (argc < 3) return JS_ThrowTypeError(ctx, "query needs (database, statement, params)");
    int64_t n = 0;
    if (JS_GetLength(ctx, argv[2], &n) || n < 0 || n > 256)
        return JS_ThrowTypeError(ctx, "params must be a list of at most 256 values");
    gb_sql_value *params = calloc((size_t)(n ? n : 1), sizeof *params);
    const char **texts = calloc((size_t)(n ? n : 1), sizeof *texts);
    const char *database = NULL, *statement = NULL;
    JSValue result = JS_EXCEPTION;
    if (!params || !texts) {
        free(params);
        free(texts);
        return JS_ThrowOutOfMemory(ctx);
    }
    database = JS_ToCString(ctx, argv[0]);
    statement = JS_ToCString(ctx, argv[1]);
    if (!database || !statement) goto done;
    for (int64_t i = 0; i < n; i++) {
        JSValue v = JS_GetPropertyInt64(ctx, argv[2], i);
        size_t len;
        uint8_t *bytes;
        if (JS_IsNull(v) || JS_IsUndefined(v)) {
            params[i] = gb_sql_null();
        } else if (JS_IsBool(v)) {
            params[i] = gb_sql_integer(JS_ToBool(ctx, v));
        } else if (JS_IsBigInt(v)) {
            int64_t big;
            if (JS_ToBigInt64(ctx, &big, v)) { JS_FreeValue(ctx, v); goto done; }
            params[i] = gb_sql_integer(big);
        } else if (JS_IsNumber(v)) {
            double d;
            JS_ToFloat64(ctx, &d, v);
            if (d == (double)(int64_t)d && d > -9007199254740992.0 && d < 9007199254740992.0)
                params[i] = gb_sql_integer((int64_t)d);
            else
                params[i] = gb_sql_float(d);
        } else if (JS_IsString(v)) {
            texts[i] = JS_ToCStringLen(ctx, &len, v);
            if (!texts[i]) { JS_FreeValue(ctx, v); goto done; }
            params[i].type = GB_SQL_TEXT;
            params[i].of.bytes.ptr = texts[i];
            params[i].of.bytes.len = len;
        } else if ((bytes = JS_GetUint8Array(ctx, &len, v)) != NULL) {
            params[i] = gb_sql_blob(bytes, len); /* the array outlives the call: argv holds it */
        } else {
            JS_FreeValue(ctx, JS_GetException(ctx));
            JS_FreeValue(ctx, v);
            JS_ThrowTypeError(ctx, "param %d is not null, a boolean, a number, a bigint, a string or a Uint8Array",
                              (int)i);
            goto done;
        }
        JS_FreeValue(ctx, v);
    }
    gb_buf rows = {0}, reason = {0};
    gb_sql_status st = gb_sql_query(database, statement, params, (size_t)n, &rows, &reason);
    result = JS_NewObject(ctx);
    if (st == GB_SQL_OK) {
        JS_SetPropertyStr(ctx, result, "text", JS_NewStringLen(ctx, rows.data ? rows.data : "", rows.len));
    } else {
        JS_SetPropertyStr(ctx, result, "error", JS_NewString(ctx, gb_sql_status_name(st)));
        JS_SetPropertyStr(ctx, result, "reason", JS_NewStringLen(ctx, reason.data ? reason.data : "", reason.len));
    }
    gb_buf_free(&rows);
    gb_buf_free(&reason);
done:
    for (int64_t i = 0; i < n; i++)
        if (texts[i]) JS_FreeCString(ctx, texts[i]);
    if (database) JS_FreeCString(ctx, database);
    if (statement) JS_FreeCString(ctx, statement);
    free(params);
    free(texts);
    return result;
}

/* kv natives: kvGet(ns, key) -> {value} | {missing: true} | {error, reason};  */
/* kvSet(ns, key, value) and kvDelete(ns, key) -> {} | {error, reason}.        */
static JSValue gb__kv_answer(JSContext *ctx, gb_kv_status st, gb_buf *value, gb_buf *reason) {
    JSValue result = JS_NewObject(ctx);
    if (st == GB_KV_OK && value != NULL) {
        JS_SetPropertyStr(ctx, result, "value", JS_NewStringLen(ctx, value->data ? value->data : "", value->len));
    } else if (st == GB_KV_NOT_FOUND) {
        JS_SetPropertyStr(ctx, result, "missing", JS_TRUE);
    } else if (st != GB_KV_OK) {
        JS_SetPropertyStr(ctx, result, "error", JS_NewString(ctx, gb_kv_status_name(st)));
        JS_SetPropertyStr(ctx, result, "reason", JS_NewStringLen(ctx, reason->data ? reason->data : "", reason->len));
    }
    return result;
}

static JSValue gb_native_kv(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv, int magic) {
    (void)this_val;
    int want = magic == 1 ? 3 : 2; /* 0 get, 1 set, 2 delete */
    if (argc < want) return JS_ThrowTypeError(ctx, "kv needs (namespace, key%s)", magic == 1 ? ", value" : "");
    const char *ns = JS_ToCString(ctx, argv[0]), *key = JS_ToCString(ctx, argv[1]), *value = NULL;
    size_t value_len = 0;
    JSValue result = JS_EXCEPTION;
    if (!ns || !key) goto done;
    if (magic == 1 && !(value = JS_ToCStringLen(ctx, &value_len, argv[2]))) goto done;
    gb_buf got = {0}, reason = {0};
    gb_kv_status st = magic == 0 ? gb_kv_get(ns, key, &got, &reason)
                    : magic == 1 ? gb_kv_set(ns, key, value, value_len, &reason)
                                 : gb_kv_delete(ns, key, &reason);
    result = gb__kv_answer(ctx, st, magic == 0 ? &got : NULL, &reason);
    gb_buf_free(&got);
    gb_buf_free(&reason);
done:
    if (ns) JS_FreeCString(ctx, ns);
    if (key) JS_FreeCString(ctx, key);
    if (value) JS_FreeCString(ctx, value);
    return result;
}

#ifdef GB_CODE_RUNNER
/* ---- the code runner's host calls (glovebox:tool/run, runner.wit) --------- */
/* Linked into the code runner's engine only: a tool's engine has no such      */
/* import, and the host links the interface for the code runner alone.         */

__attribute__((import_module("glovebox:tool/run@0.1.0"), import_name("host-call")))
extern void gb__run_host_call(int32_t kind, int32_t kind_len, int32_t request, int32_t request_len,
                              int32_t ret);

/* encode(value) -> JSON.stringify(value), byte for byte, made here in C for   */
/* plain data (objects whose prototype is Object.prototype or null, arrays,    */
/* strings, numbers, booleans, null): the engine's own JSON.stringify costs     */
/* thousands of instructions per value, and the runner encodes every host      */
/* call's request. Anything else anywhere in the value (a toJSON method, a     */
/* Date, a Map, a Proxy, a function, a BigInt, a boxed primitive, depth past   */
/* GB_ENC_DEPTH, which includes cycles) hands the whole value to the engine's  */
/* JSON.stringify instead, so what comes out is always what JSON.stringify     */
/* says (a getter read before the hand-over runs again).                       */

#define GB_ENC_DEPTH 64
enum { GB_ENC_OK = 0, GB_ENC_SKIP = 1, GB_ENC_RESTART = 2, GB_ENC_FAIL = -1 };

static JSValue gb_enc_object_proto, gb_enc_array_proto;
static JSClassID gb_enc_object_class, gb_enc_array_class;
static JSAtom gb_enc_to_json;
static int gb_enc_ready;

static void gb__enc_init(JSContext *ctx) {
    if (gb_enc_ready) return;
    JSValue object = JS_NewObject(ctx), array = JS_NewArray(ctx);
    gb_enc_object_proto = JS_GetPrototype(ctx, object); /* kept: the context's own, for its life */
    gb_enc_array_proto = JS_GetPrototype(ctx, array);
    gb_enc_object_class = JS_GetClassID(object);
    gb_enc_array_class = JS_GetClassID(array);
    JS_FreeValue(ctx, object);
    JS_FreeValue(ctx, array);
    gb_enc_to_json = JS_NewAtom(ctx, "toJSON");
    gb_enc_ready = 1;
}

static void gb__enc_string(gb_buf *out, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    gb_buf_append(out, "\"", 1);
    size_t run = 0; /* bytes copied as they are, appended together */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[6] = {'\\', 'u', '0', '0', 0, 0};
        size_t skip = 0;
        switch (c) {
        case '\t': esc = "\\t"; break;
        case '\r': esc = "\\r"; break;
        case '\n': esc = "\\n"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        default:
            if (c < 0x20) {
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                esc = u;
            } else if (c == 0xED && i + 2 < n && (unsigned char)s[i + 1] >= 0xA0) {
                /* a lone surrogate, kept by JS_ToCStringLen as its 3-byte form: \udxxx */
                unsigned code = 0xD000u | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
                u[2] = 'd';
                u[3] = hex[(code >> 8) & 15];
                u[4] = hex[(code >> 4) & 15];
                u[5] = hex[code & 15];
                esc = u;
                skip = 2;
            }
        }
        if (!esc) {
            run++;
            continue;
        }
        gb_buf_append(out, s + i - run, run);
        run = 0;
        gb_buf_append(out, esc, esc == u ? 6 : strlen(esc));
        i += skip;
    }
    gb_buf_append(out, s + n - run, run);
    gb_buf_append(out, "\"", 1);
}

static int gb__enc_value(JSContext *ctx, gb_buf *out, JSValueConst v, int depth);

/* An object or array this encoder may walk itself: plain, with no toJSON anywhere on it. */
static int gb__enc_plain(JSContext *ctx, JSValueConst v, int *is_array) {
    JSClassID id = JS_GetClassID(v);
    JSValue proto;
    if (id == gb_enc_object_class) {
        *is_array = 0;
    } else if (id == gb_enc_array_class) {
        *is_array = 1;
    } else {
        return 0;
    }
    proto = JS_GetPrototype(ctx, v);
    int plain = JS_VALUE_GET_PTR(proto) == JS_VALUE_GET_PTR(*is_array ? gb_enc_array_proto : gb_enc_object_proto)
                || (!*is_array && JS_IsNull(proto));
    JS_FreeValue(ctx, proto);
    if (!plain) return 0;
    JSValue to_json = JS_GetProperty(ctx, v, gb_enc_to_json);
    if (JS_IsException(to_json)) return -1;
    plain = JS_IsUndefined(to_json);
    JS_FreeValue(ctx, to_json);
    return plain;
}

static int gb__enc_object(JSContext *ctx, gb_buf *out, JSValueConst v, int depth) {
    int is_array = 0;
    int plain = gb__enc_plain(ctx, v, &is_array);
    if (plain < 0) return GB_ENC_FAIL;
    if (!plain || depth >= GB_ENC_DEPTH) return GB_ENC_RESTART;
    if (is_array) {
        int64_t len;
        if (JS_GetLength(ctx, v, &len)) return GB_ENC_FAIL;
        gb_buf_append(out, "[", 1);
        for (int64_t i = 0; i < len; i++) {
            if (i) gb_buf_append(out, ",", 1);
            JSValue item = JS_GetPropertyInt64(ctx, v, i);
            if (JS_IsException(item)) return GB_ENC_FAIL;
            int r = gb__enc_value(ctx, out, item, depth + 1);
            JS_FreeValue(ctx, item);
            if (r == GB_ENC_SKIP) gb_buf_append(out, "null", 4);
            else if (r != GB_ENC_OK) return r;
        }
        gb_buf_append(out, "]", 1);
        return GB_ENC_OK;
    }
    JSPropertyEnum *keys;
    uint32_t count;
    if (JS_GetOwnPropertyNames(ctx, &keys, &count, v, JS_GPN_STRING_MASK | JS_GPN_ENUM_ONLY)) return GB_ENC_FAIL;
    int r = GB_ENC_OK, first = 1;
    gb_buf_append(out, "{", 1);
    for (uint32_t i = 0; i < count && r == GB_ENC_OK; i++) {
        JSValue item = JS_GetProperty(ctx, v, keys[i].atom);
        if (JS_IsException(item)) {
            r = GB_ENC_FAIL;
            break;
        }
        size_t mark = out->len;
        size_t key_len;
        const char *key = JS_AtomToCStringLen(ctx, &key_len, keys[i].atom);
        if (!key) {
            JS_FreeValue(ctx, item);
            r = GB_ENC_FAIL;
            break;
        }
        if (!first) gb_buf_append(out, ",", 1);
        gb__enc_string(out, key, key_len);
        JS_FreeCString(ctx, key);
        gb_buf_append(out, ":", 1);
        r = gb__enc_value(ctx, out, item, depth + 1);
        JS_FreeValue(ctx, item);
        if (r == GB_ENC_SKIP) { /* undefined, a symbol: the key is left out */
            out->len = mark;
            r = GB_ENC_OK;
        } else if (r == GB_ENC_OK) {
            first = 0;
        }
    }
    JS_FreePropertyEnum(ctx, keys, count);
    if (r == GB_ENC_OK) gb_buf_append(out, "}", 1);
    return r;
}

static int gb__enc_value(JSContext *ctx, gb_buf *out, JSValueConst v, int depth) {
    char digits[16];
    switch (JS_VALUE_GET_TAG(v)) {
    case JS_TAG_NULL:
        gb_buf_append(out, "null", 4);
        return GB_ENC_OK;
    case JS_TAG_BOOL:
        if (JS_VALUE_GET_BOOL(v)) gb_buf_append(out, "true", 4);
        else gb_buf_append(out, "false", 5);
        return GB_ENC_OK;
    case JS_TAG_INT: { /* by hand: snprintf costs more than the rest of a small value */
        int32_t i = JS_VALUE_GET_INT(v);
        uint32_t u = i < 0 ? 0u - (uint32_t)i : (uint32_t)i;
        char *end = digits + sizeof digits, *p = end;
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (i < 0) *--p = '-';
        gb_buf_append(out, p, (size_t)(end - p));
        return GB_ENC_OK;
    }
    case JS_TAG_FLOAT64: {
        double d = JS_VALUE_GET_FLOAT64(v);
        if (!isfinite(d)) {
            gb_buf_append(out, "null", 4);
            return GB_ENC_OK;
        }
        size_t n;
        const char *text = JS_ToCStringLen(ctx, &n, v); /* Number's toString: what JSON writes */
        if (!text) return GB_ENC_FAIL;
        gb_buf_append(out, text, n);
        JS_FreeCString(ctx, text);
        return GB_ENC_OK;
    }
    case JS_TAG_STRING: {
        size_t n;
        const char *text = JS_ToCStringLen(ctx, &n, v);
        if (!text) return GB_ENC_FAIL;
        gb__enc_string(out, text, n);
        JS_FreeCString(ctx, text);
        return GB_ENC_OK;
    }
    case JS_TAG_UNDEFINED:
    case JS_TAG_SYMBOL:
        return GB_ENC_SKIP;
    case JS_TAG_OBJECT:
        return gb__enc_object(ctx, out, v, depth);
    default: /* a BigInt, and anything else: JSON.stringify decides (it throws for a BigInt) */
        return GB_ENC_RESTART;
    }
}

static JSValue gb_native_encode(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    JSValueConst value = argc < 1 ? JS_UNDEFINED : argv[0];
    gb__enc_init(ctx);
    static gb_buf out; /* kept from call to call: most requests fit what the last one grew */
    out.len = 0;
    out.oom = 0;
    int r = gb__enc_value(ctx, &out, value, 0);
    JSValue text;
    if (r == GB_ENC_OK && !out.oom) {
        text = JS_NewStringLen(ctx, out.data ? out.data : "", out.len);
    } else if (r == GB_ENC_SKIP) {
        text = JS_UNDEFINED;
    } else if (r == GB_ENC_RESTART) {
        text = JS_JSONStringify(ctx, value, JS_UNDEFINED, JS_UNDEFINED);
    } else if (out.oom) {
        text = JS_ThrowOutOfMemory(ctx);
    } else {
        text = JS_EXCEPTION;
    }
    if (out.cap > 64 * 1024) gb_buf_free(&out); /* a big request's room is not kept */
    return text;
}

/* The host's answer to one host call: its text (NUL after it; the caller frees it), or NULL. */
static char *gb__host_text(const char *kind, size_t kind_len, const char *request, size_t request_len,
                           size_t *len) {
    _Alignas(4) uint32_t ret[2];
    gb__run_host_call((int32_t)(uintptr_t)kind, (int32_t)kind_len, (int32_t)(uintptr_t)request,
                      (int32_t)request_len, (int32_t)(uintptr_t)ret);
    /* cabi_realloc gave exactly ret[1] bytes: JS_ParseJSON wants a NUL after them. */
    char *text = realloc((char *)(uintptr_t)ret[0], (size_t)ret[1] + 1);
    if (!text) {
        free((char *)(uintptr_t)ret[0]);
        return NULL;
    }
    text[ret[1]] = '\0';
    *len = ret[1];
    return text;
}

/* host(kind: string, request: string) -> the host's JSON answer, parsed. */
static JSValue gb_native_host(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    if (argc < 2) return JS_ThrowTypeError(ctx, "host needs (kind, request)");
    size_t kind_len, request_len, len;
    const char *kind = JS_ToCStringLen(ctx, &kind_len, argv[0]);
    if (!kind) return JS_EXCEPTION;
    const char *request = JS_ToCStringLen(ctx, &request_len, argv[1]);
    if (!request) {
        JS_FreeCString(ctx, kind);
        return JS_EXCEPTION;
    }
    char *text = gb__host_text(kind, kind_len, request, request_len, &len);
    JS_FreeCString(ctx, kind);
    JS_FreeCString(ctx, request);
    if (!text) return JS_ThrowOutOfMemory(ctx);
    JSValue answer = JS_ParseJSON(ctx, text, len, "<host>");
    free(text);
    return answer;
}

/* ---- a resume's replay, answered here ------------------------------------ */
/* On a resume the host hands over the journal's recorded steps in chunks      */
/* (host call `replay`, `{"from": seq, "more": true}`): lines of three, each   */
/* step's kind, its request's text as the runner sent it, and the JSON answer  */
/* the program got. replay(kind, text) answers a host call asking for exactly  */
/* the next one, parsing only its answer; the first that differs, or the       */
/* journal's end, is reported (`{"from": seq, "more": false}`, or the empty    */
/* chunk asked for at the end) and ends the replay: from there on, host calls  */
/* go to the host, which compares them with the journal itself. The chunks     */
/* stay in this engine's memory, out of the program's reach.                   */

static char *gb_rp_text;   /* the chunk being replayed (NULL: none yet, or used up) */
static size_t gb_rp_len, gb_rp_at;
static int64_t gb_rp_seq;  /* the steps replayed so far */
static int gb_rp_ended;

static size_t gb__put_int(char *out, int64_t value) {
    char digits[24], *end = digits + sizeof digits, *p = end;
    uint64_t u = value < 0 ? 0u - (uint64_t)value : (uint64_t)value;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (value < 0) *--p = '-';
    memcpy(out, p, (size_t)(end - p));
    return (size_t)(end - p);
}

/* Ask for the next chunk (more) or report where the replay ended; the host's text, or NULL. */
static char *gb__replay_request(int more, size_t *len) {
    char request[64];
    size_t n = 0;
    memcpy(request, "{\"from\":", 8);
    n = 8 + gb__put_int(request + 8, gb_rp_seq);
    const char *tail = more ? ",\"more\":true}" : ",\"more\":false}";
    memcpy(request + n, tail, strlen(tail));
    n += strlen(tail);
    return gb__host_text("replay", 6, request, n, len);
}

static void gb__replay_end(void) {
    if (gb_rp_ended) return;
    gb_rp_ended = 1;
    free(gb_rp_text);
    gb_rp_text = NULL;
    size_t len;
    free(gb__replay_request(0, &len));
}

/* The next line of the chunk at gb_rp_at: its start and length (NUL-terminated in place), or NULL. */
static char *gb__replay_line(size_t *len) {
    if (gb_rp_at >= gb_rp_len) return NULL;
    char *line = gb_rp_text + gb_rp_at;
    char *nl = memchr(line, '\n', gb_rp_len - gb_rp_at);
    if (!nl) return NULL;
    *nl = '\0';
    *len = (size_t)(nl - line);
    gb_rp_at += *len + 1;
    return line;
}

/* replay(kind, text) -> the recorded answer, parsed; undefined once the replay has ended; */
/* or the host's {"stop": true}.                                                            */
static JSValue gb_native_replay(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    if (gb_rp_ended || argc < 2) return JS_UNDEFINED;
    if (!gb_rp_text || gb_rp_at >= gb_rp_len) {
        free(gb_rp_text);
        gb_rp_text = gb__replay_request(1, &gb_rp_len);
        gb_rp_at = 0;
        if (!gb_rp_text) return JS_ThrowOutOfMemory(ctx);
        if (gb_rp_len > 0 && gb_rp_text[0] == '{') { /* the host stopped the run */
            JSValue stop = JS_ParseJSON(ctx, gb_rp_text, gb_rp_len, "<host>");
            gb_rp_ended = 1;
            free(gb_rp_text);
            gb_rp_text = NULL;
            return stop;
        }
        if (gb_rp_len == 0) { /* the journal's end: the host knows the replay stopped at gb_rp_seq */
            gb_rp_ended = 1;
            free(gb_rp_text);
            gb_rp_text = NULL;
            return JS_UNDEFINED;
        }
    }
    size_t kind_len, text_len, want_kind_len, want_len, answer_len;
    char *want_kind = gb__replay_line(&want_kind_len);
    char *want = want_kind ? gb__replay_line(&want_len) : NULL;
    char *answer = want ? gb__replay_line(&answer_len) : NULL;
    if (!answer) { /* not three lines: the chunk is not one the host makes */
        gb__replay_end();
        return JS_UNDEFINED;
    }
    const char *kind = JS_ToCStringLen(ctx, &kind_len, argv[0]);
    if (!kind) return JS_EXCEPTION;
    const char *text = JS_ToCStringLen(ctx, &text_len, argv[1]);
    if (!text) {
        JS_FreeCString(ctx, kind);
        return JS_EXCEPTION;
    }
    int same = kind_len == want_kind_len && text_len == want_len && memcmp(kind, want_kind, kind_len) == 0
               && memcmp(text, want, text_len) == 0;
    JS_FreeCString(ctx, kind);
    JS_FreeCString(ctx, text);
    if (!same) {
        gb__replay_end();
        return JS_UNDEFINED;
    }
    gb_rp_seq += 1;
    return JS_ParseJSON(ctx, answer, answer_len, "<journal>");
}

/* replayEnd(): report where the replay stopped, if it has not ended yet (the program's end). */
static JSValue gb_native_replay_end(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)ctx;
    (void)this_val;
    (void)argc;
    (void)argv;
    gb__replay_end();
    return JS_UNDEFINED;
}
#endif

/* decode(bytes: Uint8Array) -> string: UTF-8, invalid sequences replaced. */
static JSValue gb_native_decode(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    size_t len;
    uint8_t *bytes = argc < 1 ? NULL : JS_GetUint8Array(ctx, &len, argv[0]);
    if (!bytes) return JS_EXCEPTION;
    return JS_NewStringLen(ctx, (const char *)bytes, len);
}

static const JSCFunctionListEntry gb_natives[] = {
    JS_CFUNC_DEF("log", 2, gb_native_log),
    JS_CFUNC_DEF("decode", 1, gb_native_decode),
    JS_CFUNC_DEF("fetch", 4, gb_native_fetch),
    JS_CFUNC_DEF("query", 3, gb_native_query),
    JS_CFUNC_MAGIC_DEF("kvGet", 2, gb_native_kv, 0),
    JS_CFUNC_MAGIC_DEF("kvSet", 3, gb_native_kv, 1),
    JS_CFUNC_MAGIC_DEF("kvDelete", 2, gb_native_kv, 2),
#ifdef GB_CODE_RUNNER
    JS_CFUNC_DEF("host", 2, gb_native_host),
    JS_CFUNC_DEF("encode", 1, gb_native_encode),
    JS_CFUNC_DEF("replay", 2, gb_native_replay),
    JS_CFUNC_DEF("replayEnd", 0, gb_native_replay_end),
#endif
};

/* ---- errors into text ----------------------------------------------------- */

static void gb__append_value(gb_buf *out, JSContext *ctx, JSValueConst v) {
    size_t len;
    const char *s = JS_ToCStringLen(ctx, &len, v);
    if (s) {
        gb_buf_append(out, s, len);
        JS_FreeCString(ctx, s);
    } else {
        JS_FreeValue(ctx, JS_GetException(ctx));
        gb_buf_puts(out, "(a value that cannot be shown)");
    }
}

/* What a thrown value says: a ToolError its message; another Error            */
/* "Name: message"; a string itself; anything else its JSON or String() text.  */
static void gb__describe(gb_buf *out, JSContext *ctx, JSValueConst exc, int with_stack) {
    if (JS_IsError(exc)) {
        JSValue name = JS_GetPropertyStr(ctx, exc, "name");
        JSValue message = JS_GetPropertyStr(ctx, exc, "message");
        JSValue marker = JS_GetPropertyStr(ctx, exc, "isToolError");
        if (!JS_ToBool(ctx, marker)) {
            gb__append_value(out, ctx, name);
            gb_buf_puts(out, ": ");
        }
        gb__append_value(out, ctx, message);
        JS_FreeValue(ctx, name);
        JS_FreeValue(ctx, message);
        JS_FreeValue(ctx, marker);
        if (with_stack) {
            JSValue stack = JS_GetPropertyStr(ctx, exc, "stack");
            if (JS_IsString(stack)) {
                gb_buf_puts(out, "\n");
                gb__append_value(out, ctx, stack);
            }
            JS_FreeValue(ctx, stack);
        }
        return;
    }
    if (JS_IsObject(exc)) {
        JSValue json = JS_JSONStringify(ctx, exc, JS_UNDEFINED, JS_UNDEFINED);
        if (JS_IsString(json)) {
            gb__append_value(out, ctx, json);
            JS_FreeValue(ctx, json);
            return;
        }
        JS_FreeValue(ctx, JS_IsException(json) ? JS_GetException(ctx) : json);
    }
    gb__append_value(out, ctx, exc);
}

/* The pending exception as an error result, or memory_limit if memory ran out. */
static int gb__fail(JSContext *ctx, gb_buf *out, const char *prefix, int with_stack) {
    JSValue exc = JS_GetException(ctx);
    if (gb_oom) gb_out_of_memory();
    out->len = 0;
    gb_buf_puts(out, prefix);
    gb__describe(out, ctx, exc, with_stack);
    JS_FreeValue(ctx, exc);
    if (gb_oom || out->oom) gb_out_of_memory();
    return GB_ERR;
}

/* Run queued jobs (Promise reactions) until none is left. Returns -1 when one threw. */
static int gb__drain(void) {
    JSContext *job_ctx;
    for (;;) {
        int r = JS_ExecutePendingJob(gb_rt, &job_ctx);
        if (r <= 0) return r;
    }
}

/* ---- build time: evaluate the bundle ------------------------------------- */

static void gb__delete(JSContext *ctx, JSValueConst obj, const char *name) {
    JSAtom atom = JS_NewAtom(ctx, name);
    JS_DeleteProperty(ctx, obj, atom, 0);
    JS_FreeAtom(ctx, atom);
}

/* Evaluate the bundled tool (src[0..len), a script named `name`, NUL-terminated). */
/* Returns NULL, or a message saying why the tool cannot be used.                */
__attribute__((export_name("gb_init")))
const char *gb_init(const char *src, size_t len, const char *name, size_t name_len) {
    (void)name_len;
    static gb_buf why;
    gb_rt = JS_NewRuntime2(&gb_malloc, NULL);
    if (!gb_rt) return "cannot create the JavaScript runtime";
    JS_SetMaxStackSize(gb_rt, GB_JS_STACK_BYTES);
    gb_ctx = JS_NewContext(gb_rt);
    if (!gb_ctx) return "cannot create the JavaScript context";
    JSValue global = JS_GetGlobalObject(gb_ctx);
    JSValue natives = JS_NewObject(gb_ctx);
    JS_SetPropertyFunctionList(gb_ctx, natives, gb_natives, sizeof gb_natives / sizeof gb_natives[0]);
    JS_SetPropertyStr(gb_ctx, global, "__glovebox_native", natives);
    JSValue math = JS_GetPropertyStr(gb_ctx, global, "Math");
    JS_SetPropertyStr(gb_ctx, math, "random", JS_NewCFunction(gb_ctx, gb_native_random, "random", 0));
    JS_FreeValue(gb_ctx, math);
    JSValue compiled = JS_Eval(gb_ctx, src, len, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(compiled)) return gb__fail(gb_ctx, &why, "", 1), why.data;
    JSModuleDef *module = JS_VALUE_GET_PTR(compiled);
    JSValue ran = JS_EvalFunction(gb_ctx, compiled); /* a Promise of the top level's end */
    if (JS_IsException(ran)) return gb__fail(gb_ctx, &why, "", 1), why.data;
    if (gb__drain() < 0) {
        JS_FreeValue(gb_ctx, ran);
        return gb__fail(gb_ctx, &why, "", 1), why.data;
    }
    if (JS_IsPromise(ran)) {
        JSPromiseStateEnum state = JS_PromiseState(gb_ctx, ran);
        JSValue result = JS_PromiseResult(gb_ctx, ran);
        JS_FreeValue(gb_ctx, ran);
        if (state == JS_PROMISE_REJECTED) {
            JS_Throw(gb_ctx, result);
            return gb__fail(gb_ctx, &why, "", 1), why.data;
        }
        JS_FreeValue(gb_ctx, result);
        if (state == JS_PROMISE_PENDING)
            return "the tool's top level awaits something that never settles at build time "
                   "(there is no network, timer or event while the build runs it)";
    } else {
        JS_FreeValue(gb_ctx, ran);
    }
    JSValue ns = JS_GetModuleNamespace(gb_ctx, module);
    gb_fn = JS_GetPropertyStr(gb_ctx, ns, "default");
    JS_FreeValue(gb_ctx, ns);
    gb__delete(gb_ctx, global, "__glovebox_native");
    JS_FreeValue(gb_ctx, global);
    if (!JS_IsFunction(gb_ctx, gb_fn))
        return "the module has no default export that is a function: "
               "write `export default function (input) { ... }`";
    if (!gb_keep_eval) gb_js_disable_eval(gb_ctx);
    JS_RunGC(gb_rt);
    return NULL;
}

/* The code runner of `Runtime.run` (guest/js/runner.js): gb_init, with eval kept, */
/* because the runner compiles the program it is given at call time. A tool's build */
/* calls gb_init; both exports are dropped from the snapshot, so no call can reach  */
/* either.                                                                          */
__attribute__((export_name("gb_init_runner")))
const char *gb_init_runner(const char *src, size_t len, const char *name, size_t name_len) {
    gb_keep_eval = 1;
    return gb_init(src, len, name, name_len);
}

/* ---- a call --------------------------------------------------------------- */

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    if (!gb_ctx) return gb_error(out, "glovebox: the JavaScript engine was not initialised at build time");
    JSContext *ctx = gb_ctx;
    gb_oom = 0; /* whatever the build-time run met, this call starts with none */
    JS_UpdateStackTop(gb_rt);
    JSValue arg = JS_ParseJSON(ctx, input, input_len, "<input>");
    if (JS_IsException(arg)) return gb__fail(ctx, out, "", 0);
    JSValue value = JS_Call(ctx, gb_fn, JS_UNDEFINED, 1, (JSValueConst *)&arg);
    JS_FreeValue(ctx, arg);
    if (JS_IsException(value)) return gb__fail(ctx, out, "", 0);
    if (gb__drain() < 0) {
        JS_FreeValue(ctx, value);
        return gb__fail(ctx, out, "", 0);
    }
    if (JS_IsPromise(value)) {
        JSPromiseStateEnum state = JS_PromiseState(ctx, value);
        JSValue settled = JS_PromiseResult(ctx, value);
        JS_FreeValue(ctx, value);
        if (state == JS_PROMISE_PENDING) {
            JS_FreeValue(ctx, settled);
            return gb_error(out, "the tool's Promise never settled: it awaits something that never "
                                 "resolves (there are no timers or events in a sandbox)");
        }
        if (state == JS_PROMISE_REJECTED) {
            JS_Throw(ctx, settled);
            return gb__fail(ctx, out, "", 0);
        }
        value = settled;
    }
    JSValue json = JS_JSONStringify(ctx, value, JS_UNDEFINED, JS_UNDEFINED);
    JS_FreeValue(ctx, value);
    if (JS_IsException(json)) {
        /* Not JSON text on purpose: the host answers invalid_output and quotes it. */
        gb__fail(ctx, out, "not JSON: ", 0);
        return GB_OK;
    }
    if (!JS_IsString(json)) {
        gb_buf_puts(out, "undefined (the tool returned no JSON value)");
        return GB_OK;
    }
    size_t len;
    const char *text = JS_ToCStringLen(ctx, &len, json);
    if (!text) return gb__fail(ctx, out, "", 0);
    gb_buf_append(out, text, len);
    JS_FreeCString(ctx, text);
    JS_FreeValue(ctx, json);
    return GB_OK;
}

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

#ifdef GB_CODE_RUNNER
/* ---- the code runner's host calls (glovebox:tool/run, runner.wit) --------- */
/* Linked into the code runner's engine only: a tool's engine has no such      */
/* import, and the host links the interface for the code runner alone.         */

__attribute__((import_module("glovebox:tool/run@0.1.0"), import_name("host-call")))
extern void gb__run_host_call(int32_t kind, int32_t kind_len, int32_t request, int32_t request_len,
                              int32_t ret);

/* host(kind: string, request: string) -> the host's JSON answer, parsed. */
static JSValue gb_native_host(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    if (argc < 2) return JS_ThrowTypeError(ctx, "host needs (kind, request)");
    size_t kind_len, request_len;
    const char *kind = JS_ToCStringLen(ctx, &kind_len, argv[0]);
    if (!kind) return JS_EXCEPTION;
    const char *request = JS_ToCStringLen(ctx, &request_len, argv[1]);
    if (!request) {
        JS_FreeCString(ctx, kind);
        return JS_EXCEPTION;
    }
    _Alignas(4) uint32_t ret[2];
    gb__run_host_call((int32_t)(uintptr_t)kind, (int32_t)kind_len, (int32_t)(uintptr_t)request,
                      (int32_t)request_len, (int32_t)(uintptr_t)ret);
    JS_FreeCString(ctx, kind);
    JS_FreeCString(ctx, request);
    /* cabi_realloc gave exactly ret[1] bytes: JS_ParseJSON wants a NUL after them. */
    char *text = realloc((char *)(uintptr_t)ret[0], (size_t)ret[1] + 1);
    if (!text) {
        free((char *)(uintptr_t)ret[0]);
        return JS_ThrowOutOfMemory(ctx);
    }
    text[ret[1]] = '\0';
    JSValue answer = JS_ParseJSON(ctx, text, ret[1], "<host>");
    free(text);
    return answer;
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
#ifdef GB_CODE_RUNNER
    JS_CFUNC_DEF("host", 2, gb_native_host),
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

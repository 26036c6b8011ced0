/*
 * QuickJS-NG as one translation unit, plus what glovebox needs from its
 * internals. Compiled once per QuickJS-NG and Zig version and cached: the
 * engine that every JavaScript tool shares (see engine.c).
 */
#include "quickjs.c"

/* After the tool's bundle has been evaluated: eval() and new Function() throw. */
void gb_js_disable_eval(JSContext *ctx) { ctx->eval_internal = NULL; }

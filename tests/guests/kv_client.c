/* kv_client: runs the operations of its input on the host's kv capability, in order.
 * Input: {"ops": [{"op": "get"|"set"|"delete", "ns": "namespace", "key": "k", "value": "v" (set)}, ...]}.
 * Output: {"results": [{"status": "ok"|"not-found"|..., "value": "..." (get), "reason": "..."}, ...]}. */
#include "glovebox.h"

static void run_op(const char *op, size_t op_len, gb_buf *out) {
    const char *v;
    size_t v_len;
    gb_buf name = {0}, ns = {0}, key = {0}, value = {0}, got = {0}, reason = {0};
    if (gb_json_get(op, op_len, "op", &v, &v_len) == 0) gb_json_string(v, v_len, &name);
    if (gb_json_get(op, op_len, "ns", &v, &v_len) == 0) gb_json_string(v, v_len, &ns);
    if (gb_json_get(op, op_len, "key", &v, &v_len) == 0) gb_json_string(v, v_len, &key);
    if (gb_json_get(op, op_len, "value", &v, &v_len) == 0) gb_json_string(v, v_len, &value);
    const char *n = name.data ? name.data : "", *s = ns.data ? ns.data : "", *k = key.data ? key.data : "";
    gb_kv_status st;
    if (strcmp(n, "get") == 0) st = gb_kv_get(s, k, &got, &reason);
    else if (strcmp(n, "set") == 0) st = gb_kv_set(s, k, value.data ? value.data : "", value.len, &reason);
    else st = gb_kv_delete(s, k, &reason);
    gb_buf_puts(out, "{\"status\": ");
    gb_buf_json_string(out, gb_kv_status_name(st), strlen(gb_kv_status_name(st)));
    if (st == GB_KV_OK && strcmp(n, "get") == 0) {
        gb_buf_puts(out, ", \"value\": ");
        gb_buf_json_string(out, got.data ? got.data : "", got.len);
    }
    if (reason.len) {
        gb_buf_puts(out, ", \"reason\": ");
        gb_buf_json_string(out, reason.data, reason.len);
    }
    gb_buf_puts(out, "}");
    gb_buf_free(&name);
    gb_buf_free(&ns);
    gb_buf_free(&key);
    gb_buf_free(&value);
    gb_buf_free(&got);
    gb_buf_free(&reason);
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *ops, *item;
    size_t ops_len, item_len;
    if (gb_json_get(input, len, "ops", &ops, &ops_len) != 0) return gb_error(out, "no ops");
    gb_buf_puts(out, "{\"results\": [");
    const char *p = ops, *end = ops + ops_len;
    for (int i = 0; gb_json_next(&p, end, &item, &item_len) == 0; i++) {
        if (i) gb_buf_puts(out, ", ");
        run_op(item, item_len, out);
    }
    gb_buf_puts(out, "]}");
    return GB_OK;
}

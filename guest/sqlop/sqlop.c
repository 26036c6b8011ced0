/* sqlop: the generic SQL guest behind `glovebox import sql`.
 *
 * The host calls it with {"operation": {"api", "database", "mode"}, "input": {"sql": "...", "params": [...]}}.
 * It sends the input's one statement, with its parameters (null, true/false as 1/0, numbers, strings),
 * to the host's `query` on the operation's database alias and answers the host's JSON as it is:
 * {"columns": [...], "rows": [[...]], "row_count": N, "truncated": bool, "rows_changed": N}.
 * What the statement may do is decided by the host (the manifest's grant ∩ the policy's), never here:
 * a refusal, an approval request, a timeout or a database error is a guest error naming it. */
#include "glovebox.h"

#define MAX_PARAMS 256

static int is_integer(const char *val, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (val[i] == '.' || val[i] == 'e' || val[i] == 'E') return 0;
    return len < 19;
}

/* One JSON scalar as a sql-value; text is decoded into `text` (kept alive by the caller). */
static int param(const char *val, size_t len, gb_sql_value *out, gb_buf *text) {
    if (len == 4 && memcmp(val, "null", 4) == 0) { *out = gb_sql_null(); return 0; }
    if (len == 4 && memcmp(val, "true", 4) == 0) { *out = gb_sql_integer(1); return 0; }
    if (len == 5 && memcmp(val, "false", 5) == 0) { *out = gb_sql_integer(0); return 0; }
    if (len && *val == '"') {
        if (gb_json_string(val, len, text) != 0) return -1;
        out->type = GB_SQL_TEXT;
        out->of.bytes.ptr = text->data ? text->data : "";
        out->of.bytes.len = text->len;
        return 0;
    }
    double number;
    if (gb_json_number(val, len, &number) != 0) return -1;
    if (is_integer(val, len)) {
        char tmp[24];
        memcpy(tmp, val, len);
        tmp[len] = '\0';
        *out = gb_sql_integer(strtoll(tmp, NULL, 10));
    } else {
        *out = gb_sql_float(number);
    }
    return 0;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *op, *in, *v;
    size_t op_len, in_len, v_len;
    if (gb_json_get(input, len, "operation", &op, &op_len) != 0 || gb_json_get(input, len, "input", &in, &in_len) != 0)
        return gb_error(out, "sqlop: the host did not send an operation and an input");
    gb_buf database = {0}, statement = {0}, reason = {0};
    gb_buf texts[MAX_PARAMS];
    gb_sql_value params[MAX_PARAMS];
    size_t count = 0;
    int rc = GB_OK;
    if (gb_json_get(op, op_len, "database", &v, &v_len) != 0 || gb_json_string(v, v_len, &database) != 0) {
        rc = gb_error(out, "sqlop: the operation names no database");
        goto done;
    }
    if (gb_json_get(in, in_len, "sql", &v, &v_len) != 0 || gb_json_string(v, v_len, &statement) != 0) {
        rc = gb_error(out, "the input needs \"sql\": one statement as a string");
        goto done;
    }
    if (gb_json_get(in, in_len, "params", &v, &v_len) == 0) {
        const char *p = v, *end = v + v_len, *item;
        size_t item_len;
        while (gb_json_next(&p, end, &item, &item_len) == 0) {
            if (count == MAX_PARAMS) {
                rc = gb_error(out, "at most %d params", MAX_PARAMS);
                goto done;
            }
            texts[count] = (gb_buf){0};
            if (param(item, item_len, &params[count], &texts[count]) != 0) {
                count++;
                rc = gb_error(out, "param %u is not null, a boolean, a number or a string", (unsigned)count);
                goto done;
            }
            count++;
        }
    }
    gb_sql_status st = gb_sql_query(database.data ? database.data : "", statement.data ? statement.data : "", params, count, out, &reason);
    if (st != GB_SQL_OK)
        rc = gb_error(out, "sql %s: %.*s", gb_sql_status_name(st), (int)reason.len, reason.data ? reason.data : "");
done:
    for (size_t i = 0; i < count; i++) gb_buf_free(&texts[i]);
    gb_buf_free(&database);
    gb_buf_free(&statement);
    gb_buf_free(&reason);
    return rc;
}

/* sql_client: sends the statements of its input to the host's sql capability.
 * Input: {"database": "alias", "sql": "statement", "int": N (optional, one integer param),
 *         "text": "s" (optional, one text param after it), "cope": true (answer ok even on an error)}.
 * Output: the host's rows JSON, or a guest error naming the sql-error kind and reason. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *v;
    size_t v_len;
    gb_buf database = {0}, statement = {0}, text = {0}, reason = {0};
    gb_sql_value params[2];
    size_t count = 0;
    double number;
    if (gb_json_get(input, len, "database", &v, &v_len) == 0) gb_json_string(v, v_len, &database);
    if (gb_json_get(input, len, "sql", &v, &v_len) == 0) gb_json_string(v, v_len, &statement);
    if (gb_json_get(input, len, "int", &v, &v_len) == 0 && gb_json_number(v, v_len, &number) == 0)
        params[count++] = gb_sql_integer((int64_t)number);
    if (gb_json_get(input, len, "text", &v, &v_len) == 0 && gb_json_string(v, v_len, &text) == 0) {
        params[count].type = GB_SQL_TEXT;
        params[count].of.bytes.ptr = text.data ? text.data : "";
        params[count].of.bytes.len = text.len;
        count++;
    }
    int cope = gb_json_get(input, len, "cope", &v, &v_len) == 0 && v_len == 4 && memcmp(v, "true", 4) == 0;
    gb_sql_status st = gb_sql_query(database.data ? database.data : "", statement.data ? statement.data : "",
                                    params, count, out, &reason);
    int rc = GB_OK;
    if (st != GB_SQL_OK) {
        out->len = 0;
        if (cope) {
            gb_buf_puts(out, "{\"error\": ");
            gb_buf_json_string(out, gb_sql_status_name(st), strlen(gb_sql_status_name(st)));
            gb_buf_puts(out, "}");
        } else {
            rc = gb_error(out, "sql %s: %.*s", gb_sql_status_name(st), (int)reason.len, reason.data ? reason.data : "");
        }
    }
    gb_buf_free(&database);
    gb_buf_free(&statement);
    gb_buf_free(&text);
    gb_buf_free(&reason);
    return rc;
}

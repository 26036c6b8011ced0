// js_sql: sends its input's statement to the host's sql capability through the JavaScript helper.
// Input: {"database": "alias", "statement": "...", "params": [...]}. Output: the rows, or
// {"error": kind, "reason": "..."} when the host refused or failed it (an SqlError).
import { sql, SqlError } from "glovebox";

export default async function (input) {
  try {
    return await sql.query(input.database, input.statement, input.params ?? []);
  } catch (error) {
    if (error instanceof SqlError) return { error: error.kind, reason: error.reason };
    throw error;
  }
}

// js_kv: runs its input's kv operations through the JavaScript helper, in order.
// Input: {"ops": [{"op": "get"|"set"|"delete", "ns": "...", "key": "...", "value": "..."}]}.
// Output: {"results": [{"value": ...} | {} | {"error": kind, "reason": "..."}]} (a KvError is caught).
import { kv, KvError } from "glovebox";

export default async function (input) {
  const results = [];
  for (const op of input.ops) {
    try {
      if (op.op === "get") {
        const value = await kv.get(op.ns, op.key);
        results.push(value === undefined ? { missing: true } : { value });
      } else if (op.op === "set") {
        await kv.set(op.ns, op.key, op.value);
        results.push({});
      } else {
        await kv.delete(op.ns, op.key);
        results.push({});
      }
    } catch (error) {
      if (!(error instanceof KvError)) throw error;
      results.push({ error: error.kind, reason: error.reason });
    }
  }
  return { results };
}

// The glovebox guest helper for tools written in JavaScript or TypeScript.
//
// A tool is a module whose default export takes the call's input (a JSON value)
// and returns its output (a JSON value), or a Promise of it:
//
//     import { http, kv, log, sql, ToolError } from "glovebox";
//
//     export default async function (input) {
//       if (!input.city) throw new ToolError("city is empty"); // -> guest_error
//       log("info", `looking up ${input.city}`);               // -> meta.logs
//       const response = await http.get(`https://api.example.com/?q=${input.city}`);
//       return { temperature: response.json().temp };          // -> JSON output
//     }
//
// `glovebox build tool.js` (or tool.ts) bundles the module with this helper
// (esbuild) and runs its top level once, at build time, inside the engine; the
// component starts every call from that state. Host calls are synchronous in
// the sandbox: `http.*` return Promises that are already settled, so `await`
// works as in any runtime, and there are no timers or events to wait for.
//
// Errors: a ToolError becomes a guest_error with its message; another Error a
// guest_error reading "Name: message"; a thrown string or other value a
// guest_error with its text. eval() and new Function() are not available once
// the build has run the top level.

const native = globalThis.__glovebox_native;
const LEVELS = { debug: 0, info: 1, warn: 2, error: 3 };

/** Throw it to answer the call with an error message (a guest_error). */
export class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ToolError";
  }
}
Object.defineProperty(ToolError.prototype, "isToolError", { value: true });

/** The host did not produce a response: `kind` is denied, timeout, too-large or network. */
export class HttpError extends ToolError {
  constructor(kind, reason) {
    super(`http ${kind}: ${reason}`);
    this.name = "HttpError";
    this.kind = kind;
    this.reason = reason;
  }
}

function text(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const json = JSON.stringify(value);
    return json === undefined ? String(value) : json;
  } catch {
    return String(value);
  }
}

/** Append a line to the call's log: level is debug, info, warn or error. */
export function log(level, ...message) {
  native.log(LEVELS[level] ?? LEVELS.info, message.map(text).join(" "));
}

/** An HTTP response from the host. */
export class Response {
  constructor(answer) {
    /** @type {number} */
    this.status = answer.status;
    /** @type {[string, string][]} */
    this.headers = answer.headers;
    /** @type {Uint8Array} */
    this.body = answer.body;
  }

  /** Whether the status is 2xx. */
  get ok() {
    return this.status >= 200 && this.status < 300;
  }

  /** The first value of header `name` (any case), or undefined. */
  header(name) {
    const wanted = String(name).toLowerCase();
    const found = this.headers.find(([key]) => key.toLowerCase() === wanted);
    return found === undefined ? undefined : found[1];
  }

  /** The body decoded as UTF-8 (invalid bytes replaced). */
  text() {
    return native.decode(this.body);
  }

  /** The body parsed as JSON. */
  json() {
    return JSON.parse(this.text());
  }
}

function pairs(headers) {
  if (headers === undefined || headers === null) return [];
  const list = Array.isArray(headers) ? headers : Object.entries(headers);
  return list.map(([name, value]) => [String(name), String(value)]);
}

function encode(body, headers) {
  if (body === undefined || body === null || typeof body === "string" || body instanceof Uint8Array) {
    return body ?? undefined;
  }
  if (!headers.some(([name]) => name.toLowerCase() === "content-type")) {
    headers.push(["content-type", "application/json"]);
  }
  return JSON.stringify(body);
}

/** HTTP through the host's http-fetch: only what the call was granted. */
export const http = {
  /**
   * Send a request: `init` has method (GET), headers (an object or [name, value] pairs)
   * and body (a string, a Uint8Array, or a value sent as JSON). Rejects with HttpError.
   */
  async fetch(url, init = {}) {
    const headers = pairs(init.headers);
    const body = encode(init.body, headers);
    const answer = native.fetch(String(init.method ?? "GET").toUpperCase(), String(url), headers, body);
    if (answer.error !== undefined) throw new HttpError(answer.error, answer.reason);
    return new Response(answer);
  },

  /** GET url. */
  get(url, init = {}) {
    return http.fetch(url, { ...init, method: "GET" });
  },

  /** POST url with a body (a string, a Uint8Array, or a value sent as JSON). */
  post(url, body, init = {}) {
    return http.fetch(url, { ...init, method: "POST", body });
  },
};

/** The host did not run the statement: `kind` is denied, approval-required, timeout or database. */
export class SqlError extends ToolError {
  constructor(kind, reason) {
    super(`sql ${kind}: ${reason}`);
    this.name = "SqlError";
    this.kind = kind;
    this.reason = reason;
  }
}

/** SQL through the host's sql capability: a database named by its alias, only what the call was granted. */
export const sql = {
  /**
   * Run one statement with its parameters (null, booleans as 1/0, numbers, bigints, strings,
   * Uint8Array blobs): `?` placeholders on SQLite, `$1, $2` on PostgreSQL. Resolves to
   * {columns, rows, row_count, truncated, rows_changed}; rejects with SqlError.
   */
  async query(database, statement, params = []) {
    if (!Array.isArray(params)) throw new TypeError("params must be an array");
    const answer = native.query(String(database), String(statement), params);
    if (answer.error !== undefined) throw new SqlError(answer.error, answer.reason);
    return JSON.parse(answer.text);
  },
};

/** The host did not do the kv operation: `kind` is denied, quota-exceeded, invalid or storage. */
export class KvError extends ToolError {
  constructor(kind, reason) {
    super(`kv ${kind}: ${reason}`);
    this.name = "KvError";
    this.kind = kind;
    this.reason = reason;
  }
}

function kvAnswer(answer) {
  if (answer.error !== undefined) throw new KvError(answer.error, answer.reason);
  return answer.value;
}

/** The host's key-value store: namespaces the call was granted, each with a byte quota. */
export const kv = {
  /** The value (a string) of `key` in `namespace`, or undefined; rejects with KvError. */
  async get(namespace, key) {
    return kvAnswer(native.kvGet(String(namespace), String(key)));
  },
  /** Set `key` in `namespace` to the string `value`; rejects with KvError (quota-exceeded past the quota). */
  async set(namespace, key, value) {
    kvAnswer(native.kvSet(String(namespace), String(key), String(value)));
  },
  /** Remove `key` from `namespace`; rejects with KvError. */
  async delete(namespace, key) {
    kvAnswer(native.kvDelete(String(namespace), String(key)));
  },
};

// console.* goes to the call's log too (console.log at level info).
globalThis.console = {
  debug: (...message) => log("debug", ...message),
  log: (...message) => log("info", ...message),
  info: (...message) => log("info", ...message),
  warn: (...message) => log("warn", ...message),
  error: (...message) => log("error", ...message),
};

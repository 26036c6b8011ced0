// Types of the glovebox guest helper (glovebox.js), for TypeScript tools and editors.
// esbuild does not read them (it strips types without checking); `tsc --noEmit` does,
// with "paths": { "glovebox": ["<this directory>/glovebox.d.ts"] } in tsconfig.json.

declare module "glovebox" {
  /** Throw it to answer the call with an error message (a guest_error). */
  export class ToolError extends Error {
    constructor(message: string);
  }

  /** The host did not produce a response. */
  export class HttpError extends ToolError {
    readonly kind: "denied" | "timeout" | "too-large" | "network";
    readonly reason: string;
  }

  /** An HTTP response from the host. */
  export class Response {
    readonly status: number;
    readonly headers: [string, string][];
    readonly body: Uint8Array;
    /** Whether the status is 2xx. */
    readonly ok: boolean;
    /** The first value of header `name` (any case). */
    header(name: string): string | undefined;
    /** The body decoded as UTF-8 (invalid bytes replaced). */
    text(): string;
    /** The body parsed as JSON. */
    json(): unknown;
  }

  export interface RequestInit {
    method?: string;
    headers?: Record<string, string> | [string, string][];
    /** A string, bytes, or any other value (sent as JSON, with content-type application/json). */
    body?: unknown;
  }

  /** HTTP through the host's http-fetch: only what the call was granted. Rejects with HttpError. */
  export const http: {
    fetch(url: string, init?: RequestInit): Promise<Response>;
    get(url: string, init?: Omit<RequestInit, "method" | "body">): Promise<Response>;
    post(url: string, body?: unknown, init?: Omit<RequestInit, "method" | "body">): Promise<Response>;
  };

  /** The host did not run the statement. */
  export class SqlError extends ToolError {
    readonly kind: "denied" | "approval-required" | "timeout" | "database";
    readonly reason: string;
  }

  /** A value bound to a placeholder: booleans are sent as 1/0, Uint8Array as a blob. */
  export type SqlValue = null | boolean | number | bigint | string | Uint8Array;

  /** One statement's answer. */
  export interface SqlRows {
    columns: string[];
    rows: unknown[][];
    row_count: number;
    truncated: boolean;
    rows_changed: number;
  }

  /** SQL through the host's sql capability, on a database named by its alias. Rejects with SqlError. */
  export const sql: {
    query(database: string, statement: string, params?: SqlValue[]): Promise<SqlRows>;
  };

  /** The host did not do the kv operation. */
  export class KvError extends ToolError {
    readonly kind: "denied" | "quota-exceeded" | "invalid" | "storage";
    readonly reason: string;
  }

  /** The host's key-value store, in the namespaces the call was granted. Rejects with KvError. */
  export const kv: {
    get(namespace: string, key: string): Promise<string | undefined>;
    set(namespace: string, key: string, value: string): Promise<void>;
    delete(namespace: string, key: string): Promise<void>;
  };

  /** Append a line to the call's log (meta.logs). */
  export function log(level: "debug" | "info" | "warn" | "error", ...message: unknown[]): void;
}

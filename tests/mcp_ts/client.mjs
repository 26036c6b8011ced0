// The official TypeScript MCP client (@modelcontextprotocol/sdk), driven by
// tests/test_mcp_ts.py: it runs the steps of a plan against a glovebox MCP
// server and prints one JSON line per step, so the test asserts in Python on
// exactly what a TypeScript agent would see.
//
// usage: node client.mjs '<plan as JSON>'
// plan: {
//   "transport": {"type": "stdio", "command", "args", "env"}
//              | {"type": "http", "url", "headers", "oauth": bool},
//   "steps": [{"op": "list"} | {"op": "call", "name", "arguments"} | {"op": "await_change"}]
// }
// A stdio server gets the SDK's default environment (what MCP clients pass:
// HOME, LOGNAME, PATH, SHELL, TERM, USER) plus the plan's "env".
// With "oauth", the HTTP transport carries an OAuth provider that records
// whether the SDK tried to send the user to an authorization page; a failed
// connect also lists the HTTP requests the SDK made ("requests").
// Every line: {"op", "ok": true, "value"} or {"op", "ok": false, "error": {"name", "code", "message"}};
// "await_change" first prints {"op": "await_change", "ready": true}, then waits
// for notifications/tools/list_changed.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const STEP_TIMEOUT_MS = 60_000;
const plan = JSON.parse(process.argv[2]);

function emit(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function describeError(error) {
  return { name: error?.constructor?.name ?? typeof error, code: error?.code ?? null, message: String(error?.message ?? error) };
}

class RecordingOAuthProvider {
  // What an interactive client (the Inspector) hands the SDK; nothing here holds a credential.
  constructor() {
    this.events = [];
  }
  get redirectUrl() {
    return "http://127.0.0.1:1/callback";
  }
  get clientMetadata() {
    return { client_name: "glovebox-test", redirect_uris: [this.redirectUrl] };
  }
  clientInformation() {
    return undefined;
  }
  saveClientInformation() {
    this.events.push("saveClientInformation");
  }
  tokens() {
    return undefined;
  }
  saveTokens() {
    this.events.push("saveTokens");
  }
  redirectToAuthorization(url) {
    this.events.push(`redirectToAuthorization ${url}`);
  }
  saveCodeVerifier() {
    this.events.push("saveCodeVerifier");
  }
  codeVerifier() {
    return "";
  }
}

// Every HTTP request the SDK makes (the MCP endpoint, OAuth discovery, registration): method, path, status.
const requests = [];
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  requests.push({ method: init?.method ?? "GET", path: new URL(url).pathname, status: response.status });
  return response;
}

function transportFor(spec, provider) {
  if (spec.type === "stdio") {
    return new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: { ...getDefaultEnvironment(), ...(spec.env ?? {}) },
      stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(spec.url), {
    requestInit: { headers: spec.headers ?? {} },
    authProvider: provider,
    fetch: recordingFetch,
  });
}

let changed = null;
function nextChange() {
  return new Promise((resolve) => {
    changed = resolve;
  });
}

async function run(client, step) {
  if (step.op === "list") {
    return (await client.listTools()).tools;
  }
  if (step.op === "call") {
    return await client.callTool({ name: step.name, arguments: step.arguments });
  }
  if (step.op === "await_change") {
    const change = nextChange();
    emit({ op: "await_change", ready: true });
    await change;
    return true;
  }
  throw new Error(`unknown step ${step.op}`);
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main() {
  const provider = plan.transport.oauth ? new RecordingOAuthProvider() : undefined;
  const client = new Client({ name: "glovebox-ts-test", version: "0.0.0" });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed?.());
  try {
    await withTimeout(client.connect(transportFor(plan.transport, provider)), "connect");
    emit({ op: "connect", ok: true, value: { server: client.getServerVersion(), oauth: provider?.events ?? null } });
  } catch (error) {
    emit({ op: "connect", ok: false, error: describeError(error), oauth: provider?.events ?? null, requests });
    return 0;
  }
  for (const step of plan.steps) {
    try {
      emit({ op: step.op, ok: true, value: await withTimeout(run(client, step), step.op) });
    } catch (error) {
      emit({ op: step.op, ok: false, error: describeError(error) });
    }
  }
  await client.close();
  return 0;
}

process.exitCode = await main();

// A streamable-HTTP front for a stdio MCP server, so that the conformance suite (which takes only
// --url) can test `glovebox mcp` over stdio: `node stdio_bridge.mjs PORT COMMAND ARGS...`.
//
// Each HTTP session spawns COMMAND ARGS (with the official SDK's StdioClientTransport) and relays
// every message both ways, unchanged. A message from the server that answers a request, or a
// notification about one (progress by its token; anything else while exactly one request is in
// flight), rides that request's SSE stream; the rest goes to the session's standalone stream.
// Requests whose Host is not this loopback address are refused (403), as glovebox's own HTTP
// transport refuses them (DNS rebinding).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [port, command, ...args] = process.argv.slice(2);
const allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
const sessions = new Map();

function related(message, inflight) {
  if ('id' in message && !('method' in message)) {
    inflight.delete(message.id);
    return message.id;
  }
  if (message.method === 'notifications/progress') {
    for (const [id, token] of inflight) if (token === message.params?.progressToken) return id;
    return undefined;
  }
  if (!('id' in message) && inflight.size === 1) return [...inflight.keys()][0];
  return undefined;
}

async function openSession() {
  const upstream = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
  const inflight = new Map(); // request id -> its progress token
  const front = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, front),
  });
  front.onmessage = (message) => {
    if ('id' in message && 'method' in message) inflight.set(message.id, message.params?._meta?.progressToken);
    upstream.send(message).catch(() => front.close());
  };
  upstream.onmessage = (message) => {
    const id = related(message, inflight);
    front.send(message, id === undefined ? undefined : { relatedRequestId: id }).catch(() => {});
  };
  front.onclose = () => {
    if (front.sessionId) sessions.delete(front.sessionId);
    upstream.close();
  };
  upstream.onclose = () => front.close();
  await upstream.start();
  return front;
}

const server = http.createServer(async (req, res) => {
  if (!allowedHosts.has(req.headers.host ?? '')) {
    res.writeHead(403, { 'Content-Type': 'application/json' }).end('{"error": "host not allowed"}');
    return;
  }
  const id = req.headers['mcp-session-id'];
  let front = id ? sessions.get(id) : undefined;
  if (front === undefined) {
    if (id !== undefined || req.method !== 'POST') {
      res.writeHead(id === undefined ? 400 : 404).end();
      return;
    }
    front = await openSession();
  }
  await front.handleRequest(req, res);
});
server.listen(Number(port), '127.0.0.1', () => console.log(`listening on ${port}`));

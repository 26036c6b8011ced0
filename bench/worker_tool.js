'use strict';
// Node.js baseline tool: the same text statistics as guest/examples/text-stats/tool.c.
// Runs inside a worker_threads Worker; each message is one JSON input string and the
// reply is the JSON output string. The worker stays alive while it has a listener, so
// node_driver.js can hold many live workers to measure their memory.

const { parentPort } = require('node:worker_threads');

const WORD = /[^ \n\t\r]+/g;

function textStats(text) {
  let lines = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines++;
  if (text.length > 0 && !text.endsWith('\n')) lines++;
  let characters = 0;
  for (const _ of text) characters++; // code points, not UTF-16 units
  const words = (text.match(WORD) || []).length;
  return { characters, words, lines, bytes: Buffer.byteLength(text, 'utf8') };
}

function handle(raw) {
  let payload;
  try {
    payload = JSON.parse(raw);
  } catch (err) {
    return { error: `invalid JSON: ${err.message}` };
  }
  if (payload === null || typeof payload !== 'object' || typeof payload.text !== 'string') {
    return { error: 'input must be an object with a string field "text"' };
  }
  return textStats(payload.text);
}

parentPort.on('message', (raw) => parentPort.postMessage(JSON.stringify(handle(raw))));

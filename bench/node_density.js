'use strict';
// Node.js baseline for bench_density.py: a fresh worker_threads Worker per request,
// each doing one fetch() of URL, all started at once.
// Usage: node node_density.js URL CALLS; prints {"wall_s", "errors"} on stdout.

const { Worker } = require('node:worker_threads');

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
fetch(workerData)
  .then((r) => r.json())
  .then((j) => parentPort.postMessage(j.current_weather.temperature === 21.5))
  .catch(() => parentPort.postMessage(false));
`;

function one(url) {
  return new Promise((resolve) => {
    const worker = new Worker(WORKER, { eval: true, workerData: url });
    worker.once('message', (ok) => {
      worker.terminate();
      resolve(ok);
    });
    worker.once('error', () => resolve(false));
  });
}

async function main() {
  const [url, calls] = [process.argv[2], Number(process.argv[3])];
  const started = process.hrtime.bigint();
  const results = await Promise.all(Array.from({ length: calls }, () => one(url)));
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(JSON.stringify({ wall_s: wall, errors: results.filter((ok) => !ok).length }));
}

main();

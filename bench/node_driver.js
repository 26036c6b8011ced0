'use strict';
// Node.js baseline driver: a fresh worker_threads Worker per call running worker_tool.js.
// Usage: node --expose-gc node_driver.js [--calls N] [--warmup W] [--seconds S] [--live K]
// Reads the JSON input from stdin; prints one JSON object with the figures on stdout.

const path = require('node:path');
const { Worker } = require('node:worker_threads');

const TOOL = path.join(__dirname, 'worker_tool.js');

function parseArgs(argv) {
  const opts = { calls: 200, warmup: 20, seconds: 3, live: 100 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in opts)) throw new Error(`unknown option ${argv[i]}`);
    opts[key] = Number(argv[i + 1]);
  }
  return opts;
}

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

// Start a worker, send one input, resolve with [worker, output] once it answers.
function callOnce(input) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(TOOL);
    worker.once('error', reject);
    worker.once('message', (out) => resolve([worker, out]));
    worker.postMessage(input);
  });
}

// One call as the caller sees it: fresh worker, answer, worker torn down.
async function freshCall(input) {
  const [worker, out] = await callOnce(input);
  await worker.terminate();
  return out;
}

function percentile(sorted, p) {
  const idx = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, idx)];
}

async function measureLatency(input, calls, warmup) {
  for (let i = 0; i < warmup; i++) await freshCall(input);
  const samples = [];
  let output = null;
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    const [worker, out] = await callOnce(input);
    samples.push(Number(process.hrtime.bigint() - t0) / 1000);
    output = out;
    await worker.terminate();
  }
  samples.sort((a, b) => a - b);
  return { p50_us: percentile(samples, 50), p99_us: percentile(samples, 99), output };
}

// Calls per second with `lanes` concurrent call loops (each a chain of fresh workers).
async function measureThroughput(input, lanes, seconds) {
  const deadline = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  const t0 = process.hrtime.bigint();
  let done = 0;
  async function lane() {
    while (process.hrtime.bigint() < deadline) {
      await freshCall(input);
      done++;
    }
  }
  await Promise.all(Array.from({ length: lanes }, lane));
  return done / (Number(process.hrtime.bigint() - t0) / 1e9);
}

function settledRss() {
  if (global.gc) global.gc();
  return process.memoryUsage().rss;
}

// Resident bytes per live worker: K workers alive, each after one completed call.
async function measureLiveRss(input, live) {
  const before = settledRss();
  const workers = [];
  for (let i = 0; i < live; i++) workers.push((await callOnce(input))[0]);
  const after = settledRss();
  await Promise.all(workers.map((w) => w.terminate()));
  return (after - before) / live;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const input = await readStdin();
  const lat = await measureLatency(input, opts.calls, opts.warmup);
  const cps1 = await measureThroughput(input, 1, opts.seconds);
  const cps2 = await measureThroughput(input, 2, opts.seconds);
  const rssPerLive = await measureLiveRss(input, opts.live);
  const result = {
    node_version: process.version,
    calls: opts.calls,
    p50_us: lat.p50_us,
    p99_us: lat.p99_us,
    calls_per_s_1: cps1,
    calls_per_s_2: cps2,
    live: opts.live,
    rss_per_live_bytes: rssPerLive,
    output: JSON.parse(lat.output),
  };
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});

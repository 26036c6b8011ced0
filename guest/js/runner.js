// The code runner of `Runtime.run`: one pre-initialised QuickJS-NG component
// that runs a program given as its input.
//
// A program is a module whose default export takes the run's input and the
// `tools` object:
//
//     export default async function (input, tools) {
//       const stats = await tools.call("text-stats", { text: input.text });
//       return { words: stats.words };
//     }
//
// The host transpiles the program (esbuild, TypeScript too) into a script that
// sets `__gb_program` to the module's exports and hands it over with the
// input and the names of the tools the run's principal may see. Every host
// call (a tool call, a search, the clock, the random seed) goes through one
// channel, the run's own host import (`host-call` of glovebox:tool/run, see
// runner.wit; the engine parses its JSON answer), which the host answers from
// the run's journal on a replay or live (and journals) otherwise; a resume
// replays the recorded steps in chunks the host hands over (see `replay`). A tool call
// is answered with its output, or its error and who answered (a ToolCallError).
// When the host answers `stop` (the run pauses for an approval, diverged from
// its journal, or reached a bound), the call never settles: the program does
// not go on, and the host decides how the run ended.
//
// Built by glovebox.toolchains._jsrunner with `gb_init_runner`, which keeps
// eval: the runner compiles the program it is given (the program is no more
// trusted than any code inside the sandbox; it reaches only the host calls below).

import "glovebox"; // console.* goes to the run's log

const native = globalThis.__glovebox_native;
const compile = globalThis.eval;
const HostDate = globalThis.Date;
const NEVER = new Promise(() => {});
const stopped = { now: false };

/** A nested tool call failed: `code`, `message`, `retryable`, `details` and `callId` of its envelope. */
class ToolCallError extends Error {
  constructor(error, meta) {
    super(`${error.code}: ${error.message}`);
    this.name = "ToolCallError";
    this.code = error.code;
    this.retryable = Boolean(error.retryable);
    this.details = error.details ?? {};
    this.callId = meta?.call_id;
    this.envelope = { error, meta };
  }
}
globalThis.ToolCallError = ToolCallError;

class RunStopped extends Error {
  constructor() {
    super("the run has stopped");
    this.name = "RunStopped";
  }
}

const hostCall = native.host;
const stringify = JSON.stringify; // captured: a program that replaces JSON.stringify changes nothing here
// JSON.stringify's text, made in C for plain data (engine.c): every host call's request is encoded.
const encode = native.encode;

// A resume replays the recorded steps without a host call each: the engine
// holds the chunks of the journal the host hands over and answers a host call
// asking for exactly the next recorded request itself (`native.replay`, see
// engine.c); the first that differs, or the journal's end, ends the replay, and
// from there on every host call goes to the host, which compares it with the
// journal itself (and answers run_diverged, or replays a request sent in other
// words, or makes it live).
const replayed = native.replay;
const endReplay = native.replayEnd;
const replay = { on: false };

function host(kind, payload) {
  if (stopped.now) return { stop: true };
  const text = encode(payload ?? null);
  let reply = replay.on ? replayed(kind, text) : undefined;
  if (reply === undefined) {
    replay.on = false;
    reply = hostCall(kind, text);
  }
  if (reply.stop) stopped.now = true;
  return reply;
}

function now() {
  const reply = host("now");
  if (reply.stop) throw new RunStopped();
  return reply.now;
}

class RunDate extends HostDate {
  constructor(...args) {
    if (args.length === 0) super(now());
    else super(...args);
  }
  static now() {
    return now();
  }
}
globalThis.Date = RunDate;

// Math.random: a xorshift128+ generator seeded once per run by the host (journaled).
const seed = { state: null };
Math.random = function random() {
  if (seed.state === null) {
    const reply = host("random");
    if (reply.stop) throw new RunStopped();
    seed.state = [BigInt.asUintN(64, BigInt(reply.seed[0])), BigInt.asUintN(64, BigInt(reply.seed[1]))];
  }
  let [s1, s0] = seed.state;
  s1 ^= BigInt.asUintN(64, s1 << 23n);
  s1 ^= s1 >> 17n;
  s1 ^= s0 ^ (s0 >> 26n);
  seed.state = [s0, s1];
  return Number(BigInt.asUintN(64, s0 + s1) >> 11n) / 9007199254740992;
};

function wrapperName(tool) {
  return tool.replace(/[^A-Za-z0-9_$]/g, "_");
}

function makeTools(names) {
  const tools = {
    /** Call tool `name` (or name@version) with `input`: its output, or a thrown ToolCallError. */
    call(name, input) {
      const reply = host("call", { tool: String(name), input: input === undefined ? null : input });
      if (reply.stop) return NEVER;
      if (reply.ok) return Promise.resolve(reply.output);
      return Promise.reject(new ToolCallError(reply.error, reply.meta));
    },
    /** The visible tools whose name or description matches `query`: [{name, version, description}]. */
    search(query) {
      const reply = host("search", { query: String(query ?? "") });
      if (reply.stop) return NEVER;
      return Promise.resolve(reply.tools);
    },
    ToolCallError,
  };
  for (const name of names) {
    const key = wrapperName(name);
    if (!(key in tools)) tools[key] = (input) => tools.call(name, input);
  }
  return Object.freeze(tools);
}

function isJson(value) {
  try {
    return stringify(value) !== undefined; // the captured one: a program cannot answer for it
  } catch {
    return false; // a BigInt, a cycle
  }
}

export default async function run(request) {
  replay.on = request.replay === true; // the journal holds steps to replay
  const exports = compile(`${request.script}\n;__gb_program`);
  const main = exports?.default;
  if (typeof main !== "function") {
    throw new Error(
      "the program has no default export that is a function: write `export default async function (input, tools) { ... }`",
    );
  }
  try {
    const output = await main(request.input, makeTools(request.tools));
    // A value JSON cannot hold (a function, a symbol) goes back as it is: the host answers invalid_output.
    if (output !== undefined && !isJson(output)) return output;
    return { output: output === undefined ? null : output };
  } catch (error) {
    if (stopped.now) return NEVER;
    if (error instanceof ToolCallError) return { error: error.envelope.error, meta: error.envelope.meta };
    throw error;
  } finally {
    if (!stopped.now && replay.on) endReplay(); // the steps the program replayed before it ended count
  }
}

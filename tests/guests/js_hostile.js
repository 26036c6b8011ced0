// A JavaScript tool that misbehaves on request: {"what": "..."} picks how.
import { http, log, ToolError } from "glovebox";

function deep(n) {
  return deep(n + 1) + 1;
}

const behaviours = {
  loop: () => {
    for (;;) {}
  },
  bomb: () => {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(4 << 20));
  },
  object_bomb: () => {
    const hoard = [];
    for (;;) hoard.push({ n: hoard.length, text: `item ${hoard.length}` });
  },
  recursion: () => deep(0),
  throw_string: () => {
    throw "the disk is full";
  },
  throw_object: () => {
    throw { code: 7, why: "no" };
  },
  throw_number: () => {
    throw 42;
  },
  throw_error: () => {
    throw new TypeError("bad type");
  },
  tool_error: () => {
    throw new ToolError("city is empty");
  },
  reject: async () => {
    await null;
    throw new RangeError("later");
  },
  never: () => new Promise(() => {}),
  undefined: () => undefined,
  function: () => () => 1,
  bigint: () => ({ n: 10n }),
  cycle: () => {
    const a = {};
    a.self = a;
    return a;
  },
  eval: (input) => eval(input.code),
  function_constructor: (input) => new Function(input.code)(),
  globals: () =>
    ["std", "os", "require", "process", "Deno", "Bun", "fetch", "XMLHttpRequest", "WebAssembly", "__glovebox_native"]
      .filter((name) => typeof globalThis[name] !== "undefined"),
  http_denied: async () => (await http.get("https://example.com/")).status,
  clock: () => ({ now: Date.now(), random: Math.random() }),
  flood: () => {
    for (let n = 0; n < 20000; n++) console.log(`line ${n}`);
    return "flooded";
  },
  huge: () => "x".repeat(3 << 19),
  log: () => {
    log("warn", "careful", { n: 1 });
    console.log("from console");
    return "logged";
  },
};

export default async function (input) {
  const run = behaviours[input.what];
  if (run === undefined) throw new ToolError(`unknown behaviour ${input.what}`);
  return run(input);
}

"""Capabilities register as plug-ins: the built-ins from DEFAULT_CAPABILITIES, a third party's by entry point.

The third-party test installs a distribution the way pip would (a ``.dist-info``
with an ``entry_points.txt`` on the path) and runs a fresh process: its capability's
grant field is in the policy schema, a component importing its interface registers,
and its host function answers what the call was granted, through the same linker,
binding and trampoline as the built-ins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from glovebox.capabilities import Capability, registered
from glovebox.model._capability import DEFAULT_CAPABILITIES, _load

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


def test_the_built_ins_register_like_entry_points() -> None:
    names = [capability.name for capability in registered()]
    assert names[:5] == ["http", "sql", "kv", "files", "client"]
    built_ins = [value.split(":")[0].rsplit(".", 1)[1] for value in DEFAULT_CAPABILITIES]
    assert built_ins == ["http", "sql", "kv", "files", "client"]
    assert {capability.interface for capability in registered()} >= {
        "glovebox:tool/host@0.1.0",
        "glovebox:tool/sql@0.1.0",
        "glovebox:tool/kv@0.1.0",
        "glovebox:tool/client@0.1.0",
    }


def test_an_entry_point_must_name_a_capability_and_names_are_unique() -> None:
    with pytest.raises(TypeError, match="is not a named glovebox Capability"):
        _load(["glovebox.model._capability:DEFAULT_CAPABILITIES"])
    with pytest.raises(ValueError, match="two capabilities are named 'kv'"):
        _load(["glovebox.capabilities.kv:CAPABILITY", "glovebox.capabilities.kv:CAPABILITY"])
    assert isinstance(_load(["glovebox.capabilities.kv"])[0], Capability)  # the attribute defaults to CAPABILITY


PLUGIN = """
from glovebox.capabilities import Capability, HostFunction
from glovebox.core._frozen import Frozen
from glovebox.sandbox._hostabi import WrongShape, lower_text


class Greeting(Frozen):
    greeting: str


def _no_args(args, count):
    if count:
        raise WrongShape("greet takes nothing")
    return ()


def _answer(state):
    bound = None if state is None else state.capability("greet")
    return '"denied"' if bound is None else bound


class Greet(Capability):
    name = "greet"
    interface = "example:plug/greet@0.1.0"
    wit = "greet: func() -> string;"

    def manifest_fields(self):
        return {"greet": (bool, False)}

    def grant_fields(self):
        return {"greet": (list[Greeting], [])}

    def functions(self):
        return (HostFunction("greet", _no_args, _answer, lower_text, '"host error"'),)

    def bind(self, declared, grants, context):
        if not declared.greet or not grants.greet:
            return None
        return '"' + grants.greet[0].greeting + " " + context.principal + '"'


CAPABILITY = Greet()
"""

#: A component importing the plug-in's interface; ``call`` answers what ``greet`` returned.
COMPONENT = """
(component
  (import "example:plug/greet@0.1.0" (instance $g (export "greet" (func (result string)))))
  (core module $Mem
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 4096))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (global.get $next))
      (global.set $next (i32.add (global.get $next) (local.get 3)))
      (local.get $p)))
  (core instance $mem (instantiate $Mem))
  (alias export $g "greet" (func $greet))
  (core func $lowered (canon lower (func $greet)
    (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
  (core instance $host (export "greet" (func $lowered)))
  (core module $M
    (import "mem" "memory" (memory 1))
    (import "host" "greet" (func $greet (param i32)))
    (func (export "call") (param i32 i32) (result i32)
      (call $greet (i32.const 512))
      (i32.store8 (i32.const 1024) (i32.const 0))
      (i32.store (i32.const 1028) (i32.load (i32.const 512)))
      (i32.store (i32.const 1032) (i32.load (i32.const 516)))
      (i32.const 1024)))
  (core instance $i (instantiate $M (with "mem" (instance $mem)) (with "host" (instance $host))))
  (func (export "call") (param "input" string) (result (result string (error string)))
    (canon lift (core func $i "call") (memory (core memory $mem "memory")) (realloc (core func $mem "realloc"))))
)
"""

SCRIPT = """
import json, sys
import wasmtime
import glovebox
from glovebox.policy._loader import policy_schema

wasm = sys.argv[1] + "/greet.wasm"
open(wasm, "wb").write(wasmtime.wat2wasm(sys.argv[2]))  # a component's text assembles the same way
policy = glovebox.Policy.model_validate(
    {"version": 1, "defaults": {"action": "allow"}, "grants": [{"tool": "hi", "greet": [{"greeting": "hello"}]}]}
)
with glovebox.Runtime(home=sys.argv[1] + "/home", policy=policy) as rt:
    rt.register(wasm, manifest={"name": "hi", "capabilities": {"greet": True}})
    rt.register(wasm, manifest={"name": "undeclared"})
    granted = rt.call("hi", {}, principal="ada").output
    undeclared = rt.call("undeclared", {}).output
print(json.dumps({
    "schema": "greet" in policy_schema()["$defs"]["GrantRule"]["properties"],
    "granted": granted,
    "undeclared": undeclared,
}))
"""


def test_a_third_party_capability_registers_by_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "greet_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "greet_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greet-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[glovebox.capabilities]\ngreet = greet_plugin:CAPABILITY\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(RUNTIME)])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), COMPONENT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"schema": True, "granted": "hello ada", "undeclared": "denied"}

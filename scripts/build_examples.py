#!/usr/bin/env python3
"""Build every example kernel of huggingface/kernels (``examples/kernels/``) with
`kernel-wheels build`, convert each build folder, `check` the wheels and load the build
with `kernels.get_local_kernel`: the conformance table of docs/builder.md.

    PYTHONPATH=src .venv/bin/python scripts/build_examples.py EXAMPLES_DIR --out /tmp/examples-out \\
        --cuda-python .venv-cuda/bin/python --arch 9.0

Per example: a first build with this Python (its torch; cpu, noarch and tvm-ffi
backends, tvm-ffi's cuda too: it needs no torch), then, for a torch kernel with CUDA
components, `--backend cuda` with the CUDA Python (torch built for CUDA, nvcc). Each
output folder goes through `to-wheel OUT 1.0.0` and `check`, and is loaded with
`kernels.get_local_kernel` in the Python it was built for, else the CUDA Python (a CUDA
extension loads without a GPU; tvm-ffi builds load where apache-tvm-ffi is importable;
``--load-path`` adds both packages to the CUDA Python's path). Prints a
markdown table and writes OUT/examples.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

LOAD = """
import sys
from pathlib import Path
from kernels import get_local_kernel
kernel = get_local_kernel(Path(sys.argv[1]))
print(Path(kernel.__file__).parent.name)
"""


def kw(python: str, *args: str | Path, env: dict[str, str] | None = None,
       timeout: float = 1800) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run([python, "-m", "kernel_wheels", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return proc, time.monotonic() - started


def last_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    return (lines[-1].split("error: ", 1)[-1] if lines else proc.stderr.strip()[-300:])[:400]


def summary_line(proc: subprocess.CompletedProcess[str]) -> str:
    return next((line for line in reversed(proc.stderr.splitlines())
                 if " built, " in line and " failed" in line), "")


def load(out: Path, pythons: list[str], path: str) -> str:
    """get_local_kernel(out) in the first of ``pythons`` whose torch has a variant for it
    (a noarch kernel of cuda alone loads in the CUDA Python)."""
    why = ""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))}
    for python in pythons:
        loaded = subprocess.run([python, "-c", LOAD, str(out)], capture_output=True, text=True,
                                timeout=600, env=env)
        if loaded.returncode == 0:
            return f"loaded {loaded.stdout.strip()}" + (" (CUDA Python)" if python != sys.executable else "")
        why = (loaded.stderr.strip().splitlines() or ["?"])[-1][:300]
    return f"load failed: {why}"


def convert_check_load(out: Path, pythons: list[str], path: str) -> dict[str, Any]:
    """to-wheel, check and get_local_kernel of one build output folder."""
    if not (out / "build").is_dir() or not any((out / "build").iterdir()):
        return {}
    result: dict[str, Any] = {"variants": sorted(p.name for p in (out / "build").iterdir())}
    wheels = out.parent / f"{out.name}-wheels"
    converted, _ = kw(sys.executable, "to-wheel", out, "1.0.0", "-o", wheels, "--force")
    result["wheels"] = sorted(p.name for p in wheels.glob("*.whl"))
    result["to_wheel"] = "ok" if converted.returncode == 0 else last_error(converted)
    if result["wheels"]:
        checked, _ = kw(sys.executable, "check", *wheels.glob("*.whl"))
        result["check"] = "pass" if checked.returncode == 0 else checked.stdout.strip()[-400:]
    result["load"] = load(out, pythons, path)
    return result


def example(source: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    config = tomllib.loads((source / "build.toml").read_text())
    framework = next((k for k in ("torch", "torch-noarch", "tvm-ffi") if k in config), "?")
    backends = config["general"]["backends"]
    record: dict[str, Any] = {"example": source.name, "framework": framework, "backends": backends}
    archs = [a for arch in args.arch for a in ("--arch", arch)]
    first, seconds = kw(sys.executable, "build", source, "-o", out / "here", *archs)
    record["build"] = {"exit": first.returncode, "seconds": round(seconds, 1),
                       "summary": summary_line(first),
                       "error": last_error(first) if first.returncode else ""}
    pythons = [sys.executable, *([args.cuda_python] if args.cuda_python else [])]
    record["build"].update(convert_check_load(out / "here", pythons, args.load_path))
    kernels = config.get("kernel", {})
    has_cuda = any(k.get("backend") == "cuda" for k in kernels.values())
    if framework == "torch" and "cuda" in backends and has_cuda and args.cuda_python:
        cuda, seconds = kw(args.cuda_python, "build", source, "-o", out / "cuda", "--backend", "cuda",
                           *archs)
        record["cuda"] = {"exit": cuda.returncode, "seconds": round(seconds, 1),
                          "summary": summary_line(cuda),
                          "error": last_error(cuda) if cuda.returncode else ""}
        record["cuda"].update(convert_check_load(out / "cuda", [args.cuda_python], args.load_path))
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", type=Path, help="huggingface/kernels' examples/kernels folder")
    parser.add_argument("--out", type=Path, default=Path("/tmp/kw-examples"))
    parser.add_argument("--cuda-python", help="a Python with torch built for CUDA (CUDA builds)")
    parser.add_argument("--arch", action="append", default=[], help="CUDA capability (repeatable)")
    parser.add_argument("--only", action="append", default=[], help="build only this example")
    parser.add_argument("--load-path", default="",
                        help="PYTHONPATH entries for loading (the kernels and tvm_ffi packages, "
                             "where the CUDA Python lacks them)")
    args = parser.parse_args()
    records = []
    for source in sorted(p for p in args.examples.iterdir() if (p / "build.toml").is_file()):
        if args.only and source.name not in args.only:
            continue
        print(f"== {source.name}", file=sys.stderr, flush=True)
        records.append(example(source, args.out / source.name, args))
        print(json.dumps(records[-1]), file=sys.stderr, flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "examples.json").write_text(json.dumps(records, indent=2) + "\n")
    for record in records:
        print(f"| {record['example']} | {record['framework']} | {', '.join(record['backends'])} | "
              + " / ".join(f"{key}: exit {r['exit']}, {r['summary'] or r['error']}, "
                           f"{len(r.get('wheels', []))} wheels, check {r.get('check', '-')}, "
                           f"{r.get('load', '-')} ({r['seconds']} s)"
                           for key, r in ((k, record[k]) for k in ("build", "cuda") if k in record))
              + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

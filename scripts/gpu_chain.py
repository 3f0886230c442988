#!/usr/bin/env python3
"""The whole private-index chain on a GPU machine, the way a user runs it:

    build (CPU + CUDA, this machine's torch and nvcc) -> a local Hub kernel repository
    -> kernel-wheels to-wheel -> kernel-wheels check -> kernel-wheels index (a static
    site) served by a plain HTTP server on 127.0.0.1 -> two fresh venvs that reuse the
    machine's torch: `kernel-wheels install img2gray` into one, `pip install img2gray
    --index-url <site>/<target>/simple` into the other -> import img2gray there -> run it
    on the GPU (odd sizes, 1x1, unaligned views, 8191x8193, every RGB triple) with
    poisoned outputs against the CPU reference -> torch untouched.

It prints a short table last and writes OUT/gpu_chain.json. Exit 0 only if every step
worked and every byte matched.

    PYTHONPATH=src python3 scripts/gpu_chain.py --out /tmp/chain

On a machine without a GPU, `--device cpu --torch-wheel TORCH.whl` runs the same chain
on the CPU variant (fresh venvs get torch from that wheel): a rehearsal of the GPU run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"

# Run inside the venv: import the installed kernel and check it with gpu_check's cases.
EXACTNESS = """
import json, sys
sys.path.insert(0, {scripts!r})
import img2gray, torch
from gpu_check import EXPECTED_ERRORS, check_errors, check_exactness
rows = check_exactness(img2gray, device={device!r}, every_triple={device!r} == "cuda")
errors = check_errors(img2gray, device={device!r})
if {device!r} == "cpu":
    del errors["mixed_devices"]  # a CPU-only rehearsal has one device
ok = all(EXPECTED_ERRORS[key] in errors[key] for key in errors)
print(json.dumps({{"file": img2gray.__file__, "rows": rows, "errors": errors,
                   "errors_ok": ok, "torch": torch.__version__}}))
"""


def run(cmd: list[str], env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, text=True, capture_output=True, env={**os.environ, **(env or {})},
                          **kwargs)
    if proc.stderr.strip():
        print(proc.stderr.rstrip()[-3000:], file=sys.stderr, flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-2000:]}")
    return proc


def kw(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "kernel_wheels", *map(str, args)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torch_fingerprint() -> dict[str, str]:
    """The installed torch: its version and a hash of its RECORD (every file it owns)."""
    import importlib.metadata as md

    dist = md.distribution("torch")
    record = dist.read_text("RECORD") or ""
    return {"version": dist.version, "record_sha256": hashlib.sha256(record.encode()).hexdigest()}


def fresh_venv(path: Path, torch_wheel: Path | None) -> Path:
    """A new venv that sees this machine's torch and nothing of ours; with
    ``torch_wheel`` (a rehearsal without a GPU), torch installed from it instead.

    The machine's python3 may itself live in a venv, whose packages
    ``--system-site-packages`` would not reach, and its base Python may lack ensurepip:
    so the venv is made without pip, a .pth file puts the machine's torch on its path,
    and pip comes from the wheel carried in .whl/ (installed by the machine's pip)."""
    python = path / "bin" / "python"
    if torch_wheel is not None:
        run([sys.executable, "-m", "venv", str(path)])
        run([str(python), "-m", "pip", "install", "-q", str(torch_wheel)])
        return python
    import torch

    run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    env={"PYTHONPATH": ""}).stdout.strip())
    (site / "machine_torch.pth").write_text(f"{Path(torch.__file__).resolve().parent.parent}\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
         "--find-links", str(ROOT / ".whl"), "pip"], env={"PYTHONPATH": ""})
    return python


def exactness(python: Path, workdir: Path, device: str) -> dict[str, Any]:
    env = {"PYTHONPATH": ""}  # only what the venv installed (and the machine's torch)
    code = EXACTNESS.format(scripts=str(SCRIPTS), device=device)
    proc = run([str(python), "-c", code], env=env, cwd=workdir)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu-chain"))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a rehearsal)")
    parser.add_argument("--torch-wheel", type=Path,
                        help="install torch from this wheel into the fresh venvs (rehearsal)")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    steps: list[tuple[str, float, str]] = []
    summary: dict[str, Any] = {"steps": steps}

    def step(name: str, started: float, detail: str) -> None:
        steps.append((name, time.monotonic() - started, detail))
        print(f"== {name}: {detail} ({steps[-1][1]:.1f} s)", file=sys.stderr, flush=True)

    torch_before = torch_fingerprint()
    started = time.monotonic()
    build = out / "build-output"
    # The machine's own toolchain (gcc 13.3 and glibc 2.39 on the H200): kernel-wheels
    # build keeps the binaries within manylinux_2_28, the Hub kernels' promise.
    built = run(kw("build", ROOT / "sample-kernel", "-o", build))
    variants = sorted(p.name for p in (build / "build").iterdir())
    step("build", started, ", ".join(variants))
    summary["policy_fixes"] = [line.strip() for line in built.stderr.splitlines()
                               if any(w in line for w in ("statically", "bound to", "defined inside"))]
    sys.path.insert(0, str(SCRIPTS))
    from gpu_check import symbol_versions

    summary["symbol_versions"] = symbol_versions(build / "build")

    started = time.monotonic()
    repo = out / "img2gray"
    run([sys.executable, str(SCRIPTS / "make_kernel_repo.py"), str(build), str(repo),
         "--card", str(ROOT / "sample-kernel" / "README.md")])
    wheels = out / "wheels"
    run(kw("to-wheel", repo, "1.1.2", "-o", wheels))
    names = sorted(p.name for p in wheels.glob("*.whl"))
    tags = sorted({name.rsplit("-", 1)[-1].removesuffix(".whl") for name in names})
    step("to-wheel", started, f"{len(names)} wheels, tagged {', '.join(tags)}")
    summary["wheels"] = names
    summary["platform_tags"] = tags

    started = time.monotonic()
    run(kw("check", wheels))
    step("check", started, "all passed")

    started = time.monotonic()
    site = out / "site"
    run(kw("index", wheels, "-o", site))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port),
                               "-d", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        index = f"http://127.0.0.1:{port}"
        targets = sorted(p.parent.name for p in site.glob("*/simple") if p.parent.name != "site")
        step("index", started, f"served at {index}; targets {', '.join(targets)}")

        started = time.monotonic()
        venv_a = fresh_venv(out / "venv-install", args.torch_wheel)
        chosen = run(kw("install", "img2gray", "--index-url", f"{index}/simple", "--python", venv_a))
        installed = [line for line in chosen.stderr.splitlines() if line.startswith("installed ")]
        step("kernel-wheels install", started, installed[-1] if installed else "installed")
        result_a = exactness(venv_a, out, args.device)

        started = time.monotonic()
        from kernel_wheels.install.environment import running_target_key

        target = running_target_key()
        venv_b = fresh_venv(out / "venv-pip", args.torch_wheel)
        run([str(venv_b), "-m", "pip", "install", "-q", "img2gray", "--index-url",
             f"{index}/{target}/simple"])
        step("pip install", started, f"from the {target} index")
        result_b = exactness(venv_b, out, args.device)
    finally:
        server.terminate()
        server.wait(timeout=10)

    torch_after = torch_fingerprint()
    summary.update({"torch_before": torch_before, "torch_after": torch_after,
                    "kernel_wheels_install": result_a, "pip_install": result_b})
    within = all(not v["above_manylinux_2_28"] for v in summary["symbol_versions"].values())
    ok = (torch_before == torch_after and tags == [f"manylinux_2_28_{platform.machine()}"] and within
          and all(r["ok"] for r in result_a["rows"]) and all(r["ok"] for r in result_b["rows"])
          and result_a["errors_ok"] and result_b["errors_ok"])
    summary["ok"] = ok
    (out / "gpu_chain.json").write_text(json.dumps(summary, indent=2) + "\n")

    sys.path.insert(0, str(SCRIPTS))
    from gpu_check import format_table

    print(format_table(result_a["rows"]))
    print()
    print(f"{'step':24} {'seconds':>8}  result")
    for name, seconds, detail in steps:
        print(f"{name:24} {seconds:8.1f}  {detail}")
    pixels = sum(r.get("pixels", 0) for r in result_a["rows"])
    mismatches = sum(r[key] for r in result_a["rows"] + result_b["rows"]
                     for key in ("wrapper", "poison_00", "poison_ff", "odd_output"))
    print(f"{'exactness (both venvs)':24} {'':>8}  {len(result_a['rows']) + len(result_b['rows'])} "
          f"cases, {pixels} pixels per venv, {mismatches} mismatches")
    for name, versions in summary["symbol_versions"].items():
        print(f"{'symbol versions':24} {'':>8}  {name}: newest {', '.join(versions['newest'].values())}; "
              f"above manylinux_2_28: {', '.join(versions['above_manylinux_2_28']) or 'none'}")
    for line in summary["policy_fixes"]:
        print(f"{'manylinux fixes':24} {'':>8}  {line}")
    print(f"{'torch untouched':24} {'':>8}  {torch_before['version']} "
          f"{'same files' if torch_before == torch_after else 'CHANGED'}")
    print(f"chain: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

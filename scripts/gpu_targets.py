#!/usr/bin/env python3
"""Issue #32 on a GPU machine: install chooses for the GPU it runs on.

The sample kernel's CUDA variant is built three times with this machine's torch and
nvcc: for 8.0 only (an sm_80 cubin, no PTX), for 9.0 (sm_90 and compute_90 PTX, as
build.toml asks) and for 8.0+PTX (sm_80 and compute_80, build.toml's capability list
changed in a copy). Each is converted (to-wheel), checked (check -v lists its
architectures) and offered alone to `kernel-wheels install` (a folder of wheels) for a
fresh venv that reuses the machine's torch:

- the 8.0 build is refused on a 9.0 GPU, with one line naming the GPU and what it holds;
- the 9.0 build installs (its sm_90 cubin runs) and runs exactly (gpu_check's cases);
- the 8.0+PTX build installs with the JIT note and runs exactly: the driver compiles its
  compute_80 PTX for the GPU at the first call (timed here).

    PYTHONPATH=src python3 scripts/gpu_targets.py --out /tmp/gpu-targets

It writes OUT/gpu_targets.json and exits 0 only if all of that held.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_chain import exactness, fresh_venv, kw, run, torch_fingerprint  # noqa: E402

FIRST_CALL = """
import json, time, torch, img2gray
x = torch.randint(0, 256, (64, 64, 3), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
start = time.perf_counter(); img2gray.img2gray(x); torch.cuda.synchronize()
first = time.perf_counter() - start
start = time.perf_counter(); img2gray.img2gray(x); torch.cuda.synchronize()
print(json.dumps({"first_call_s": first, "second_call_s": time.perf_counter() - start}))
"""


def build(source: Path, out: Path, arch: str) -> None:
    run(kw("build", source, "-o", out, "--backend", "cuda", "--arch", arch))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu-targets"))
    args = parser.parse_args()
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    import torch

    gpu = {"name": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability())}
    summary: dict[str, Any] = {"gpu": gpu, "torch": torch.__version__, "builds": {}}
    torch_before = torch_fingerprint()

    ptx_source = out / "sample-kernel-80ptx"
    shutil.copytree(ROOT / "sample-kernel", ptx_source)
    toml = ptx_source / "build.toml"
    toml.write_text(toml.read_text().replace('cuda-capabilities = ["8.0", "9.0+PTX"]',
                                             'cuda-capabilities = ["8.0+PTX"]'))
    builds = {"8.0": (ROOT / "sample-kernel", "8.0"), "9.0": (ROOT / "sample-kernel", "9.0"),
              "8.0+PTX": (ptx_source, "8.0")}
    ok = True
    for name, (source, arch) in builds.items():
        record: dict[str, Any] = summary["builds"].setdefault(name, {})
        started = time.monotonic()
        folder = out / f"build-{name}"
        build(source, folder, arch)
        wheels = out / f"wheels-{name}"
        run(kw("to-wheel", folder, "1.1.2", "-o", wheels))
        checked = run(kw("check", "-v", wheels))
        record["check"] = [line.strip() for line in checked.stdout.splitlines() if "[gpu]" in line]
        record["wheel"] = next(wheels.glob("*.whl")).name
        record["build_and_convert_s"] = round(time.monotonic() - started, 1)
        venv = fresh_venv(out / f"venv-{name}", None)
        install = subprocess.run(kw("install", "img2gray", "--no-index", "-f", wheels, "--python", venv),
                                 capture_output=True, text=True)
        record["install_exit"] = install.returncode
        record["install_stdout"] = install.stdout.strip().splitlines()
        record["install_stderr_errors"] = [line for line in install.stderr.splitlines()
                                           if line.startswith("kernel-wheels: error")]
        print(f"== {name}: install exit {install.returncode}\n{install.stdout}{install.stderr[-1500:]}",
              file=sys.stderr, flush=True)
        if name == "8.0":
            expected = re.compile(r"kernel-wheels: error: no wheel of img2gray fits: no build runs on the "
                                  r"GPU, .*\(compute capability 9\.0\): img2gray-1\.1\.2\+\S+ holds sm_80$")
            record["ok"] = install.returncode == 1 and len(record["install_stderr_errors"]) == 1 \
                and bool(expected.match(record["install_stderr_errors"][0]))
        else:
            note = "only PTX compute_80" if name == "8.0+PTX" else "it holds sm_90, which runs on the GPU"
            timed = subprocess.run([str(venv), "-c", FIRST_CALL], capture_output=True, text=True, check=True,
                                   env={**os.environ, "PYTHONPATH": ""})
            first = json.loads(timed.stdout.strip().splitlines()[-1])
            result = exactness(venv, out, "cuda")
            record.update(first)
            record["cases"] = len(result["rows"])
            record["pixels"] = sum(r.get("pixels", 0) for r in result["rows"])
            record["mismatches"] = sum(r[key] for r in result["rows"]
                                       for key in ("wrapper", "poison_00", "poison_ff", "odd_output"))
            noted = any(note in line for line in record["install_stdout"])
            record["ok"] = install.returncode == 0 and noted and all(r["ok"] for r in result["rows"]) \
                and result["errors_ok"]
        ok = ok and record["ok"]
    summary["torch_unchanged"] = torch_fingerprint() == torch_before
    summary["ok"] = ok and summary["torch_unchanged"]
    (out / "gpu_targets.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"gpu targets: {'OK' if summary['ok'] else 'FAILED'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

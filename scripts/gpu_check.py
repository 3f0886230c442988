#!/usr/bin/env python3
"""Build the sample kernel's CUDA (and CPU) variant with this machine's torch and nvcc,
run it on a GPU, and compare with the float32 CPU reference. Prints a JSON summary
(also written to OUT/gpu_check.json). Needs torch with CUDA and a GPU; nothing else
outside the standard library and this repository.

    PYTHONPATH=src python3 scripts/gpu_check.py --out /tmp/gpu
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from kernel_wheels.builder import build_kernel  # noqa: E402


def load(variant: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, variant / "__init__.py", submodule_search_locations=[str(variant)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reference(image: torch.Tensor) -> torch.Tensor:
    f = image.float()
    return ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(torch.uint8)


def time_cuda(fn, repeats: int = 50) -> float:  # type: ignore[no-untyped-def]
    """Median milliseconds of ``fn`` over CUDA events, after a warm-up."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("gpu-check-out"))
    args = parser.parse_args()
    assert torch.cuda.is_available(), "no GPU visible to torch"
    summary: dict[str, object] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                                  "device": torch.cuda.get_device_name(0),
                                  "capability": ".".join(map(str, torch.cuda.get_device_capability(0)))}
    started = time.monotonic()
    built = build_kernel(ROOT / "sample-kernel", args.out / "build-output", log=print)
    summary["build_seconds"] = {b.variant: round(b.seconds, 1) for b in built}
    summary["build_total_seconds"] = round(time.monotonic() - started, 1)
    cuda_variant = next(b.path for b in built if b.backend == "cuda")
    cpu_variant = next(b.path for b in built if b.backend == "cpu")
    gpu_kernel = load(cuda_variant, "img2gray_cuda_variant")
    cpu_kernel = load(cpu_variant, "img2gray_cpu_variant")

    results = []
    generator = torch.Generator(device="cuda").manual_seed(0)
    for height, width in [(1, 1), (3, 5), (17, 31), (255, 257), (1081, 1921), (4320, 7680), (8191, 8193)]:
        image = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, device="cuda",
                              generator=generator)
        gray = gpu_kernel.img2gray(image)
        torch.cuda.synchronize()
        expected = reference(image.cpu())
        cpu_out = cpu_kernel.img2gray(image.cpu())
        mismatches = int((gray.cpu() != expected).sum())
        results.append({"shape": [height, width], "mismatches_vs_reference": mismatches,
                        "cpu_kernel_equal_reference": bool(torch.equal(cpu_out, expected)),
                        "mean_gray": round(float(gray.float().mean()), 2)})
    summary["results"] = results

    errors = {}
    image = torch.zeros(8, 8, 3, dtype=torch.uint8, device="cuda")
    try:
        gpu_kernel.ops.img2gray(image, torch.empty(8, 8, dtype=torch.uint8))  # CPU output
        errors["mixed_devices"] = "no error"
    except RuntimeError as exc:
        errors["mixed_devices"] = str(exc).splitlines()[0]
    try:
        gpu_kernel.img2gray(image.float())
        errors["float_input"] = "no error"
    except TypeError as exc:
        errors["float_input"] = str(exc)
    summary["errors"] = errors

    big = torch.randint(0, 256, (4320, 7680, 3), dtype=torch.uint8, device="cuda", generator=generator)
    out = torch.empty(4320, 7680, dtype=torch.uint8, device="cuda")
    kernel_ms = time_cuda(lambda: gpu_kernel.ops.img2gray(big, out))
    eager_ms = time_cuda(lambda: reference(big))
    copy_src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    copy_ms = time_cuda(lambda: copy_dst.copy_(copy_src), repeats=20)
    moved = big.numel() + out.numel()
    summary["timing_7680x4320"] = {
        "kernel_ms_median": round(kernel_ms, 4),
        "kernel_GBps": round(moved / kernel_ms / 1e6, 1),
        "torch_eager_reference_ms_median": round(eager_ms, 4),
        "eager_over_kernel": round(eager_ms / kernel_ms, 2),
        "copy_1GiB_GBps_read_plus_write": round(2 * (1 << 30) / copy_ms / 1e6, 1),
    }
    ok = all(r["mismatches_vs_reference"] == 0 and r["cpu_kernel_equal_reference"] for r in results) \
        and "same device" in errors["mixed_devices"]
    summary["ok"] = ok
    text = json.dumps(summary, indent=2)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""img2gray on a GPU: our CUDA kernel against the device-to-device copy rate, the blog's
naive kernel and PyTorch eager, with the L2 cache defeated; then the exactness table.

    PYTHONPATH=src python3 benchmarks/gpu_img2gray.py --results benchmarks/results

One run builds everything with this machine's torch and nvcc (`kernel-wheels build`):
the sample kernel (CUDA and CPU variants) and the naive kernel (the same extension with
the blog's kernel: 16x16 threads, one pixel each). Then, in this order:
- the copy rate: a 1 GiB `y.copy_(x)` timed with CUDA events, outside any graph;
- per image size: each contender launched many times in a CUDA graph, rotating through
  enough distinct input/output buffers (>= 1 GiB) that no launch finds its data in L2;
  time per launch = replay time / launches; median of the replays;
- the copy rate again (the table uses the median of both rounds);
- exactness: scripts/gpu_check.py's cases (sizes 1x1 .. 8191x8193, every RGB triple,
  storage offsets 1..16, poisoned and odd-address outputs) against the CPU reference.
Bytes moved per image: 3 per pixel in, 1 out. Prints both tables last; writes
gpu-<device>-<date>.json and .txt into --results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import faulthandler
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402

SIZES = [(1080, 1920), (2160, 3840), (4320, 7680), (8640, 15360)]  # (height, width)
ROTATE_BYTES = 1 << 30  # distinct buffers per size: 20x the H200's L2
TARGET_MS = 5.0  # per graph replay
REPLAYS = 9  # timed, after 2 warm-up replays

# The blog's kernel (the sample kernel before it was vectorised): a 2D grid of 16x16
# blocks, one thread per pixel, byte loads. Same arithmetic, so it is exact too.
NAIVE_CU = r"""
#include <cstdint>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "img2gray_common.h"

__global__ void img2gray_kernel(const uint8_t* __restrict__ input, uint8_t* __restrict__ output,
                                int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  const int64_t i = static_cast<int64_t>(y) * width + x;
  const float r = input[3 * i], g = input[3 * i + 1], b = input[3 * i + 2];
  const float gray = __fadd_rn(__fadd_rn(__fmul_rn(0.21f, r), __fmul_rn(0.72f, g)),
                               __fmul_rn(0.07f, b));
  output[i] = static_cast<uint8_t>(gray);
}

void img2gray_cuda(const at::Tensor& input, at::Tensor& output) {
  img2gray_check_args(input, output);
  const int height = static_cast<int>(input.size(0));
  const int width = static_cast<int>(input.size(1));
  if (height == 0 || width == 0) return;
  const c10::cuda::CUDAGuard device_guard(input.device());
  const dim3 block(16, 16);
  const dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
  img2gray_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      input.data_ptr<uint8_t>(), output.data_ptr<uint8_t>(), width, height);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def eager(image: torch.Tensor) -> torch.Tensor:
    """PyTorch eager on the GPU: the reference formula, one op at a time."""
    f = image.float()
    return ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(torch.uint8)


def build_all(out: Path) -> dict[str, Any]:
    """Our kernel (CPU and CUDA variants) and the naive one (CUDA), with this torch."""
    sample = gpu_check.build_sample(out / "build-output")
    naive_src = out / "naive-src"
    if naive_src.exists():
        shutil.rmtree(naive_src)
    shutil.copytree(ROOT / "sample-kernel", naive_src)
    (naive_src / "csrc" / "img2gray.cu").write_text(NAIVE_CU)
    started = time.monotonic()
    sample["variants"]["naive"] = gpu_check.build(naive_src, out / "naive-build", "cuda")["cuda"]
    sample["naive_build_seconds"] = round(time.monotonic() - started, 1)
    return sample


def copy_rate(samples: int = 20, warmup: int = 5) -> list[float]:
    """GB/s (bytes read + written) of 1 GiB device-to-device copies, CUDA events, no graph."""
    x = torch.randint(0, 256, (1 << 30,), dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    rates = []
    for i in range(warmup + samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        if i >= warmup:
            rates.append(2 * x.numel() / (start.elapsed_time(end) * 1e-3) / 1e9)
    assert torch.equal(x[-4096:], y[-4096:])
    del x, y
    torch.cuda.empty_cache()
    return rates


def time_rotating(launch: Callable[[int], object], sets: int) -> dict[str, Any]:
    """Median microseconds per launch of ``launch(k)`` (k: the buffer set), launched many
    times in a CUDA graph that cycles through all ``sets``."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for k in range(sets):  # warm-up: module loading, allocator pools, every buffer
            launch(k)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(sets):
            launch(k)
        end.record()
    end.synchronize()
    # An eager loop overestimates short kernels (launch overhead): more launches, fine.
    estimate_ms = start.elapsed_time(end) / sets
    launches = max(sets, min(4000, math.ceil(TARGET_MS / estimate_ms)))
    launches = math.ceil(launches / sets) * sets  # every buffer set used equally
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(launches):
            launch(i % sets)
    per_launch_us = []
    for r in range(2 + REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        if r >= 2:
            per_launch_us.append(start.elapsed_time(end) * 1e3 / launches)
    del graph
    return {"us": statistics.median(per_launch_us), "launches": launches,
            "replays_us": [round(t, 3) for t in per_launch_us]}


def bench_size(height: int, width: int, ours: Any, naive: Any) -> dict[str, Any]:
    pixels = height * width
    moved = 4 * pixels
    sets = max(4, math.ceil(ROTATE_BYTES / moved))
    gen = torch.Generator(device="cuda").manual_seed(height * width)
    images = [torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, device="cuda",
                            generator=gen) for _ in range(sets)]
    outputs = [torch.empty(height, width, dtype=torch.uint8, device="cuda") for _ in range(sets)]
    # The same images one byte into their buffers: our scalar path.
    odd = []
    for image in images:
        buffer = torch.empty(3 * pixels + 1, dtype=torch.uint8, device="cuda")
        view = buffer[1:].view(height, width, 3)
        view.copy_(image)
        odd.append(view)
    result: dict[str, Any] = {"size": f"{width}x{height}", "pixels": pixels,
                              "bytes_moved": moved, "buffer_sets": sets,
                              "rotated_MB": round(sets * moved / 1e6)}
    # Same data, same answer: each contender is checked on set 0 before it is timed.
    expected = gpu_check.reference(images[0]).cuda()
    contenders: dict[str, Callable[[int], object]] = {
        "ours": lambda k: ours.ops.img2gray(images[k], outputs[k]),
        "naive": lambda k: naive.ops.img2gray(images[k], outputs[k]),
        "eager": lambda k: eager(images[k]),
        "ours_odd_offset": lambda k: ours.ops.img2gray(odd[k], outputs[k]),
    }
    for name, launch in contenders.items():
        outputs[0].fill_(0xA5)
        produced = launch(0)
        gray = produced if isinstance(produced, torch.Tensor) else outputs[0]
        mismatches = int((gray != expected).sum())
        timing = time_rotating(launch, sets)
        timing["GBps"] = moved / (timing["us"] * 1e-6) / 1e9
        timing["mismatches_set0"] = mismatches
        result[name] = timing
    return result


def nvidia_smi() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
             "temperature.gpu,power.draw,power.limit", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi unavailable: {exc}"


def format_speed(summary: dict[str, Any]) -> str:
    copy = summary["copy_GBps_median"]
    lines = [f"{summary['machine']['device']}, torch {summary['machine']['torch']}, "
             f"CUDA {summary['machine']['cuda']}; copy rate {copy:.0f} GB/s "
             f"(1 GiB device-to-device, read + write, CUDA events, median of "
             f"{len(summary['copy_GBps_samples'])})",
             "times: median per launch in CUDA graphs, L2 defeated; GB/s = 4 bytes per pixel / time"]
    header = (f"{'size':>11} | {'ours us':>8} {'GB/s':>6} {'%copy':>6} | {'naive us':>8} "
              f"{'%copy':>6} | {'eager us':>8} {'%copy':>6} | {'x naive':>7} {'x eager':>7} | "
              f"{'odd-offset us':>13} {'%copy':>6}")
    lines += [header, "-" * len(header)]
    for r in summary["sizes"]:
        o, n, e, u = r["ours"], r["naive"], r["eager"], r["ours_odd_offset"]
        lines.append(
            f"{r['size']:>11} | {o['us']:>8.2f} {o['GBps']:>6.0f} {100 * o['GBps'] / copy:>5.1f}% | "
            f"{n['us']:>8.2f} {100 * n['GBps'] / copy:>5.1f}% | "
            f"{e['us']:>8.1f} {100 * e['GBps'] / copy:>5.1f}% | "
            f"{n['us'] / o['us']:>6.2f}x {e['us'] / o['us']:>6.1f}x | "
            f"{u['us']:>13.2f} {100 * u['GBps'] / copy:>5.1f}%")
    return "\n".join(lines)


def write_results(summary: dict[str, Any], results: Path) -> str:
    """Both tables as text (speed last); write the .json and .txt; return the text."""
    parts = [format_speed(summary)] if summary.get("sizes") else []
    if summary.get("symbol_versions"):
        parts.append("binaries (symbol table): " + "; ".join(
            f"{name}: newest {', '.join(v['newest'].values())}, above manylinux_2_28: "
            f"{', '.join(v['above_manylinux_2_28']) or 'none'}"
            for name, v in summary["symbol_versions"].items()))
    if "exactness" in summary:
        rows = summary["exactness"]
        total = sum(r["pixels"] for r in rows)
        parts.append(f"exactness vs the float32 CPU reference ({len(rows)} cases, {total} "
                     f"pixels; mismatching bytes summed over each image's layouts):\n"
                     f"{gpu_check.format_table(rows)}\n"
                     f"{'all exact' if summary['ok'] else 'MISMATCHES'}; "
                     f"errors: {json.dumps(summary['errors'])}")
    text = "\n\n".join([f"img2gray GPU benchmark, {summary['date']}: {summary['command']}",
                        *reversed(parts)]) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    slug = summary["machine"]["device"].lower().replace("nvidia ", "").replace(" ", "-")
    stem = f"gpu-{slug}-{summary['date'][:10]}"
    (results / f"{stem}.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (results / f"{stem}.txt").write_text(text)
    return text


def main() -> int:
    faulthandler.enable()  # a crash in native code still shows where Python was
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/img2gray-bench"),
                        help="build folder")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results",
                        help="where the .json and .txt results go")
    parser.add_argument("--skip-exactness", action="store_true")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "no GPU visible to torch"
    started = time.monotonic()
    summary: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["python3", *sys.argv]), "machine": gpu_check.machine(),
        "host": {"python": platform.python_version(), "cpus": os.cpu_count(),
                 "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        "nvidia_smi_before": nvidia_smi(),
    }
    build = build_all(args.out)
    summary["build_seconds"] = {"sample": build["build_seconds"],
                                "naive": build["naive_build_seconds"]}
    # the symbol table of every binary built: within manylinux_2_28 on any host
    summary["symbol_versions"] = {**gpu_check.symbol_versions(args.out / "build-output" / "build"),
                                  **gpu_check.symbol_versions(args.out / "naive-build" / "build")}
    within = all(not v["above_manylinux_2_28"] for v in summary["symbol_versions"].values())
    ours = gpu_check.load(build["variants"]["cuda"], "img2gray_ours")
    cpu = gpu_check.load(build["variants"]["cpu"], "img2gray_cpu")
    naive = gpu_check.load(build["variants"]["naive"], "img2gray_naive")
    print("loaded our CUDA and CPU variants and the naive kernel", flush=True)

    copy_samples = copy_rate()
    print(f"copy rate {statistics.median(copy_samples):.0f} GB/s", flush=True)
    summary["sizes"] = []
    for height, width in SIZES:
        summary["sizes"].append(bench_size(height, width, ours, naive))
        torch.cuda.empty_cache()  # this size's buffers, before the next size's
        r = summary["sizes"][-1]
        print(f"timed {width}x{height}: ours {r['ours']['us']:.2f} us, naive "
              f"{r['naive']['us']:.2f} us, eager {r['eager']['us']:.1f} us, odd offset "
              f"{r['ours_odd_offset']['us']:.2f} us", flush=True)
    copy_samples += copy_rate()
    summary["copy_GBps_samples"] = [round(c, 1) for c in copy_samples]
    summary["copy_GBps_median"] = statistics.median(copy_samples)
    summary["nvidia_smi_after"] = nvidia_smi()
    ok = within and all(r[k]["mismatches_set0"] == 0 for r in summary["sizes"]
                        for k in ("ours", "naive", "eager", "ours_odd_offset"))
    summary["ok"] = ok
    write_results(summary, args.results)  # the timings are kept even if a check crashes

    if not args.skip_exactness:
        t0 = time.monotonic()
        rows = gpu_check.check_exactness(ours, cpu, progress=lambda line: print(line, flush=True))
        summary["exactness"] = rows
        summary["errors"] = {}
        write_results(summary, args.results)
        summary["errors"] = gpu_check.check_errors(ours)
        summary["exactness_seconds"] = round(time.monotonic() - t0, 1)
        summary["ok"] = ok = (ok and all(r["ok"] for r in rows)
                              and gpu_check.errors_ok(summary["errors"]))
    summary["total_seconds"] = round(time.monotonic() - started, 1)
    print(write_results(summary, args.results))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env bash
# The whole test suite on a fresh machine: venvs (torch 2.13.0 CPU, torch 2.14.1 CUDA 13),
# the tools the tests drive (faketime, zip, unzip; zig via PyPI), ruff, mypy, lint-imports,
# then pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k to_wheel
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --cuda
# Debian tools the tests drive: faketime (reproducibility), zip/unzip (wheels made and
# read by other tools), util-linux's unshare/setpriv (read-only and full file systems),
# the aarch64 cross compiler and qemu's user emulation (kernel-wheels build --target-arch),
# Slurm and munge (the mirror's job array on a one-node cluster: tests/test_mirror_slurm.py),
# clang 19 with its AMDGPU target, lld and the offload bundler (real HIP builds for gfx90a
# and gfx942: tests/test_gpu_kernels.py).
missing=""
for tool in faketime:faketime zip:zip unzip:unzip unshare:util-linux setpriv:util-linux \
            aarch64-linux-gnu-g++:g++-aarch64-linux-gnu qemu-aarch64:qemu-user \
            sbatch:slurm-wlm munge:munge clang-19:clang-19 ld.lld-19:lld-19 \
            clang-offload-bundler-19:clang-tools-19; do
  command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool##*:}"
done
if [ -n "$missing" ]; then
  echo "test.sh: installing$missing (Debian) for the tests" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq $missing >/dev/null
fi
export PATH="$PWD/.venv/bin:$PATH"
echo "test.sh: ruff" >&2
ruff check src tests scripts benchmarks
echo "test.sh: mypy" >&2
mypy
echo "test.sh: lint-imports (the wings' import direction, docs/architecture.md)" >&2
lint-imports --no-cache
echo "test.sh: pytest" >&2
status=0
# Parallel workers (pytest-xdist), whole test files to each so that a file's servers and
# fixtures are made once; most tests wait on subprocesses and servers, so more workers
# than the 2 cores of a CI machine still help (measured on an idle one: 4 workers 10 min
# 10 s, 3 workers about 12 min). KW_TEST_WORKERS=0 runs in one process.
workers=${KW_TEST_WORKERS:-4}
# The benchmark suite's own run (tests/test_benchmarks.py, marked slow) takes most of an
# hour on a busy 2-core machine: KW_TEST_SLOW=1 includes it (docs/testing.md).
slow=(-m "not slow")
[ "${KW_TEST_SLOW:-0}" = 1 ] && slow=()
python -m pytest -n "$workers" --dist loadfile "${slow[@]}" "$@" || status=$?
if [ $status = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit $status

#!/usr/bin/env bash
# Create (or bring up to date) the project's virtual environments. Idempotent: a venv
# whose stamp matches pyproject.toml is left alone; a stale one is updated in place
# (pip install again), never deleted while something may be using it.
#   .venv        kernel-wheels + dev tools + torch 2.13.0 (CPU): converts, checks, builds the CPU variant
#   .venv-cuda   kernel-wheels + torch 2.14.1 (CUDA 13.0): builds the CUDA variant (with --cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want_cuda=0
[ "${1:-}" = "--cuda" ] && want_cuda=1

stamp() { sha256sum pyproject.toml | cut -c1-16; }

make_venv() {  # make_venv DIR TORCH_SPEC EXTRAS
  local dir=$1 torch=$2 extras=$3
  if [ -f "$dir/.kw-stamp" ] && [ "$(cat "$dir/.kw-stamp")" = "$(stamp)$torch$extras" ]; then
    return 0
  fi
  if [ ! -x "$dir/bin/python" ]; then
    echo "bootstrap: creating $dir ($torch)" >&2
    rm -rf "$dir"
    "$PY" -m venv "$dir"
    # This machine's pip configuration lists local indexes that exist only in part;
    # pip warns about each missing one. Those warnings are noise, not problems.
    "$dir/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "is ignored: it is neither" >&2)
  else
    echo "bootstrap: updating $dir (pyproject.toml changed)" >&2
  fi
  "$dir/bin/python" -m pip install -q "$torch" -e ".$extras" 2> >(grep -v "is ignored: it is neither" >&2)
  echo "$(stamp)$torch$extras" > "$dir/.kw-stamp"
}

# The two venvs are made at once: each is mostly pip unpacking torch, one process on one
# core, so together they take about as long as the larger one.
make_venv .venv "torch==2.13.0" "[dev]" &
cpu_venv=$!
if [ $want_cuda = 1 ]; then
  make_venv .venv-cuda "torch==2.14.1" "" &
  cuda_venv=$!
  wait $cuda_venv
fi
wait $cpu_venv

#!/usr/bin/env bash
# The whole test suite on a fresh machine: venvs (torch 2.13.0 CPU, torch 2.14.1 CUDA 13),
# the tools the tests drive (faketime, zig via PyPI), ruff, mypy, then pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k to_wheel
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --cuda
if ! command -v faketime >/dev/null; then
  echo "test.sh: installing faketime (Debian) for the reproducibility test" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq faketime >/dev/null
fi
export PATH="$PWD/.venv/bin:$PATH"
echo "test.sh: ruff" >&2
ruff check src tests scripts
echo "test.sh: mypy" >&2
mypy
echo "test.sh: pytest" >&2
status=0
python -m pytest "$@" || status=$?
if [ $status = 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit $status

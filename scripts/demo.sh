#!/usr/bin/env bash
# The main job end to end on the embedded default, no Hub needed:
#   build the sample img2gray kernel -> a local Hub-kernel git repo (tags v1.1.1, v1.1.2,
#   branch v1) -> wheels (to-wheel, checked) -> check -> a static index site (index) ->
#   a local pypiserver with a password (publish) -> a fresh venv with torch 2.13.0 ->
#   kernel-wheels install from the server -> import -> run the op, compare with a
#   float32 reference. The server listens on 127.0.0.1 and is stopped on exit.
# Everything goes to out/. Set KW_DEMO_CUDA=1 to also build the CUDA variant (torch 2.14.1).
# The demo's venv gets torch 2.13.0 from wherever pip finds it: PyPI gives the CUDA build,
# a machine's own wheel folder may give the CPU one; KW_DEMO_TORCH_INDEX=URL picks the index
# (e.g. https://pypi.org/simple, or https://download.pytorch.org/whl/cpu for the CPU build).
# Either way install takes the CPU build (--backend cpu): a CPU kernel runs on any torch.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${KW_DEMO_CUDA:-0}" = 1 ]; then bash scripts/bootstrap.sh --cuda; else bash scripts/bootstrap.sh; fi
KW=.venv/bin/kernel-wheels
rm -rf out && mkdir -p out

step() { printf '\n== %s\n' "$*" >&2; }

step "build: compile sample-kernel/ for this venv's torch (CPU)"
$KW build sample-kernel -o out/build-output
if [ "${KW_DEMO_CUDA:-0}" = 1 ]; then
  .venv-cuda/bin/kernel-wheels build sample-kernel -o out/build-output --backend cuda
fi

step "repo: a local Hub kernel repository from the build"
.venv/bin/python scripts/make_kernel_repo.py out/build-output out/img2gray --card sample-kernel/README.md >/dev/null
git -C out/img2gray log --oneline --decorate | cat

step "variants"
$KW variants out/img2gray --revision v1.1.2

step "to-wheel: version 1.1.2 (tag v1.1.2), every variant, checked before writing"
$KW to-wheel out/img2gray 1.1.2 -o out/wheels

step "check: the wheels again, from the outside"
$KW check -v out/wheels/*.whl

step "index: a static index site (any web server serves out/site; one index per build target)"
$KW index out/wheels -o out/site
ls out/site

step "server: pypiserver on 127.0.0.1 with htpasswd authentication for uploads"
PORT=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/python -c 'from passlib.apache import HtpasswdFile as H; h = H("out/htpasswd", new=True); h.set_password("demo", "demo-password"); h.save()'
mkdir -p out/packages
.venv/bin/pypi-server run -i 127.0.0.1 -p "$PORT" -P out/htpasswd -a update --disable-fallback out/packages >out/pypiserver.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
.venv/bin/python - "$PORT" <<'PY'
import sys, time, urllib.request
for _ in range(150):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/simple/", timeout=1).close()
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit("pypiserver did not start: see out/pypiserver.log")
PY

step "publish: check each wheel, then upload the new ones (credentials from TWINE_*)"
TWINE_USERNAME=demo TWINE_PASSWORD=demo-password $KW publish out/wheels --repository-url "http://127.0.0.1:$PORT/"

step "install: a fresh venv with torch 2.13.0, then kernel-wheels install picks the CPU build for it"
python3 -m venv out/venv
out/venv/bin/python -m pip install -q torch==2.13.0 ${KW_DEMO_TORCH_INDEX:+--index-url "$KW_DEMO_TORCH_INDEX"} \
  2> >(grep -v "is ignored: it is neither" >&2)
out/venv/bin/python -c 'import importlib.metadata as m; print("torch", m.version("torch"))'
$KW install img2gray --backend cpu --index-url "http://127.0.0.1:$PORT/simple/" --python out/venv/bin/python

step "run: import img2gray and compare with a float32 reference"
out/venv/bin/python - <<'PY'
import warnings
warnings.filterwarnings("ignore")
import torch, img2gray
image = torch.randint(0, 256, (1081, 1921, 3), dtype=torch.uint8)
gray = img2gray.img2gray(image)
f = image.float()
reference = ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(torch.uint8)
assert torch.equal(gray, reference)
print(f"img2gray from {img2gray.__file__}")
print(f"{tuple(image.shape)} -> {tuple(gray.shape)}, equal to the reference: True, mean gray {gray.float().mean():.1f}")
PY
kill $SERVER && wait $SERVER 2>/dev/null || true
trap - EXIT
echo "demo: OK" >&2

#!/usr/bin/env bash
# The main job end to end on the embedded default, no Hub needed:
#   build the sample img2gray kernel -> a local Hub-kernel git repo (tags v1.1.1, v1.1.2,
#   branch v1) -> wheels (to-wheel, checked) -> check -> a fresh venv -> pip install ->
#   import -> run the op and compare with a float32 reference.
# Everything goes to out/. Set KW_DEMO_CUDA=1 to also build the CUDA variant (torch 2.14.1).
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

step "install: a fresh venv with torch 2.13.0, then pip install img2gray from the wheel folder"
python3 -m venv out/venv
out/venv/bin/python -m pip install -q torch==2.13.0 2> >(grep -v "is ignored: it is neither" >&2)
out/venv/bin/python -m pip install -q --no-index --find-links out/wheels img2gray==1.1.2+torch213cpucxx11

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
echo "demo: OK" >&2

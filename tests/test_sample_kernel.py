"""The img2gray sample kernel, built for real by `kernel-wheels build`: the op's
results, its errors, a real third-party loader, digests, and the ELF promises."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from elftools.elf.elffile import ELFFile

from kernel_wheels.elf.reader import read_elf
from support.helpers import SAMPLE, reference_gray

torch = pytest.importorskip("torch")  # the test venv always has torch 2.13.0

MANYLINUX_2_28 = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11), "GCC": (7, 0, 0)}


def load_variant(variant: Path) -> ModuleType:
    """Import a built variant folder as the package `img2gray` (what loaders do)."""
    name = f"img2gray_{variant.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(
        name, variant / "__init__.py", submodule_search_locations=[str(variant)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def img2gray(cpu_build: Path) -> ModuleType:
    return load_variant(cpu_build)


@pytest.mark.parametrize("shape", [(1, 1), (1, 15), (1, 16), (1, 17), (2, 8), (3, 5), (17, 31),
                                   (255, 129), (480, 641)])
def test_cpu_output_equals_float32_reference(img2gray: ModuleType, shape: tuple[int, int]) -> None:
    generator = torch.Generator().manual_seed(shape[0] * 1000 + shape[1])
    image = torch.randint(0, 256, (*shape, 3), dtype=torch.uint8, generator=generator)
    gray = img2gray.img2gray(image)
    assert gray.shape == shape and gray.dtype == torch.uint8
    assert torch.equal(gray, reference_gray(image))
    if shape[0] * shape[1] > 100:
        assert gray.float().std() > 10  # a real image, not zeros or a constant


def _random_image(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)


def _at_offset(image: torch.Tensor, offset: int) -> torch.Tensor:
    """The same pixels as a contiguous view `offset` bytes into a larger buffer."""
    buffer = _random_image((image.numel() + offset + 7,), seed=offset)
    view = buffer[offset:offset + image.numel()].view(image.shape)
    view.copy_(image)
    assert view.is_contiguous() and view.storage_offset() == offset
    return view


@pytest.mark.parametrize("offset", [1, 3, 5, 16, 48])
@pytest.mark.parametrize("shape", [(1, 1), (1, 17), (7, 9), (255, 257)])
def test_cpu_image_at_a_storage_offset(img2gray: ModuleType, shape: tuple[int, int],
                                       offset: int) -> None:
    """A slice of a larger tensor (odd offsets: not even 2-byte aligned) gives the same
    gray image as a fresh tensor with the same pixels."""
    image = _random_image((*shape, 3), seed=shape[0] * 7 + shape[1] + offset)
    gray = img2gray.img2gray(_at_offset(image, offset))
    assert torch.equal(gray, reference_gray(image))
    assert torch.equal(gray, img2gray.img2gray(image))


def test_cpu_row_slice_of_a_larger_image(img2gray: ModuleType) -> None:
    big = _random_image((34, 33, 3), seed=34)
    image = big[1:]  # contiguous, storage offset 99
    assert image.is_contiguous() and image.storage_offset() == 99
    assert torch.equal(img2gray.img2gray(image), reference_gray(image.clone()))


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (1081, 1921)])
def test_cpu_op_writes_every_output_byte(img2gray: ModuleType, shape: tuple[int, int]) -> None:
    """Through the op, into outputs poisoned two ways (an unwritten byte cannot match
    the reference both times) and into an output at an odd address, whose neighbours
    must stay untouched."""
    image = _random_image((*shape, 3), seed=shape[0] + shape[1])
    expected = reference_gray(image)
    for poison in (0x00, 0xFF):
        out = torch.full(shape, poison, dtype=torch.uint8)
        img2gray.ops.img2gray(image, out)
        assert torch.equal(out, expected)
    buffer = torch.full((shape[0] * shape[1] + 2,), 0xA5, dtype=torch.uint8)
    out = buffer[1:-1].view(shape)
    img2gray.ops.img2gray(_at_offset(image, 1), out)
    assert torch.equal(out, expected)
    assert buffer[0] == 0xA5 and buffer[-1] == 0xA5


@pytest.mark.parametrize("shape", [(1080, 1920), (2161, 3839)])
def test_cpu_large_images(img2gray: ModuleType, shape: tuple[int, int]) -> None:
    image = _random_image((*shape, 3), seed=shape[1])
    assert torch.equal(img2gray.img2gray(image), reference_gray(image))


def test_cpu_every_rgb_triple(img2gray: ModuleType) -> None:
    """All 2^24 inputs a pixel can have, once each: exact everywhere, not just on samples."""
    i = torch.arange(1 << 24, dtype=torch.int32)
    image = torch.stack([(i >> 16) & 255, (i >> 8) & 255, i & 255], dim=-1).to(torch.uint8)
    image = image.view(4096, 4096, 3)
    gray = img2gray.img2gray(image)
    assert torch.equal(gray, reference_gray(image))
    assert gray.min() == 0 and gray.max() == 255


def test_gpu_exactness_harness_runs_on_the_cpu_variant(img2gray: ModuleType) -> None:
    """scripts/gpu_check.py's exactness cases (the GPU run and the install chain reuse
    them) work, here on the CPU variant: every layout, poisoned and odd-address outputs."""
    spec = importlib.util.spec_from_file_location("gpu_check", SAMPLE.parent / "scripts" / "gpu_check.py")
    assert spec and spec.loader
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    rows = gpu_check.check_exactness(img2gray, img2gray, device="cpu",
                                     shapes=[(1, 1), (1, 17), (17, 31)], every_triple=False)
    assert len(rows) == 3 * len(gpu_check.LAYOUTS)
    assert all(r["ok"] for r in rows), gpu_check.format_table(rows)
    assert {r["storage_offset"] % 2 for r in rows} == {0, 1}
    errors = gpu_check.check_errors(img2gray, device="cpu")
    assert errors["non_contiguous_op"] == "RuntimeError: img2gray: input must be contiguous"
    assert "contiguous" in errors["non_contiguous_wrapper"]


def test_known_pixels(img2gray: ModuleType) -> None:
    image = torch.tensor([[[255, 255, 255], [0, 0, 0], [100, 0, 0], [0, 100, 0], [0, 0, 100]]],
                         dtype=torch.uint8)
    assert img2gray.img2gray(image).tolist() == [[255, 0, 21, 72, 7]]


@pytest.mark.parametrize("make, error, message", [
    (lambda: torch.zeros(4, 4, 3, dtype=torch.float32), TypeError, "must be uint8"),
    (lambda: torch.zeros(4, 4, 4, dtype=torch.uint8), ValueError, "shape (H, W, 3)"),
    (lambda: torch.zeros(4, 4, dtype=torch.uint8), ValueError, "shape (H, W, 3)"),
    (lambda: torch.zeros(4, 6, 3, dtype=torch.uint8)[:, ::2], ValueError, "contiguous"),
    (lambda: [[1, 2, 3]], TypeError, "torch.Tensor"),
])
def test_bad_input_clear_python_error(img2gray: ModuleType, make, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        img2gray.img2gray(make())


@pytest.mark.parametrize("make_input, make_output, message", [
    (lambda: torch.zeros(4, 4, 3), lambda: torch.zeros(4, 4, dtype=torch.uint8), "input must be uint8"),
    (lambda: torch.zeros(4, 4, 2, dtype=torch.uint8), lambda: torch.zeros(4, 4, dtype=torch.uint8),
     r"shape \(H, W, 3\), got \(4, 4, 2\)"),
    (lambda: torch.zeros(4, 8, 3, dtype=torch.uint8)[:, ::2], lambda: torch.zeros(4, 4, dtype=torch.uint8),
     "input must be contiguous"),
    (lambda: torch.zeros(4, 4, 3, dtype=torch.uint8), lambda: torch.zeros(4, 5, dtype=torch.uint8),
     r"output must have shape \(H, W\) = \(4, 4\), got \(4, 5\)"),
    # On a CPU-only machine a second device is "meta": the dispatcher itself refuses the
    # mix with a clear error. CUDA + CPU reaches our TORCH_CHECK ("same device"): the GPU
    # script scripts/gpu_check.py tests that on the H200.
    (lambda: torch.zeros(4, 4, 3, dtype=torch.uint8),
     lambda: torch.zeros(4, 4, dtype=torch.uint8, device="meta"), "Meta"),
])
def test_bad_input_clear_op_error(img2gray: ModuleType, make_input, make_output, message) -> None:  # type: ignore[no-untyped-def]
    """Calling the registered op directly fails with TORCH_CHECK's message, not a crash."""
    with pytest.raises(RuntimeError, match=message):
        img2gray.ops.img2gray(make_input(), make_output())


def test_ops_namespace_is_unique_per_source(cpu_build: Path, tmp_path: Path) -> None:
    namespace = next(cpu_build.glob("*.abi3.so")).name.split(".")[0]
    assert namespace.startswith("_img2gray_cpu_") and len(namespace) == len("_img2gray_cpu_") + 7
    changed = tmp_path / "src"
    shutil.copytree(SAMPLE, changed)
    (changed / "csrc" / "img2gray_cpu.cpp").write_text(
        (changed / "csrc" / "img2gray_cpu.cpp").read_text() + "\n// changed\n")
    from kernel_wheels.building.config import read_build_toml
    from kernel_wheels.building.pipeline import source_hash
    assert source_hash(read_build_toml(changed)) != namespace[-7:]
    assert source_hash(read_build_toml(SAMPLE)) == namespace[-7:]


def test_hub_layout(cpu_build: Path) -> None:
    names = sorted(p.relative_to(cpu_build).as_posix() for p in cpu_build.rglob("*") if p.is_file())
    so = next(n for n in names if n.endswith(".abi3.so"))
    # flat, no compatibility sub-package: kernel-builder's layout since huggingface/kernels#736
    assert names == sorted(["__init__.py", "_ops.py", so, "metadata.json"])
    meta = json.loads((cpu_build / "metadata.json").read_text())
    assert meta["name"] == "img2gray" and meta["id"] == so.split(".")[0]
    assert meta["version"] == 1 and meta["license"] == "Apache-2.0"
    assert meta["backend"] == {"type": "cpu"}


def test_kernels_local_loader_runs_the_op(cpu_build: Path) -> None:
    """Hugging Face's own `kernels.get_local_kernel` (from PyPI) loads our build."""
    code = """
import sys, torch
from pathlib import Path
from kernels import get_local_kernel
sys.path.insert(0, sys.argv[2])
from support.gray import reference_gray
kernel = get_local_kernel(Path(sys.argv[1]))
image = torch.randint(0, 256, (33, 47, 3), dtype=torch.uint8)
assert torch.equal(kernel.img2gray(image), reference_gray(image))
print("ok", kernel.__name__)
"""
    out = subprocess.run([sys.executable, "-c", code, str(cpu_build.parent.parent),
                          str(Path(__file__).parent)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok _img2gray_cpu_")


@pytest.mark.parametrize("variant", ["cpu_build", "cuda_build"])
def test_metadata_digests_match_files(variant: str, request: pytest.FixtureRequest) -> None:
    """Our digests equal the `kernels` package's own computation, and the files."""
    from kernels._rust import Digest, DigestAlgorithm

    from kernel_wheels.kernel.digest import digest_folder

    folder: Path = request.getfixturevalue(variant)
    recorded = json.loads((folder / "metadata.json").read_text())["digest"]
    assert recorded["algorithm"] == "sha256"
    assert recorded["files"] == digest_folder(folder)
    assert recorded["files"] == Digest.hash_variant(DigestAlgorithm.SHA256, str(folder)).files


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


@pytest.mark.parametrize("variant", ["cpu_build", "cuda_build"])
def test_elf_promises(variant: str, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(variant)
    so = next(folder.glob("*.abi3.so"))
    info = read_elf(so, so.name)
    assert info.machine == "EM_X86_64"
    assert not any("torch_python" in n or n.startswith("libpython") for n in info.needed), info.needed
    assert "libc10.so" in info.needed
    assert info.rpaths == ()
    assert f"PyInit_{so.name.split('.')[0]}" in info.init_functions
    over = [(sym, ver) for sym, ver in info.versioned_imports
            if ver.rpartition("_")[0] in MANYLINUX_2_28
            and _version_tuple(ver.rpartition("_")[2]) > MANYLINUX_2_28[ver.rpartition("_")[0]]]
    assert over == []
    assert any(ver.startswith("GLIBC_") for _, ver in info.versioned_imports)
    with so.open("rb") as stream:  # no DT_RPATH/DT_RUNPATH at all, read independently
        dynamic = ELFFile(stream).get_section_by_name(".dynamic")
        tags = {t.entry.d_tag for t in dynamic.iter_tags()}
    assert not tags & {"DT_RPATH", "DT_RUNPATH"}


def test_cuda_variant_archs(cuda_build: Path) -> None:
    """sm_80 and sm_90 machine code plus compute_90 PTX, as build.toml asks."""
    so = next(cuda_build.glob("*.abi3.so"))
    assert so.name.startswith("_img2gray_cuda_")
    # This toolkit has no cuobjdump; the CUDA torch venv has one (shipped with triton).
    from support.helpers import cuda_python
    venv = cuda_python().parent.parent
    found = [shutil.which("cuobjdump"),
             *map(str, venv.glob("lib/python*/site-packages/triton/backends/nvidia/bin/cuobjdump"))]
    cuobjdump = next(f for f in found if f)
    elf = subprocess.run([cuobjdump, "--list-elf", str(so)], capture_output=True, text=True)
    ptx = subprocess.run([cuobjdump, "--list-ptx", str(so)], capture_output=True, text=True)
    assert "sm_80" in elf.stdout and "sm_90" in elf.stdout
    assert "sm_90" in ptx.stdout and "sm_80" not in ptx.stdout
    meta = json.loads((cuda_build / "metadata.json").read_text())
    assert meta["backend"] == {"type": "cuda", "archs": ["8.0", "9.0+PTX"]}

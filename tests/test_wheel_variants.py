"""Wheel variants (PEP 825 draft, the format variantlib 0.2.2 reads): every variant.json
and -variants.json we write parses and validates with variantlib, and variantlib's own
resolver, given a faked system configuration, picks the build `kernel-wheels install`
picks, configuration by configuration."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from variantlib.models.variant import VariantProperty
from variantlib.resolver.lib import sort_and_filter_supported_variants
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from kernel_wheels.install.core import choose
from kernel_wheels.install.environment import Environment, read_environment, running_environment
from kernel_wheels.install.variant_provider import TorchBackendPlugin, supported_values
from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.remote.simple_client import IndexFile
from kernel_wheels.wheel.plan import TagOptions, plan_wheel
from kernel_wheels.wheel.variant_label import (
    NoVariantWheel,
    VariantWheel,
    split_variant_label,
    variant_info,
    variant_wheel,
)
from support.helpers import UV, run_cli

#: One release with builds of every kind; CUDA builds with the GPUs metadata.json names.
RELEASE = {
    "torch27-cxx11-cu126-x86_64-linux": ["8.0", "9.0+PTX"],
    "torch27-cxx11-cu128-x86_64-linux": ["8.0", "9.0", "10.0+PTX"],
    "torch27-cxx11-cpu-x86_64-linux": [],
    "torch28-cxx11-cu128-x86_64-linux": ["8.0", "9.0+PTX"],
    "torch28-cxx11-cu129-x86_64-linux": ["8.0", "9.0", "10.0+PTX"],
    "torch28-cxx11-rocm64-x86_64-linux": [],
    "torch28-cxx11-xpu20251-x86_64-linux": [],
    "torch28-cxx11-cpu-x86_64-linux": [],
    "torch213-cxx11-cu130-x86_64-linux": ["9.0", "10.0", "12.0+PTX"],
    "torch-stable-abi211-cu130-x86_64-linux": ["9.0", "10.0", "12.0+PTX"],
    "torch213-cxx11-cpu-x86_64-linux": [],
    "tvm-ffi01-cu128-x86_64-linux": ["8.0", "9.0+PTX"],
    "torch213-metal-aarch64-darwin": [],
    "torch213-cpu-aarch64-darwin": [],
    "torch-cuda": [],
    "torch-universal": [],
}
LINUX_TAGS = ("cp311-cp311-manylinux_2_28_x86_64", "cp39-abi3-manylinux_2_28_x86_64", "py3-none-any")
MAC_TAGS = ("cp311-cp311-macosx_26_0_arm64", "cp39-abi3-macosx_26_0_arm64",
            "cp39-abi3-macosx_15_0_arm64", "py3-none-any")  # macOS 26 takes 15.0 wheels too
CUDA_VERSIONS = ("11.8", "12.0", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0", "13.1")
GPUS = (50, 60, 70, 75, 80, 86, 89, 90, 100, 120)


@dataclass(frozen=True)
class System:
    """A faked system: the torch install's facts, and the GPU the NVIDIA provider sees."""

    name: str
    torch: str
    os: str = "linux"
    cuda: str | None = None
    hip: str | None = None
    xpu: str | None = None
    mps: bool = False
    tvm_ffi: str | None = None
    gpu: int | None = None  # compute capability x10 (sm_90 -> 90)
    expected: str | None = None  # the build both must pick

    def environment(self) -> Environment:
        return Environment(
            python="python", python_version="3.11.9", implementation="cpython", os=self.os,
            cpu_arch="aarch64" if self.os == "darwin" else "x86_64",
            supported_tags=MAC_TAGS if self.os == "darwin" else LINUX_TAGS,
            torch_version=self.torch, cxx11_abi=True if self.os == "linux" else None,
            cuda=self.cuda, hip=self.hip, xpu=self.xpu, mps=self.mps, tvm_ffi_version=self.tvm_ffi)

    def nvidia(self) -> dict[str, list[str]]:
        """What an NVIDIA provider reports: CUDA lower bounds up to the system's, upper
        bounds above it, SASS for the GPU's major (same or lower minor), PTX up to it."""
        if self.cuda is None or self.gpu is None:
            return {}
        have = tuple(int(p) for p in self.cuda.split("."))
        lower = [v for v in reversed(CUDA_VERSIONS) if tuple(int(p) for p in v.split(".")) <= have]
        upper = [str(major) for major in range(have[0] + 1, have[0] + 4)]
        real = [f"{g}_real" for g in sorted(GPUS, reverse=True) if g // 10 == self.gpu // 10 and g <= self.gpu]
        virtual = [f"{g}_virtual" for g in sorted(GPUS, reverse=True) if g <= self.gpu]
        return {"cuda_version_lower_bound": lower, "cuda_version_upper_bound": upper,
                "sm_arch": real + virtual}

    def abi_dependency(self) -> str:
        pins = [f"torch=={self.torch.split('+')[0]}"]
        if self.tvm_ffi:
            pins.append(f"apache-tvm-ffi=={self.tvm_ffi}")
        return ",".join(pins)


SYSTEMS = [
    System("cuda 12.8, sm_90, torch 2.7", "2.7.1+cu128", cuda="12.8", gpu=90,
           expected="torch27-cxx11-cu128-x86_64-linux"),
    System("cuda 12.6, sm_80, torch 2.7", "2.7.1+cu126", cuda="12.6", gpu=80,
           expected="torch27-cxx11-cu126-x86_64-linux"),
    System("cpu only, torch 2.7", "2.7.1+cpu", expected="torch27-cxx11-cpu-x86_64-linux"),
    System("cuda 12.9, sm_100, torch 2.8", "2.8.0+cu129", cuda="12.9", gpu=100,
           expected="torch28-cxx11-cu129-x86_64-linux"),
    System("rocm 6.4, torch 2.8", "2.8.0+rocm6.4", hip="6.4.43482",
           expected="torch28-cxx11-rocm64-x86_64-linux"),
    System("xpu 2025.1, torch 2.8", "2.8.0+xpu", xpu="20250100",
           expected="torch28-cxx11-xpu20251-x86_64-linux"),
    System("cuda 13.0, sm_120, torch 2.13 (stable ABI first)", "2.13.0+cu130", cuda="13.0", gpu=120,
           expected="torch-stable-abi211-cu130-x86_64-linux"),
    System("cpu only, torch 2.13", "2.13.0+cpu", expected="torch213-cxx11-cpu-x86_64-linux"),
    System("cuda 12.8, sm_90, torch 2.13 (only the Python build fits)", "2.13.0+cu128", cuda="12.8",
           gpu=90, expected="torch-cuda"),
    System("cpu only, torch 2.9 (no build for it)", "2.9.0+cpu", expected="torch-universal"),
    System("cuda 12.8, sm_90, torch 2.7 with apache-tvm-ffi 0.1", "2.7.1+cu128", cuda="12.8", gpu=90,
           tvm_ffi="0.1.2", expected="torch27-cxx11-cu128-x86_64-linux"),
    System("cuda 12.8, sm_86, torch 2.9 with apache-tvm-ffi 0.1", "2.9.0+cu128", cuda="12.8", gpu=86,
           tvm_ffi="0.1.2", expected="tvm-ffi01-cu128-x86_64-linux"),
    System("macOS, MPS, torch 2.13", "2.13.0", os="darwin", mps=True,
           expected="torch213-metal-aarch64-darwin"),
    System("macOS, no MPS, torch 2.13", "2.13.0", os="darwin", expected="torch213-cpu-aarch64-darwin"),
    System("rocm 7.1, torch 2.12 (nothing but universal)", "2.12.0+rocm7.1", hip="7.1.0",
           expected="torch-universal"),
]


def _release() -> tuple[list[IndexFile], dict[str, list[tuple[str, frozenset[str]]]], dict[str, object]]:
    """The plain wheels (as an index lists them), label -> its builds with their variant
    wheel's tags (a label may stand for builds of several platforms), and the
    -variants.json document."""
    files: list[IndexFile] = []
    builds: dict[str, list[tuple[str, frozenset[str]]]] = {}
    properties = {}
    for name, archs in RELEASE.items():
        variant = parse_variant(name)
        plain = plan_wheel(variant, "img2gray", "1.1.2", TagOptions())
        files.append(IndexFile(plain.filename, f"http://index/{plain.filename}", None, None, None, False))
        found = variant_wheel(variant, archs)
        assert isinstance(found, VariantWheel), (name, found)
        assert properties.setdefault(found.label, found.properties) == found.properties, found.label
        labelled = plan_wheel(variant, "img2gray", "1.1.2", TagOptions(), variant_label=found.label)
        assert split_variant_label(labelled.filename) == (
            labelled.filename.rsplit("-", 1)[0] + ".whl", found.label)
        tags = parse_wheel_filename(split_variant_label(labelled.filename)[0])[3]
        builds.setdefault(found.label, []).append((name, frozenset(str(t) for t in tags)))
    return files, builds, variant_info(properties)


def _variantlib_choice(system: System, document: dict[str, object],
                       builds: dict[str, list[tuple[str, frozenset[str]]]],
                       monkeypatch: pytest.MonkeyPatch) -> str | None:
    """What variantlib's resolver picks among the variant wheels whose platform tags the
    system accepts (an installer filters by tags first, PEP 825)."""
    variants = VariantsJson(json.loads(json.dumps(document)))  # through JSON, as an index serves it
    accepted = set(system.environment().supported_tags)
    fitting = {label: [name for name, tags in builds[label] if tags & accepted] for label in builds}
    candidates = [desc for label, desc in variants.variants.items() if fitting[label]]
    supported = [VariantProperty("torch_backend", feature, value)
                 for feature, values in supported_values(system.environment()).items() for value in values]
    supported += [VariantProperty("nvidia", feature, value)
                  for feature, values in system.nvidia().items() for value in values]
    # The abi_dependency namespace: variantlib reads the installed packages, and this
    # variable (its documented override) stands for the system's torch.
    monkeypatch.setenv("VARIANT_ABI_DEPENDENCY", system.abi_dependency())
    ranked = sort_and_filter_supported_variants(candidates, supported, list(variants.namespace_priorities),
                                                filter_values=True)
    if not ranked:
        return None
    [build] = fitting[ranked[0].label]  # one build per label and platform
    return build


@pytest.mark.parametrize("system", SYSTEMS, ids=[s.name for s in SYSTEMS])
def test_variantlib_resolver_picks_what_install_picks(system: System,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    files, builds, document = _release()
    ours = choose(Requirement("img2gray"), files, system.environment())
    assert ours.chosen is not None and ours.chosen.wheel is not None and ours.chosen.wheel.variant
    assert ours.chosen.wheel.variant.name == system.expected
    assert _variantlib_choice(system, document, builds, monkeypatch) == system.expected


def test_the_table_has_ten_configurations_or_more() -> None:
    assert len(SYSTEMS) >= 10
    assert {s.expected for s in SYSTEMS} >= {"torch27-cxx11-cu128-x86_64-linux", "torch-universal",
                                             "torch213-cxx11-cpu-x86_64-linux"}


def test_builds_no_namespace_describes_get_no_variant_wheel() -> None:
    assert variant_wheel(parse_variant("torch26-cxx98-cu118-x86_64-linux"), []) == NoVariantWheel(
        "built for the old C++ ABI (cxx98), which no variant namespace expresses")
    assert isinstance(variant_wheel(parse_variant("torch213-cxx11-cu130-x86_64-windows"), []), NoVariantWheel)
    assert variant_wheel(parse_variant("torch-universal"), []) == VariantWheel("null", {})


def test_plugin_reports_the_running_torch() -> None:
    """The provider, run for real against this venv's torch 2.13.0 (CPU)."""
    configs = {c.name: c.values for c in TorchBackendPlugin.get_supported_configs()}
    # apache-tvm-ffi is installed beside torch here (the build tests use it): its builds fit too
    tvm_ffi = ["tvmffi{}{}".format(*importlib.metadata.version("apache-tvm-ffi").split(".")[:2])] \
        if importlib.util.find_spec("tvm_ffi") is not None else []
    assert configs == {"abi": ["stable213", "stable212", "stable211", "stable210", "torch213", *tvm_ffi],
                       "backend": ["cpu"], "noarch": ["cpu"]}


def test_the_plugin_and_install_probe_one_torch() -> None:
    """One probe: install runs it in the target Python, the provider asks it in its own
    process; for this Python both read the same facts (the provider asks for no wheel
    tags and no GPU), and so support the same builds."""
    probed = read_environment(Path(sys.executable))
    here = running_environment()
    assert here == replace(probed, supported_tags=(), gpu_capability=None, gpu_name=None)
    configs = {c.name: c.values for c in TorchBackendPlugin.get_supported_configs()}
    assert configs == supported_values(probed) and configs["abi"]


@pytest.fixture(scope="module")
def variant_site(matrix_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The contract matrix converted with --variants, then indexed."""
    wheels = tmp_path_factory.mktemp("variant-wheels")
    site = tmp_path_factory.mktemp("variant-site")
    proc = run_cli("to-wheel", matrix_folder, "1.1.2", "-o", wheels, "--variants")
    assert "build/torch26-cxx98-cu118-x86_64-linux: no variant wheel: built for the old C++ ABI" in proc.stderr
    run_cli("index", wheels, "-o", site)
    return site


def test_every_variant_json_we_write_validates_with_variantlib(variant_site: Path) -> None:
    variant_files = sorted(p for p in (variant_site / "files").glob("*.whl") if split_variant_label(p.name)[1])
    assert len(variant_files) >= 10
    labels = set()
    for wheel in variant_files:
        label = split_variant_label(wheel.name)[1]
        with zipfile.ZipFile(wheel) as zf:
            text = zf.read("img2gray-1.1.2.dist-info/variant.json")
        info = VariantDistInfo(text, expected_label=label)
        assert info.variant_label == label
        labels.add(label)
    [index_file] = (variant_site / "files").glob("*-variants.json")
    assert index_file.name == "img2gray-1.1.2-variants.json"
    merged = VariantsJson(json.loads(index_file.read_text()))
    assert set(merged.variants) == labels and "null" in labels
    page = (variant_site / "simple" / "img2gray" / "index.html").read_text()
    assert "img2gray-1.1.2-variants.json" in page
    assert all(w.name.replace("+", "%2B") in page for w in variant_files)


def test_pip_and_uv_ignore_the_variant_files(variant_site: Path, tmp_path: Path) -> None:
    """The root index lists variant wheels and the -variants.json: today's installers skip
    them without an error and take a plain wheel, as before."""
    index = (variant_site / "simple").as_uri()
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path / "pip"),
                          "--index-url", index, "img2gray==1.1.2"], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    [got] = list((tmp_path / "pip").iterdir())
    assert split_variant_label(got.name)[1] is None and "+" in got.name
    uv = subprocess.run([UV, "pip", "install", "--dry-run", "--no-deps", "--target", str(tmp_path / "uv"),
                         "--index-url", index, "img2gray==1.1.2"], capture_output=True, text=True)
    assert uv.returncode == 0, uv.stderr
    assert "+ img2gray==1.1.2+" in uv.stderr


@pytest.mark.parametrize("rename", ["other-label", "plain-name"])
def test_check_refuses_a_variant_label_the_wheel_does_not_describe(variant_site: Path, tmp_path: Path,
                                                                   rename: str) -> None:
    wheel = next(p for p in (variant_site / "files").glob("*-t27cu128.*.whl"))
    plain, label = split_variant_label(wheel.name)
    target = tmp_path / (plain.replace(".whl", "-t99cpu.whl") if rename == "other-label" else plain)
    shutil.copy(wheel, target)
    proc = run_cli("check", target, "--json", check=False)
    assert proc.returncode == 1
    failures = [f for r in json.loads(proc.stdout) for f in r["findings"] if f["status"] == "fail"]
    expected = (f"variant.json describes {label}, not the file name's t99cpu" if rename == "other-label"
                else "the wheel has a variant.json but its file name no variant label")
    assert [f["message"] for f in failures if f["check"] == "variant"] == [expected]
    # The closed contract says the same from its side: not the name (nor the SBOM naming
    # the file) kernel-wheels gives this build.
    contract = [f["message"] for f in failures if f["check"] == "contract"]
    assert contract[0].startswith("the file name is not the one kernel-wheels gives this build"), failures
    assert {f["check"] for f in failures} == {"variant", "contract"}, failures

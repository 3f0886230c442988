"""The variant grammar and the wheel contract's names, tags and requirements;
`kernel-wheels variants` takes SOURCE and VERSION as to-wheel does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_wheels.errors import UsageError, VariantError
from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.wheel.plan import TagOptions, plan_wheel
from support.contract import CONTRACT
from support.faults import one_error_line
from support.helpers import run_cli

# variant -> (wheel file name for V=1.1.2, torch requirement, purelib): the contract table.

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_contract_row(name: str) -> None:
    filename, torch = CONTRACT[name]
    plan = plan_wheel(parse_variant(name), "img2gray", "1.1.2", TagOptions())
    assert plan.filename == filename
    assert plan.torch_requirement == torch
    assert plan.root_is_purelib == (name in ("torch-cuda", "torch-universal"))


def test_two_digit_torch_minor_is_not_major() -> None:
    variant = parse_variant("torch210-cxx11-cu128-x86_64-linux")
    assert variant.framework_version == (2, 10)
    assert parse_variant("torch27-cxx11-cu128-x86_64-linux").framework_version == (2, 7)


def test_parsed_fields() -> None:
    v = parse_variant("torch213-cxx11-rocm71-x86_64-linux")
    assert (v.framework, v.backend, v.backend_version, v.cxx_abi, v.cpu_arch, v.os) == (
        "torch", "rocm", "7.1", "cxx11", "x86_64", "linux")
    assert parse_variant("torch213-cxx11-xpu20260-x86_64-linux").backend_version == "2026.0"
    assert parse_variant("torch26-cxx98-cu118-x86_64-linux").backend_version == "11.8"
    noarch = parse_variant("torch-rocm")
    assert noarch.noarch and noarch.backend == "rocm"


@pytest.mark.parametrize("name", ["build", "torch27-cxx11-cu-x86_64-linux", "torch-fortran",
                                  "torch27-cxx11-cu128-sparc-linux", "torch27-cxx11-cpu1-x86_64-linux",
                                  "torch7-cxx11-cu128-x86_64-linux", ".git", "torch27-cxx11-cu128"])
def test_not_variants(name: str) -> None:
    with pytest.raises(VariantError):
        parse_variant(name)


def test_tag_options_change_tags() -> None:
    options = TagOptions(python_version="3.11", manylinux_version="2.34", macos_version="15.0")
    linux = plan_wheel(parse_variant("torch27-cxx11-cu128-x86_64-linux"), "img2gray", "1.0", options)
    assert linux.filename.endswith("-cp311-abi3-manylinux_2_34_x86_64.whl")
    assert linux.requires_python == ">=3.11"
    mac = plan_wheel(parse_variant("torch213-metal-aarch64-darwin"), "img2gray", "1.0", options)
    assert mac.filename.endswith("-macosx_15_0_arm64.whl")
    with pytest.raises(UsageError):
        TagOptions(manylinux_version="two")


def test_dist_name_changes_distribution_only() -> None:
    plan = plan_wheel(parse_variant("torch-universal"), "img2gray", "1.0", TagOptions(),
                      dist_name="acme-img2gray")
    assert plan.filename == "acme_img2gray-1.0-py3-none-any.whl"
    assert plan.project_name == "acme-img2gray"


def test_variants_takes_source_and_version_like_to_wheel(kernel_repo: Path) -> None:
    for args in (["1.1.2"], [">=1.1,<1.1.2"], ["1"], ["--revision", "v1.1.1"]):
        result = json.loads(run_cli("variants", kernel_repo, *args, "--json").stdout)
        assert [v["name"] for v in result["variants"]] == [CPU, CUDA], args
    proc = run_cli("variants", kernel_repo, "9.9.9", check=False)
    assert one_error_line(proc) == "version 9.9.9 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)"

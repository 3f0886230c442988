"""The wheel contract's rows (docs/wheel-contract.md) as the tests hold them: every
variant form, the wheel file name and torch requirement it must give, and the layout and
metadata form each one is written in by the test fixtures."""

from __future__ import annotations

#: {variant: (wheel file name for img2gray 1.1.2, torch requirement)}
CONTRACT = {
    "torch27-cxx11-cu128-x86_64-linux": (
        "img2gray-1.1.2+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl", "torch==2.7.*"),
    "torch26-cxx98-cu118-x86_64-linux": (
        "img2gray-1.1.2+torch26cu118cxx98-cp39-abi3-manylinux_2_28_x86_64.whl", "torch==2.6.*"),
    "torch213-cxx11-rocm71-x86_64-linux": (
        "img2gray-1.1.2+torch213rocm71cxx11-cp39-abi3-manylinux_2_28_x86_64.whl", "torch==2.13.*"),
    "torch213-cxx11-xpu20260-x86_64-linux": (
        "img2gray-1.1.2+torch213xpu20260cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.13.*"),
    "torch210-cxx11-cann81-x86_64-linux": (  # CANN: not in the contract table, same rule
        "img2gray-1.1.2+torch210cann81cxx11-cp39-abi3-manylinux_2_28_x86_64.whl", "torch==2.10.*"),
    "torch213-cxx11-cpu-aarch64-linux": (
        "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_aarch64.whl", "torch==2.13.*"),
    "torch213-metal-aarch64-darwin": (
        "img2gray-1.1.2+torch213metal-cp39-abi3-macosx_26_0_arm64.whl", "torch==2.13.*"),
    "torch213-cpu-aarch64-darwin": (
        "img2gray-1.1.2+torch213cpu-cp39-abi3-macosx_15_0_arm64.whl", "torch==2.13.*"),
    "tvm-ffi01-cpu-aarch64-darwin": (  # not in MATRIX: tests/test_to_wheel_platforms.py converts it
        "img2gray-1.1.2+tvmffi01cpu-cp39-abi3-macosx_15_0_arm64.whl", "apache-tvm-ffi==0.1.*"),
    "torch213-cxx11-cu130-x86_64-windows": (
        "img2gray-1.1.2+torch213cu130cxx11-cp39-abi3-win_amd64.whl", "torch==2.13.*"),
    "torch213-cu130-aarch64-windows": (  # not in MATRIX: tests/test_to_wheel_platforms.py converts it
        "img2gray-1.1.2+torch213cu130-cp39-abi3-win_arm64.whl", "torch==2.13.*"),
    "torch213-cu130-x86_64-windows": (
        "img2gray-1.1.2+torch213cu130-cp39-abi3-win_amd64.whl", "torch==2.13.*"),
    "torch-stable-abi210-cu128-x86_64-linux": (
        "img2gray-1.1.2+torchstableabi210cu128-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch>=2.10"),
    "tvm-ffi01-cu128-x86_64-linux": (
        "img2gray-1.1.2+tvmffi01cu128-cp39-abi3-manylinux_2_28_x86_64.whl",
        "apache-tvm-ffi==0.1.*"),
    "torch-cuda": ("img2gray-1.1.2+cuda-py3-none-any.whl", "torch"),
    "torch-universal": ("img2gray-1.1.2-py3-none-any.whl", "torch"),
}


# Every row of the wheel contract, with the layout and metadata form each one uses.
MATRIX = {
    "torch27-cxx11-cu128-x86_64-linux": ("flat", True),
    "torch26-cxx98-cu118-x86_64-linux": ("legacy", False),
    "torch213-cxx11-rocm71-x86_64-linux": ("flat", True),
    "torch213-cxx11-xpu20260-x86_64-linux": ("legacy", True),
    "torch210-cxx11-cann81-x86_64-linux": ("flat", False),
    "torch213-cxx11-cpu-aarch64-linux": ("flat", True),
    "torch213-metal-aarch64-darwin": ("flat", True),
    "torch213-cpu-aarch64-darwin": ("legacy", False),
    "torch213-cxx11-cu130-x86_64-windows": ("flat", True),
    "torch213-cu130-x86_64-windows": ("flat", False),
    "torch-stable-abi210-cu128-x86_64-linux": ("flat", True),
    "tvm-ffi01-cu128-x86_64-linux": ("flat", True),
    "torch-cuda": ("flat", True),
    "torch-universal": ("legacy", False),
}

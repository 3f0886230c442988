"""The torch and CUDA toolkit a build uses: see :mod:`kernel_wheels.building.toolchain`."""

from .building.toolchain import CudaToolkit, TorchEnv, detect_torch, find_cuda_toolkit

__all__ = ["CudaToolkit", "TorchEnv", "detect_torch", "find_cuda_toolkit"]

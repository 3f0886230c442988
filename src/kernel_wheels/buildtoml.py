"""Reading kernel-builder's ``build.toml``: see :mod:`kernel_wheels.building.config`."""

from .building.config import BuildConfig, KernelComponent, read_build_toml

__all__ = ["BuildConfig", "KernelComponent", "read_build_toml"]

"""kernel-wheels: Hub kernels as validated, reproducible wheels."""

try:  # written by setuptools-scm from git when the package is built or installed
    from ._version import __version__ as __version__  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # a source tree that was never built or installed
    __version__ = "0+unknown"

# The typed Python API (the CLI is a thin layer over these). Imported on first use, so
# that `kernel-wheels build` on a machine with torch needs none of the checkers' libraries.
_API = {
    "CheckReport": "checks", "check_wheel": "checks",
    "ConversionResult": "convert.pipeline", "ConvertOptions": "convert.pipeline",
    "WheelResult": "convert.pipeline", "to_wheels": "convert.pipeline",
    "TagOptions": "wheel.plan", "VariantFilter": "kernel.selection",
    "KernelSource": "sources", "open_source": "sources", "Variant": "kernel.variants",
    "parse_variant": "kernel.variants", "VersionRequest": "kernel.versions",
    "parse_request": "kernel.versions",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'kernel_wheels' has no attribute {name!r}")

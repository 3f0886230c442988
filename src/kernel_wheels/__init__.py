"""kernel-wheels: Hub kernels as validated, reproducible wheels."""
__version__ = "0.1.0"

# The typed Python API (the CLI is a thin layer over these). Imported on first use, so
# that `kernel-wheels build` on a machine with torch needs none of the checkers' libraries.
_API = {
    "CheckReport": "checks", "check_wheel": "checks",
    "ConversionResult": "convert", "ConvertOptions": "convert", "WheelResult": "convert",
    "to_wheels": "convert", "TagOptions": "plan", "VariantFilter": "selection",
    "KernelSource": "sources", "open_source": "sources", "Variant": "variants",
    "parse_variant": "variants", "VersionRequest": "versions", "parse_request": "versions",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'kernel_wheels' has no attribute {name!r}")

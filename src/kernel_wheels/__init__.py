"""kernel-wheels: Hub kernels as validated, reproducible wheels."""
__version__ = "0.1.0"

# The typed Python API (the CLI is a thin layer over these).
from .checks import CheckReport, check_wheel  # noqa: E402
from .convert import ConversionResult, ConvertOptions, WheelResult, to_wheels  # noqa: E402
from .plan import TagOptions  # noqa: E402
from .selection import VariantFilter  # noqa: E402
from .sources import KernelSource, open_source  # noqa: E402
from .variants import Variant, parse_variant  # noqa: E402
from .versions import VersionRequest, parse_request  # noqa: E402

__all__ = [
    "CheckReport", "ConversionResult", "ConvertOptions", "KernelSource", "TagOptions", "Variant",
    "VariantFilter", "VersionRequest", "WheelResult", "check_wheel", "open_source",
    "parse_request", "parse_variant", "to_wheels",
]

"""kw-glibc: small ops whose binary needs glibc symbols newer than 2.28 when built on a
modern machine (see build.toml)."""

from ._ops import ops
from .kw_glibc import MODULE_FILE


def parse_unsigned(text: str) -> int:
    return int(ops.parse_unsigned(text))


def random_word() -> int:
    return int(ops.random_word())


def single_threaded() -> int:
    return int(ops.single_threaded())


def exponential(x: float) -> float:
    return float(ops.exponential(x))


def file_size(path: str) -> int:
    return int(ops.file_size(path))


__all__ = ["MODULE_FILE", "exponential", "file_size", "parse_unsigned", "random_word",
           "single_threaded"]

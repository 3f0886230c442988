"""A module named like the kernel (einops ships einops.py): the build must not write a
folder of this name beside it, or `from .kw_glibc import` finds that folder instead."""

MODULE_FILE = "kw_glibc.py"

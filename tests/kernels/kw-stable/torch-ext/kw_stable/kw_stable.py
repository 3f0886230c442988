"""A module named like the kernel (einops ships einops.py): the build must not write a
folder of this name beside it, or `from .kw_stable import` finds that folder instead."""

NAME = "kw_stable.py"

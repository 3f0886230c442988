"""A module named like the kernel (einops ships einops.py): the build must not write a
folder of this name beside it, or `from .kw_noarch import` finds that folder instead."""


def half_of(x):
    return x / 2

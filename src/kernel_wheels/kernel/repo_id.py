"""A Hub repository id (``org/name``), by one rule for every command that takes one: the
command line (``to-wheel``, ``serve --kernels``, ``mirror``), ``kernels.lock``,
metadata.json's ``kernel-depends``, the mirror's keys and the Hub's own listings.

Both parts start with a letter or digit and go on with letters, digits, ``_``, ``.`` and
``-``; ``..`` appears nowhere (the Hub refuses it too, and an id becomes parts of
cache folders and storage keys). It cannot hold LOCAL_KERNELS' separators (``=``,
``:``). And the Hub's own URL of a repository, what a wheel records as its source, is
written and read here (whatever endpoint, a mirror, it was read through).

A repository id that a wheel records for a folder or git source (``to-wheel --repo-id``,
a build's metadata.json ``repo-id``) must name the kernel (:func:`names_kernel`): it is
what ``local-kernels`` maps, and ``kernels.get_kernel`` loads whatever folder an id is
mapped to.
"""

from __future__ import annotations

import re
from typing import TypeGuard

from packaging.utils import canonicalize_name

from ..confine import shown
from ..errors import UnsafeNameError

HUB = "https://huggingface.co"

#: Where a wheel's Hub repository id came from (``kernel_wheels.json``'s ``repo_id_from``,
#: written by wheel/derive.py): the Hub itself (the source was that repository: its URL is
#: recorded, no ``repo_id_from``), the build's own metadata.json (from build.toml's
#: ``[general.hub] repo-id``), or ``to-wheel --repo-id`` typed by hand.
REPO_ID_FROM_HUB = "hub"
REPO_ID_FROM_BUILD = "metadata.json"
REPO_ID_BY_HAND = "--repo-id"
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: Where each repository type's pages are on the Hub (a model's at the top).
_URL_PREFIX = {"model": "", "kernel": "kernels/"}


def is_repo_id(text: object) -> TypeGuard[str]:
    """Whether ``text`` is a Hub repository id (``org/name``)."""
    return isinstance(text, str) and _REPO_ID.fullmatch(text) is not None and ".." not in text


def check_repo_id(value: object, where: str) -> str:
    """``value``, a repository id named by an answer or a record (``where``); anything else
    is an :class:`UnsafeNameError`: it would become a folder or a key."""
    if not is_repo_id(value):
        raise UnsafeNameError(f"{where}: {shown(repr(value))} is not a repository id (org/name)")
    return value


def hub_url(repo_id: str, repo_type: str) -> str:
    """The Hub's own URL of a repository, whatever endpoint (mirror) it was read through."""
    return f"{HUB}/{_URL_PREFIX.get(repo_type, f'{repo_type}s/')}{repo_id}"


def repo_id_of_hub_url(url: str) -> str | None:
    """The repository of a kernel's or model's :func:`hub_url`; None for any other URL."""
    rest = url.removeprefix(f"{HUB}/") if url.startswith(f"{HUB}/") else None
    if rest is None:
        return None
    for candidate in (rest.removeprefix("kernels/") if rest.startswith("kernels/") else None, rest):
        if candidate is not None and is_repo_id(candidate):
            return candidate
    return None


def names_kernel(repo_id: str, kernel_name: str) -> bool:
    """Whether the name part of ``repo_id`` is ``kernel_name``, both normalised as PEP 503
    normalises project names (the Hub ignores case; ``flash-attn``, ``flash_attn`` and
    ``Flash.Attn`` are one name). The organisation is not compared: nothing offline says
    which organisation a kernel belongs to (docs/kernels.md, "Where a mapped id comes
    from")."""
    return canonicalize_name(repo_id.split("/", 1)[-1]) == canonicalize_name(kernel_name)


def kernel_named_by(repo_id: str) -> str:
    """The kernel name ``repo_id`` would have to belong to (its name part, normalised)."""
    return canonicalize_name(repo_id.split("/", 1)[-1])

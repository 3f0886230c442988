"""A kernel's versions as its source has them (``kernel-wheels versions``): the release
tags (``vX.Y.Z``) and major branches (``vN``), each with its commit and how many build
variants that commit has, like ``kernels versions``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError, UsageError
from ..kernel.revision import Revision
from ..kernel.variants import try_parse_variant
from ..kernel.versions import tag_version

_MAJOR = re.compile(r"v(\d+)")


@dataclass(frozen=True)
class KernelVersion:
    kind: str  # "release" (a vX.Y.Z tag) or "major" (a vN branch: its newest build)
    version: str  # "1.1.2", or "1" for a major branch
    ref: str
    commit: str
    variants: int  # build variants at that commit

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "ref": self.ref, "commit": self.commit,
                "variants": self.variants}


def list_versions(source: Any, progress: Callable[[str], None] = lambda _: None) -> list[KernelVersion]:
    """Releases (newest first), then major branches (highest first)."""
    refs = getattr(source, "refs", None)
    if refs is None:
        raise UsageError(f"{source.display} is a plain folder: it has no versions (a Hub repository "
                         "or a git repository has)")
    tags, branches = refs()
    releases = sorted(((v, tag) for tag in tags if (v := tag_version(tag)) is not None), reverse=True)
    majors = sorted(((int(m[1]), name) for name in branches if (m := _MAJOR.fullmatch(name))),
                    reverse=True)
    counts: dict[str, int] = {}

    def variants(ref: str, commit: str) -> int:
        if commit not in counts:
            try:
                names = source.variant_names(Revision(ref, ref, commit, None))
            except SourceError:
                names = []  # a commit without build/
            counts[commit] = sum(try_parse_variant(name) is not None for name in names)
        return counts[commit]

    found = [KernelVersion("release", str(version), tag, tags[tag], variants(tag, tags[tag]))
             for version, tag in releases]
    found += [KernelVersion("major", str(major), name, branches[name], variants(name, branches[name]))
              for major, name in majors]
    return found

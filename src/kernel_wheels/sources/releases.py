"""A kernel's versions as its source has them (``kernel-wheels versions``): the release
tags (``vX.Y.Z``) and major branches (``vN``), each with its commit and how many build
variants that commit has, like ``kernels versions``.

A release is listed once, by the release rule every command follows
(:func:`kernel_wheels.kernel.versions.tagged_releases`): two tags that spell its version on
one commit are one release; on different commits, it is listed once and marked ambiguous
(``to-wheel``, ``serve`` and ``mirror`` refuse it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError, UsageError
from ..kernel.revision import Revision
from ..kernel.variants import try_parse_variant
from ..kernel.versions import tagged_releases

_MAJOR = re.compile(r"v(\d+)")


@dataclass(frozen=True)
class KernelVersion:
    kind: str  # "release" (a vX.Y.Z tag) or "major" (a vN branch: its newest build)
    version: str  # "1.1.2", or "1" for a major branch
    ref: str
    commit: str
    variants: int  # build variants at that commit
    #: Other tags that spell the release's version on other commits, (tag, commit).
    rivals: tuple[tuple[str, str], ...] = ()
    #: Why the release is ambiguous (one line), when it has rivals.
    ambiguity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "version": self.version, "ref": self.ref,
                                 "commit": self.commit, "variants": self.variants}
        if self.rivals:
            found["ambiguous"] = [{"ref": tag, "commit": commit} for tag, commit in self.rivals]
        return found


def list_versions(source: Any, progress: Callable[[str], None] = lambda _: None) -> list[KernelVersion]:
    """Releases (newest first), then major branches (highest first)."""
    refs = getattr(source, "refs", None)
    if refs is None:
        raise UsageError(f"{source.display} is a plain folder: it has no versions (a Hub repository "
                         "or a git repository has)")
    tags, branches = refs()
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

    found = [KernelVersion("release", str(release.version), release.tag, release.commit,
                           variants(release.tag, release.commit), release.rivals,
                           release.ambiguity(source.display))
             for release in reversed(tagged_releases(tags))]
    found += [KernelVersion("major", str(major), name, branches[name], variants(name, branches[name]))
              for major, name in majors]
    return found

"""What a source resolved a user's version request to."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Revision:
    """A pinned revision of a kernel source."""

    #: What the user asked for, as given (``1.1.2``, ``>=1.1,<2``, ``1``, a SHA...).
    requested: str
    #: The git ref it resolved to (``v1.1.2``, ``v1``), or None for a plain folder.
    ref: str | None
    #: Full commit SHA, or None for a plain folder.
    commit: str | None
    #: Seconds since the epoch of that commit (reproducible zip timestamps), if known.
    commit_time: int | None
    #: A URL that shows the source at exactly this revision, if there is one.
    url: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

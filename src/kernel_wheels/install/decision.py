"""What ``install`` decided about one file an index lists: the step that judges by the
GPU (:mod:`.gpu`) and the choice (:mod:`.core`) both pass these on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..index.targets import KernelWheel
from ..remote.simple_client import IndexFile


@dataclass(frozen=True)
class Decision:
    """One file of the project and what became of it."""

    file: IndexFile
    wheel: KernelWheel | None
    #: Why it does not fit; None when it fits.
    rejected: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"wheel": self.file.filename, "url": self.file.url,
                "fits": self.rejected is None, "reason": self.rejected}

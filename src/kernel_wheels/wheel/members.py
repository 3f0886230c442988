"""A wheel's members as the writer takes and gives them (:class:`Member`,
:class:`WrittenMember`), the order they are written in and RECORD: what ``check`` needs
to derive a wheel's own files again without loading the writer's compressor.
"""

from __future__ import annotations

import base64
import csv
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..kernel.arrival import Arrival


@dataclass(frozen=True)
class Member:
    arcname: str
    source: Path | None = None  # streamed from this file ...
    content: bytes | None = None  # ... or these bytes
    executable: bool = False
    arriving: Arrival | None = None  # ``source`` is still being downloaded
    #: The content is made from the members written before it (written after all of them).
    derive: Callable[[Sequence[WrittenMember]], bytes] | None = None

    @property
    def size(self) -> int:
        if self.arriving is not None:
            return self.arriving.size
        return self.source.stat().st_size if self.source is not None else len(self.content or b"")

    def read_bytes(self) -> bytes:
        """The whole content (waiting for it if it is still arriving)."""
        if self.source is None:
            return self.content or b""
        if self.arriving is not None:
            return b"".join(self.arriving.chunks(1 << 20))
        return self.source.read_bytes()


@dataclass(frozen=True)
class WrittenMember:
    arcname: str
    sha256: bytes  # raw digest
    size: int


@dataclass(frozen=True)
class WrittenWheel:
    path: Path
    members: tuple[WrittenMember, ...]  # RECORD itself excluded
    record: str
    #: The bytes of the derived members, by name (the checks read them from here).
    derived: tuple[tuple[str, bytes], ...] = ()


def record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def writing_order(members: Iterable[Member], dist_info: str) -> list[Member]:
    """The order members are written in (and RECORD lists them): the package's files by
    name, then the dist-info's, the derived ones (made from those before them) last."""
    return sorted(members, key=lambda m: (m.arcname.startswith(dist_info + "/"),
                                          m.derive is not None, m.arcname))


def record_text(written: Sequence[WrittenMember], dist_info: str) -> str:
    """RECORD: every member written, in order, with its sha256 and size, then itself."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows((m.arcname, record_hash(m.sha256), str(m.size)) for m in written)
    writer.writerow((f"{dist_info}/RECORD", "", ""))
    return buffer.getvalue()

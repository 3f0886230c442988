"""A plain local folder: ``DIR/build/<variant>/``, ``DIR/<variant>/``, or one variant
folder itself (``DIR/build/<variant>``). It has no revisions: VERSION is taken as given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError, UsageError
from ..kernel.revision import Revision
from ..kernel.variants import try_parse_variant
from ..kernel.versions import RequestKind, VersionRequest
from ..reading import read_regular
from . import FetchedVariant


class FolderSource:
    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise SourceError(f"{path} is not a folder")
        self.root = path.resolve()
        self.build_dir = self.root / "build" if (self.root / "build").is_dir() else self.root
        self.name = (self.root.name if self.build_dir != self.root else self.root.parent.name)
        self.display = str(path)
        self.fetch_downloads = False
        #: A single variant folder given as SOURCE: converted alone.
        self.single = self.build_dir == self.root and try_parse_variant(self.root.name) is not None
        self.card_dir = self.root
        if self.single:
            self.build_dir = self.root.parent
            self.card_dir = self.root.parent.parent if self.root.parent.name == "build" \
                else self.root.parent
            self.name = self.card_dir.name

    def resolve(self, request: VersionRequest | None) -> Revision:
        if request is None:
            return Revision("", None, None, None, None)
        if request.kind not in (RequestKind.EXACT, RequestKind.MAJOR):
            raise UsageError(
                f"{self.display} is a plain folder with no versions: give the version of "
                f"its kernel (e.g. 1.1.2), not '{request.text}'"
            )
        return Revision(request.text, None, None, None, None)

    def variant_names(self, revision: Revision) -> list[str]:
        if self.single:
            return [self.root.name]
        names = sorted(p.name for p in self.build_dir.iterdir()
                       if p.is_dir() and not p.name.startswith("."))
        if not names and self.build_dir != self.root:
            raise SourceError(f"{self.display}/build is empty: no variant folders")
        if not names:
            raise SourceError(f"{self.display} has no build/ folder and no variant folders")
        return names

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        for name in names:
            yield name, FetchedVariant(self.build_dir / name, self.root)

    def card(self, revision: Revision) -> str | None:
        for name in ("README.md", "CARD.md"):
            if (self.card_dir / name).is_file():
                return read_regular(self.card_dir / name, "the card", SourceError).decode("utf-8", "replace")
        return None

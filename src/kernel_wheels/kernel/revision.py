"""What a source resolved a user's version request to."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Hosts whose web pages show a repository at a commit under /tree/<sha>.
_BROWSABLE = ("https://huggingface.co/", "https://github.com/", "https://gitlab.com/")


@dataclass(frozen=True)
class Revision:
    """A pinned revision of a kernel source.

    Only ``commit``, ``commit_time``, ``release``, ``earlier_releases`` and ``source_url``
    reach a wheel: two people who ask for the same commit in different words (``1.1.2``,
    ``>=1.1,<2``, ``--revision <sha>``) get the same bytes.
    """

    #: What the user asked for, as given (``1.1.2``, ``>=1.1,<2``, ``1``, a SHA...). Messages only.
    requested: str
    #: The git ref it resolved to (``v1.1.2``, ``v1``, a SHA), or None for a plain folder. Messages only.
    ref: str | None
    #: Full commit SHA, or None for a plain folder.
    commit: str | None
    #: Seconds since the epoch of that commit (reproducible zip timestamps), if known.
    commit_time: int | None
    #: The source's canonical URL (Hub repo or normalised git URL; never a local path and
    #: never credentials), or None when there is none (a plain folder, a local repository
    #: without a remote).
    source_url: str | None = None
    #: The highest release tag (``v1.1.2``) pointing at exactly this commit, if any.
    release: str | None = None
    #: For a commit that is not a release: the release versions (``1.1.2``) whose commits
    #: are not newer than this one. They place a snapshot build between releases.
    earlier_releases: tuple[str, ...] = ()

    @property
    def url(self) -> str | None:
        """A URL that shows the source at exactly this revision, if there is one."""
        if self.source_url is None or self.commit is None:
            return None
        if self.source_url.startswith(_BROWSABLE):
            return f"{self.source_url}/tree/{self.commit}"
        return f"git+{self.source_url}@{self.commit}"  # pip's VCS form: any git host

    def to_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["url"] = self.url
        return result

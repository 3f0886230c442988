"""Version requests (``1.1.2``, ``v1.1.2``, ``>=1.1.2,<2``, ``1``, ``--revision R``) and
the wheel version ``V`` they give.

Rules (also in docs/wheel-contract.md):
- a commit with a release tag ``vX.Y.Z`` gives ``V = X.Y.Z``, however it was asked for
  (``1.1.2``, a range, the branch ``v1`` or the SHA of that commit);
- any other commit (a later build on the major branch ``v1``, a branch, a SHA) is a
  snapshot: ``V = <R>.post0.dev<YYYYMMDDHHMMSS>`` of its commit time in UTC, where ``R`` is
  the newest release of the same major not newer than the commit (``<major>.0.0`` and no
  ``.post0`` when there is none). It sorts after ``R`` and before any later release, and
  installers skip it unless asked (a development release). ``<major>`` comes from the
  branch name ``vN`` or from metadata.json's ``version``. Commits of the same second are
  told apart by the commit SHA in the provenance, not the file name.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import AmbiguousVersionError, RevisionNotFoundError, UsageError
from .revision import Revision

_TAG = re.compile(r"v(\d+(?:\.\d+)*)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RequestKind(Enum):
    EXACT = "exact"  # 1.1.2 -> tag v1.1.2
    RANGE = "range"  # >=1.1.2,<2 -> newest matching tag
    MAJOR = "major"  # 1 -> branch v1
    REVISION = "revision"  # any branch, tag or commit SHA


@dataclass(frozen=True)
class VersionRequest:
    kind: RequestKind
    text: str

    @property
    def tag(self) -> str:
        assert self.kind is RequestKind.EXACT
        return "v" + self.text

    @property
    def branch(self) -> str:
        assert self.kind is RequestKind.MAJOR
        return "v" + self.text


def parse_request(version: str | None, revision: str | None = None) -> VersionRequest:
    """Turn the command line's VERSION / --revision into a request."""
    for what, given in (("--revision", revision), ("VERSION", version)):
        if given is not None and _CONTROL.search(given.strip()):
            raise UsageError(f"{what} {given!r} has a control character")
    if revision is not None:
        if not revision.strip():
            raise UsageError("--revision is empty")
        return VersionRequest(RequestKind.REVISION, revision.strip())
    if version is None or not version.strip():
        raise UsageError("give a VERSION (e.g. 1.1.2, '>=1.1,<2' or 1) or --revision")
    text = version.strip()
    if re.fullmatch(r"[0-9]+", text):
        return VersionRequest(RequestKind.MAJOR, text)
    if re.fullmatch(r"v?[0-9]+(\.[0-9]+)+", text):
        return VersionRequest(RequestKind.EXACT, text.removeprefix("v"))
    if any(op in text for op in "<>=!~"):
        try:
            SpecifierSet(text)
        except InvalidSpecifier:
            raise UsageError(f"'{text}' is not a valid version range") from None
        return VersionRequest(RequestKind.RANGE, text)
    raise UsageError(f"'{text}' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)")


def tag_version(tag: str) -> Version | None:
    """``v1.1.2`` -> Version('1.1.2'); None for anything that is not a release tag."""
    match = _TAG.fullmatch(tag)
    if match is None or "." not in match[1]:
        return None
    try:
        return Version(match[1])
    except InvalidVersion:
        return None


def pick_tag(request: VersionRequest, tags: list[str], branches: Sequence[str] = ()) -> str:
    """The tag an EXACT or RANGE request selects from ``tags`` (``branches`` only
    complete the error message)."""
    versions = {tag: v for tag in tags if (v := tag_version(tag)) is not None}
    if request.kind is RequestKind.EXACT:
        wanted = Version(request.text)
        for tag, v in versions.items():
            if v == wanted:
                return tag
    else:
        spec = SpecifierSet(request.text)
        matching = [(v, tag) for tag, v in versions.items() if spec.contains(v, prereleases=True)]
        if matching:
            return max(matching)[1]
    raise RevisionNotFoundError(
        f"version {request.text} not found; versions that exist: "
        f"{describe_versions([*tags, *branches])}"
    )


def ref_for_request(request: VersionRequest | None, tags: Mapping[str, str], branches: Sequence[str],
                    *, default: str, where: str) -> str:
    """The ref a request names, given a source's tags (and the commits they point at) and
    branches: a tag for a version or range, the branch ``vN`` for a major version, the text
    itself for a revision."""
    if request is None:
        return default
    if request.kind in (RequestKind.EXACT, RequestKind.RANGE):
        tag = pick_tag(request, list(tags), branches)
        refuse_ambiguous(tag, tags, where)
        return tag
    if request.kind is RequestKind.MAJOR:
        if request.branch not in branches:
            raise RevisionNotFoundError(
                f"major version {request.text} not found (no branch {request.branch} in {where}); "
                f"versions that exist: {describe_versions([*tags, *branches])}")
        return request.branch
    return request.text


def rivals_of(tag: str, tags: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The rule that makes a release ambiguous, for every command that lists releases:
    the other release tags that spell ``tag``'s version (``v1.1.2`` and ``v1.01.2``) at a
    different commit, as (tag, commit), by name. Which release such a version means
    cannot be told, and converting either would give one wheel name two contents."""
    version = tag_version(tag)
    if version is None:
        return ()
    return tuple(sorted((other, commit) for other, commit in tags.items()
                        if other != tag and commit != tags[tag] and tag_version(other) == version))


@dataclass(frozen=True)
class TaggedRelease:
    """One release version and the tag that names it: of the tags that spell it, the one
    in the version's own form (``v1.1.2``) first, then by name."""

    version: Version
    tag: str
    commit: str
    #: Other tags that spell the version on other commits (:func:`rivals_of`).
    rivals: tuple[tuple[str, str], ...]

    def ambiguity(self, where: str) -> str | None:
        """Why the release is ambiguous (its version spelt on other commits too), as a
        listing says it; None when it is not."""
        if not self.rivals:
            return None
        rivals = ", ".join(tag for tag, _ in self.rivals)
        return f"{where}: the tags {self.tag} and {rivals} spell version {self.version} on different commits"


def tagged_releases(tags: Mapping[str, str]) -> list[TaggedRelease]:
    """The release versions that ``tags`` (tag -> commit) spell, oldest first."""
    groups: dict[Version, list[str]] = {}
    for tag in tags:
        if (version := tag_version(tag)) is not None:
            groups.setdefault(version, []).append(tag)
    releases = []
    for version, spelt in sorted(groups.items()):
        tag = min(spelt, key=lambda t: (t != f"v{version}", t))
        releases.append(TaggedRelease(version, tag, tags[tag], rivals_of(tag, tags)))
    return releases


def refuse_ambiguous(tag: str, tags: Mapping[str, str], where: str) -> None:
    """Refuse ``tag`` when another release tag spells its version at a different commit
    (:func:`rivals_of`)."""
    rivals = rivals_of(tag, tags)
    if rivals:
        other, commit = rivals[0]
        raise AmbiguousVersionError(
            f"{where}: tags {tag} ({tags[tag][:12]}) and {other} ({commit[:12]}) "
            f"both spell version {tag_version(tag)} at different commits; refusing to guess which "
            "release is meant (remove one tag, or pass --revision COMMIT)")


def describe_versions(refs: list[str]) -> str:
    releases = sorted((v, t) for t in refs if (v := tag_version(t)) is not None)
    majors = sorted({r for r in refs if re.fullmatch(r"v\d+", r)}, key=lambda r: int(r[1:]))
    names = [str(v) for v, _ in releases] + [f"{m[1:]} (branch {m})" for m in majors]
    return ", ".join(names) if names else "none (no vX.Y.Z tags or vN branches)"


def releases_around(commit: str, commit_time: int | None, tags: Mapping[str, str],
                    commit_time_of: Callable[[str], int | None],
                    where: str = "the source") -> tuple[str | None, tuple[str, ...]]:
    """(the highest release tag at ``commit``, the release versions not newer than it).

    The second part is only computed for a commit that is not a release (it may cost a
    Hub call per tag, remembered per commit); ``commit_time_of`` gives a commit's time.
    A release tag whose version another tag spells at another commit is refused (the
    commit's wheels would share their name with the other commit's).
    """
    releases = {tag: v for tag in tags if (v := tag_version(tag)) is not None}
    at_commit = sorted((v, tag) for tag, v in releases.items() if tags[tag] == commit)
    if at_commit:
        refuse_ambiguous(at_commit[-1][1], tags, where)
        return at_commit[-1][1], ()
    if commit_time is None:
        return None, ()
    earlier = []
    for tag, version in releases.items():
        when = commit_time_of(tags[tag])
        if when is not None and when <= commit_time:
            earlier.append(version)
    return None, tuple(str(v) for v in sorted(earlier))


def snapshot_version(major: int, commit_time: int, earlier_releases: Sequence[str]) -> str:
    """The version of a build that is not a release: ``<last release>.post0.dev<UTC time>``.

    It sorts after the release it comes from (the newest release of the same major not
    newer than the commit) and before any later release, and it is a development release,
    which pip and uv skip unless asked (``--pre``, or the exact version).
    """
    stamp = int(time.strftime("%Y%m%d%H%M%S", time.gmtime(commit_time)))
    same_major = [Version(v) for v in earlier_releases if Version(v).major == major]
    if same_major:
        return str(Version(f"{max(same_major)}.post0.dev{stamp}"))
    return str(Version(f"{major}.0.0.dev{stamp}"))


def wheel_version(revision: Revision, major: int | None, given: str | None = None) -> str:
    """The wheel version ``V`` for a resolved revision (rules in the module docstring)."""
    if given is not None:
        try:
            return str(Version(given))
        except InvalidVersion:
            raise UsageError(f"'{given}' is not a valid version (PEP 440)") from None
    if revision.release is not None and (v := tag_version(revision.release)) is not None:
        return str(v)
    ref = revision.ref
    if ref is not None and (branch := re.fullmatch(r"v(\d+)", ref)):
        major = int(branch[1])
    if major is None:
        raise UsageError(
            f"cannot tell the kernel's major version at {ref or 'this revision'}: "
            "give the wheel version explicitly (e.g. to-wheel SOURCE 1.2.0 --revision R)"
        )
    if revision.commit_time is None:
        raise UsageError("the source gives no commit time for this revision: give the version")
    return snapshot_version(major, revision.commit_time, revision.earlier_releases)

"""Typed errors. Every message is written for a person and fits on one line;
the CLI prints it as ``kernel-wheels: error: <message>`` and exits with ``exit_code``."""

from __future__ import annotations


class KernelWheelsError(Exception):
    """Base of every error the tool reports to users."""

    exit_code = 1
    #: What the command found before it failed, for its --json document.
    json_details: dict[str, object] | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(KernelWheelsError):
    """The command line or API arguments are wrong."""

    exit_code = 2


class SourceError(KernelWheelsError):
    """A kernel source cannot be read: missing folder, no build/, bad repository."""


class RepoNotFoundError(SourceError):
    pass


class RevisionNotFoundError(SourceError):
    pass


class AuthenticationError(SourceError):
    pass


class NetworkError(SourceError):
    pass


class LfsPointerError(SourceError):
    pass


class UnexpectedAnswerError(SourceError):
    """A Hub (or mirror) answer that is not of the shape a Hub gives: HTML where JSON was
    asked for, a field of the wrong type, a listing entry outside the folder asked for."""


class AmbiguousVersionError(SourceError):
    """Two release tags spell one version (``v1.1.2`` and ``v1.01.2``) on different
    commits: which one a request means cannot be told, so neither is used."""


class UnsafeNameError(SourceError):
    """A name from a remote answer or a source tree (a listing path, a commit id, a ref,
    a file name) that could lead outside the folder it is meant for: refused, never used."""


class LockError(KernelWheelsError):
    """A kernels.lock (or the project beside it) cannot be read, or the Hub's files
    disagree with what it locked."""


class VariantError(KernelWheelsError):
    """A variant name or a variant folder is not usable."""


class SelectionError(KernelWheelsError):
    """Filters selected no variant."""


class MetadataError(KernelWheelsError):
    """metadata.json, licence or python-depends cannot be turned into wheel metadata."""


class OutputError(KernelWheelsError):
    """The output folder cannot take wheels: a file in the way, no permission."""


class OutputExistsError(KernelWheelsError):
    """A different wheel with the same name already exists (use --force)."""


class CheckFailedError(KernelWheelsError):
    """A wheel failed its checks and was not written."""


class BuildError(KernelWheelsError):
    """Compiling a kernel source tree failed."""


class DistributionError(KernelWheelsError):
    """Indexing, publishing or installing wheels failed."""


class IndexConflictError(DistributionError):
    """A different file already exists under the same name on an index or in a site."""


class IndexServerError(DistributionError):
    """A package index cannot be reached, or answered with an error."""


class IndexAuthenticationError(IndexServerError):
    """A package index refused the credentials (or needs some)."""


class NoMatchingWheelError(DistributionError):
    """No wheel on the index fits the target environment."""


class EnvironmentProbeError(DistributionError):
    """The target Python cannot be inspected."""


class ServeError(KernelWheelsError):
    """``kernel-wheels serve`` cannot start (address in use, unreadable htpasswd file)."""


class ListingUnavailableError(ServeError):
    """A kernel's releases cannot be listed and no earlier listing is cached."""


class WheelUnavailableError(ServeError):
    """A listed wheel cannot be made: the Hub is unreachable, or its conversion or
    check failed. ``upstream`` tells a Hub failure (HTTP 502) from ours (HTTP 500)."""

    def __init__(self, message: str, *, upstream: bool) -> None:
        super().__init__(message)
        self.upstream = upstream


class ProvenanceError(KernelWheelsError):
    """A build's provenance does not pass: its signature, its signed digests, or the
    policy (a signature, a trusted publisher or a clean build required). The message
    names the kernel, the variant and the reason."""


class UntrustedPublisherError(ProvenanceError):
    """The policy requires a trusted publisher and the Hub does not (or cannot) say the
    kernel's is one: unlike the build's own facts, an answer that may change."""

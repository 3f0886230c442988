"""What the destination already publishes, judged under the run's policy: a mirror filled
without a policy (or under a looser one) keeps its wheels when a run states a stricter
one, so each published wheel of this run's part is judged by the one verdict
(:func:`kernel_wheels.checks.verdict.judge_wheel`), and each one the policy refuses is a
row of the run (``refused``; with ``--remove-refused``, the finish removes it with its
pages: ``removed``).

A folder destination's wheel is judged where it is; a bucket's is downloaded to a
temporary file, read no further than its record's size (the mirror's own files: the
state says what each is). A wheel that is not the file its record names (another size
or sha256) is refused as it is. Every verdict is kept in the destination, keyed by the
policy's fingerprint and the wheel's sha256 (a pure function of the two: any run, any
shard writes the same object), so a wheel is downloaded and judged once per policy:

    .kernel-wheels/mirror/verdicts/<policy>/<sha256>.pass      the wheel passes
    .kernel-wheels/mirror/verdicts/<policy>/<sha256>.refused   it does not; the reason

A run judges only when it states a policy (any policy option) or is asked to remove
what the policy refuses: the default policy is what the wheels were converted under.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..confine import shown
from ..kernel.selection import VariantFilter
from ..provenance import Policy
from ..reading import open_regular
from .finish import object_keys
from .listing import RepoListing
from .plan import Shard, VersionSelection, in_part
from .progress import Message, Progress
from .state import ROOT, Record, load_state
from .store import Destination

VERDICTS = f"{ROOT}/verdicts"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Refused:
    """A published wheel the policy refuses."""

    record: Record
    reason: str


def judging(policy: Policy, remove: bool) -> bool:
    """Whether a run judges what is published: it states a policy, or asks to remove."""
    return remove or policy != Policy()


def keep_passed(store: Destination, policy: Policy, sha256: str) -> None:
    """A wheel this run converted under ``policy`` passes it: kept, so that no later run
    under the same policy downloads it to judge it."""
    store.put(f"{VERDICTS}/{policy.fingerprint()}/{sha256}.pass", b"")


def published_refusals(store: Destination, listings: Sequence[RepoListing], policy: Policy,
                       selection: VersionSelection, filters: VariantFilter, shard: Shard,
                       progress: Progress) -> list[Refused]:
    """Every wheel of the listed repositories' states, in this run's part (shard,
    filters, ``--versions``), that ``policy`` refuses, in state order."""
    fingerprint = policy.fingerprint()
    prefix = f"{VERDICTS}/{fingerprint}/"
    known = {}
    for key in store.keys(prefix):
        sha256, _, verdict = key[len(prefix):].partition(".")
        if _SHA256.fullmatch(sha256) and verdict in ("pass", "refused"):
            known[sha256] = verdict
    refused = []
    for listing in listings:
        for record in sorted(load_state(store, listing.repo).records.values(), key=lambda r: r.key):
            if not in_part(record.repo, record.version, record.variant, selection, filters, shard):
                continue
            reason = _verdict(store, record, policy, prefix, known.get(record.sha256), progress)
            if reason is not None:
                refused.append(Refused(record, reason))
    return refused


def _verdict(store: Destination, record: Record, policy: Policy, prefix: str, known: str | None,
             progress: Progress) -> str | None:
    """Why ``policy`` refuses the published ``record`` (None: it passes): the kept
    verdict, else the wheel judged now (and the verdict kept)."""
    if known == "pass":
        return None
    if known == "refused":
        raw = store.get(f"{prefix}{record.sha256}.refused")
        if raw is not None:
            return shown(raw.decode("utf-8", "replace").splitlines()[0] if raw.strip() else "refused", 1000)
    progress(Message(f"{record.repo} {record.version} {record.variant}: judging the published "
                     f"{record.wheel} under the policy"))
    from ..checks.verdict import judge_wheel

    wheel_key = object_keys(record.wheel)[0]
    with store.local_copy(wheel_key, record.size) as path:
        if path is None:
            return f"{wheel_key} is missing, though the state records it"
        mismatch = _not_the_recorded_file(path, record)
        if mismatch is not None:
            return f"{wheel_key} {mismatch}"  # the object's fault, not its bytes': not kept
        report = judge_wheel(path, filename=record.wheel, policy=policy)
    reason = None if report.passed else report.first_failure()
    if reason is None:
        store.put(f"{prefix}{record.sha256}.pass", b"")
    else:
        store.put(f"{prefix}{record.sha256}.refused", reason.encode())
    return reason


def _not_the_recorded_file(path: Path, record: Record) -> str | None:
    """Why the file at ``path`` is not the one ``record`` names (None: it is)."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, "a mirror's wheel", ValueError, limit=None) as stream:
        while size <= record.size and (chunk := stream.read(_CHUNK)):
            digest.update(chunk)
            size += len(chunk)
    if size != record.size:
        return f"is not the {record.size} bytes its record says"
    if digest.hexdigest() != record.sha256:
        return "is not the file its record names (another sha256)"
    return None

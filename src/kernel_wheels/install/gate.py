"""The gate a downloaded file passes before any installer sees it: the one verdict
(:func:`kernel_wheels.checks.judge_wheel`) under the policy, for the target environment.

The index is hostile: the file it serves passed only its sha256 against the index's own
page. pip and uv then write every member where its path says, over any file there, and
run some members without being asked (``sitecustomize.py``, ``.pth`` files, scripts in
``bin/``). So the file must pass the verdict ``check`` gives (its members inside the
kernel's package and dist-info, its own files derived again, its provenance under the
policy), and two questions only the target can answer:

- the names it would take must be free there: a package named like a module of the
  standard library, like a top-level name another distribution installed, or like a name
  ``import torch`` looks for (numpy, triton, ... when present: recorded in the target by
  the probe's import hook, install/probe.py) would be imported in that module's place;
- a CUDA or ROCm build must hold code that runs on the target's GPU, by what its own
  binaries hold (the record ``check`` proves), whatever the index said. An index that
  said otherwise is named: what it lists is a hint for choosing, never a reason to trust.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from ..checks import CheckReport, Target, judge_wheel
from ..errors import DistributionError, IndexServerError
from ..kernel.gpu_archs import GpuCode
from ..kernel.gpu_target import Gpu
from ..provenance import Policy
from .environment import Installed

#: How the gate says who takes a name (the verdict's "fit" line ends with it).
STANDARD_LIBRARY = "the standard library"
TORCH_IMPORTS = "torch, whose import looks for it (recorded in the target Python)"


def taken_names(installed: Installed, project: str) -> tuple[tuple[str, str], ...]:
    """Every top-level name the target already takes, and who takes it: the standard
    library, the other distributions installed there (an earlier kernel wheel of
    ``project`` is replaced, not a rival; a distribution of that name that is no kernel
    wheel, such as pip or torch itself, is one), and the names ``import torch`` looks for."""
    taken: dict[str, str] = {}
    for name, version, tops, kernel in installed.owners:
        if kernel and canonicalize_name(name) == project:
            continue  # an earlier release of this kernel: replaced, as an upgrade does
        for top in tops:
            taken.setdefault(top.removesuffix(".py"), f"{name} {version}, installed there")
    for top in installed.torch_imports:
        taken.setdefault(top, TORCH_IMPORTS)
    for top in installed.stdlib:
        taken[top] = STANDARD_LIBRARY
    return tuple(sorted(taken.items()))


def gate(wheel: Path, filename: str, origin: str, policy: Policy, installed: Installed,
         project: str, gpu: Gpu | None, listed: GpuCode | None) -> CheckReport:
    """The verdict on the downloaded file under the name the index listed; refused (one
    line naming the file, where it came from and why) unless it passes. ``listed``: the
    device code the index said the file holds (None: it said nothing); an index that said
    otherwise is named first, whatever else the file fails."""
    report = judge_wheel(wheel, filename=filename, policy=policy,
                         target=Target(gpu, taken_names(installed, project)))
    refuse_contradiction(report, filename, origin, listed)
    if not report.passed:
        raise DistributionError(f"{filename} from {origin} fails kernel-wheels check, so no "
                                f"installer saw it: {report.first_failure()}; nothing was "
                                "installed")
    return report


def held_code(report: CheckReport) -> GpuCode | None:
    """The device code the verdict proved the wheel holds (None: no binary has any)."""
    if report.gpu_code is None:
        return None
    from ..wheel.gpu_record import gpu_code_from

    return gpu_code_from(report.gpu_code)


def refuse_contradiction(report: CheckReport, filename: str, origin: str,
                         listed: GpuCode | None) -> None:
    """An index that listed device code for a file other than what the file holds lied
    (or serves another file than it describes): the file is refused, naming the index."""
    if listed is None:
        return
    held = held_code(report) or GpuCode()
    if frozenset(held.names()) != frozenset(listed.names()):
        raise IndexServerError(f"{origin} lists {filename} as holding {listed.describe()}, but the "
                               f"file it served holds {held.describe()}: the index does not describe "
                               "what it serves; nothing was installed")

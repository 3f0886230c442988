"""The names a kernel wheel is known by, bound to the kernel: its one package is the
kernel's own (the name its metadata.json gives), and its project is named after that
package (or a prefixed form of it, ``to-wheel --dist-name acme-img2gray``).

A wheel of project ``img2gray`` whose package is ``numpy`` installs a ``numpy`` that
every ``import torch`` in the environment then imports: the name a user asked for says
nothing of the code it brings. What the target environment already imports under a name
is install's to judge (install/gate.py); this is the wheel alone.
"""

from __future__ import annotations

from packaging.utils import canonicalize_name

from ..confine import shown
from ..reading import parse_json
from ..wheel.plan import names_package
from .contents import parse_filename
from .facts import WheelContents
from .members import kernel_package
from .report import Finding, Status

CHECK = "names"


def check_names(facts: WheelContents) -> list[Finding]:
    record = facts.provenance
    module = kernel_package(facts)
    if record is None or module is None:
        return []  # not a kernel-wheels wheel / no package: the members rule says so
    project, _, _ = parse_filename(facts.filename)
    findings = []
    named = _metadata_name(facts, record.get("variant_folder"))
    if named is not None and named.replace("-", "_") != module:
        findings.append(Finding(CHECK, Status.FAIL, f"the package is {module}/, but the kernel's "
                                                    f"metadata.json names it {shown(named, 80)} "
                                                    f"(package {shown(named.replace('-', '_'), 80)}/)"))
    if not names_package(project, module):
        findings.append(Finding(CHECK, Status.FAIL, f"the project {project} installs the package "
                                                    f"{module}/: a kernel wheel's project is named "
                                                    f"after its package ({canonicalize_name(module)}, "
                                                    f"or a prefixed form such as "
                                                    f"acme-{canonicalize_name(module)})"))
    if not findings:
        whose = f"the kernel {shown(named, 80)}'s" if named else "the kernel's"
        findings.append(Finding(CHECK, Status.PASS, f"one package, {module}/, {whose} own, "
                                                    f"installed by the project {project}"))
    return findings


def _metadata_name(facts: WheelContents, folder: object) -> str | None:
    """The kernel's name as its packed metadata.json gives it (None: it gives none)."""
    if not isinstance(folder, str):
        return None
    raw = facts.signed.get(f"{folder}/metadata.json")
    if raw is None:
        return None
    try:
        document = parse_json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # the digest and contract checks name a broken metadata.json
    name = document.get("name") if isinstance(document, dict) else None
    return name if isinstance(name, str) else None

"""The names a kernel wheel is known by, bound to the kernel: its one package is the
kernel's own (the name its metadata.json gives), and its project is named after that
package (or a prefixed form of it, ``to-wheel --dist-name acme-img2gray``).

A wheel of project ``img2gray`` whose package is ``numpy`` installs a ``numpy`` that
every ``import torch`` in the environment then imports: the name a user asked for says
nothing of the code it brings. What the target environment already imports under a name
is install's to judge (install/gate.py); this is the wheel alone.

The Hub repository a folder or git source's wheel records (``repo_id``, which
``local-kernels`` maps for ``kernels.get_kernel``) is bound to the kernel too: its name
is the kernel's, and an id the record says is metadata.json's is the one metadata.json
gives (issue #37: ``--repo-id kernels-community/flash-attn`` on any folder made
``get_kernel("kernels-community/flash-attn")`` load that folder).
"""

from __future__ import annotations

from typing import Any

from packaging.utils import canonicalize_name

from ..confine import shown
from ..kernel.repo_id import REPO_ID_BY_HAND, REPO_ID_FROM_BUILD, is_repo_id, kernel_named_by, names_kernel
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
    metadata = _metadata(facts, record.get("variant_folder"))
    named = metadata.get("name") if isinstance(metadata.get("name"), str) else None
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
    findings += _repo_id_findings(record, metadata, named)
    if not findings:
        whose = f"the kernel {shown(named, 80)}'s" if named else "the kernel's"
        mapped = f", recorded as the Hub repository {record['repo_id']} ({record['repo_id_from']})" \
            if record.get("repo_id") is not None else ""
        findings.append(Finding(CHECK, Status.PASS, f"one package, {module}/, {whose} own, "
                                                    f"installed by the project {project}{mapped}"))
    return findings


def _repo_id_findings(record: dict[str, Any], metadata: dict[str, Any],
                      named: str | None) -> list[Finding]:
    """The recorded Hub repository (a folder or git source's) names the kernel, and came
    from where the record says: metadata.json's ``repo-id``, or ``--repo-id``."""
    repo_id, origin = record.get("repo_id"), record.get("repo_id_from")
    if repo_id is None:
        return []
    if not is_repo_id(repo_id):
        return [Finding(CHECK, Status.FAIL, f"the record's repo_id {shown(repr(repo_id), 80)} is not "
                                            "a Hub repository id (org/name)")]
    kernel = named or record.get("kernel_name")
    if not isinstance(kernel, str) or not names_kernel(repo_id, kernel):
        return [Finding(CHECK, Status.FAIL, f"the record maps the Hub repository {repo_id} to the "
                                            f"kernel {shown(str(kernel), 80)}, but that id names "
                                            f"the kernel {kernel_named_by(repo_id)}: local-kernels "
                                            f"would make get_kernel('{repo_id}') load this wheel")]
    if origin == REPO_ID_FROM_BUILD and metadata.get("repo-id") != repo_id:
        said = metadata.get("repo-id")
        return [Finding(CHECK, Status.FAIL, f"the record says its repo_id {repo_id} is metadata.json's, "
                                            f"but metadata.json's repo-id is "
                                            f"{shown(repr(said), 80) if said is not None else 'absent'}")]
    if origin not in (REPO_ID_FROM_BUILD, REPO_ID_BY_HAND):
        return [Finding(CHECK, Status.FAIL, f"the record's repo_id {repo_id} came from "
                                            f"{shown(repr(origin), 80)}: kernel-wheels records "
                                            f"'{REPO_ID_FROM_BUILD}' or '{REPO_ID_BY_HAND}'")]
    return []


def _metadata(facts: WheelContents, folder: object) -> dict[str, Any]:
    """The kernel's packed metadata.json as a document (empty: there is none, or it is
    not a JSON object; the digest and contract checks name a broken metadata.json)."""
    if not isinstance(folder, str):
        return {}
    raw = facts.signed.get(f"{folder}/metadata.json")
    if raw is None:
        return {}
    try:
        document = parse_json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}

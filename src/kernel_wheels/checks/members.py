"""Where a wheel's files would land: only in the kernel's own package and its dist-info.

An installer writes every member of a wheel where its path says, over whatever is there,
and runs some of them without being asked: a top-level ``sitecustomize.py`` or ``*.pth``
file at every interpreter start, ``<name>.data/scripts/*`` and the console scripts of
``entry_points.txt`` as commands in the environment's ``bin/`` (``pip`` among them), and
``<name>.data/data/*`` anywhere under the environment's prefix. A kernel wheel needs none
of that: kernel-wheels writes the variant folder, its loader and guard under
``<module>/`` and its texts under the dist-info folder, nothing else. So a wheel is
refused for any member elsewhere, for a ``.data`` folder, and for declared scripts; the
same rule makes ``install`` refuse such a wheel before an installer sees it.
"""

from __future__ import annotations

from packaging.utils import canonicalize_name

from ..confine import shown
from ..wheel.metadata import PROVENANCE_FILE
from .contents import parse_filename
from .facts import ENTRY_POINTS, WheelContents
from .report import Finding, Status

#: Files Python runs at every start when they lie in site-packages.
_STARTUP = ("sitecustomize", "usercustomize")
_SCRIPT_SECTIONS = ("[console_scripts]", "[gui_scripts]")


def kernel_package(facts: WheelContents) -> str | None:
    """The package the wheel's files belong to: its provenance's ``module`` (``to-wheel
    --dist-name`` publishes ``img2gray`` as ``acme-img2gray``), else the distribution
    name as an import name. None when the provenance names no importable package."""
    provenance = facts.provenance
    if provenance is not None and "module" in provenance:
        module = provenance.get("module")
        folder = provenance.get("variant_folder")
        if not isinstance(module, str) or not module.isidentifier() or not module.isascii():
            return None
        if isinstance(folder, str) and folder.split("/", 1)[0] != module:
            return None
        return module
    name, _, _ = parse_filename(facts.filename)
    return canonicalize_name(name).replace("-", "_")


def check_members(facts: WheelContents) -> list[Finding]:
    if facts.dist_info is None:
        return []  # check_metadata_and_wheel already fails a wheel without METADATA
    module = kernel_package(facts)
    if module is None:
        return [Finding("members", Status.FAIL,
                        f"{facts.dist_info}/{PROVENANCE_FILE} names no importable package "
                        "(its module and variant_folder disagree or are not identifiers)")]
    findings = []
    if module in _STARTUP:
        findings.append(Finding("members", Status.FAIL, f"the package {module}/ is imported by "
                                                        "Python at every start"))
    for name in facts.members:
        top, _, rest = name.partition("/")
        if top == facts.dist_info or (top == module and rest):
            continue
        # The name is the wheel author's text: shown escaped (no terminal control).
        findings.append(Finding("members", Status.FAIL, _outside(shown(name, 200), module)))
    findings += _scripts(facts)
    if not findings:
        findings.append(Finding("members", Status.PASS,
                                f"every file is inside {module}/ or {facts.dist_info}/"))
    return findings


def _outside(name: str, module: str) -> str:
    top, slash, rest = name.partition("/")
    where = f"outside the kernel's package {module}/ and its dist-info"
    if top.endswith(".data") and slash:
        kind = rest.split("/", 1)[0]
        if kind == "scripts":
            return f"{name} is a script the installer would put in the environment's bin/ ({where})"
        return f"{name} is a .data/{kind} file the installer would place by its scheme ({where})"
    if not slash and top.endswith(".pth"):
        return f"{name} is a .pth file, which Python runs at every start ({where})"
    if not slash and top.removesuffix(".py") in _STARTUP:
        return f"{name} is a module Python runs at every start ({where})"
    if not slash:
        return f"{name} is a top-level module ({where})"
    if top.endswith(".dist-info"):
        return f"{name} belongs to another distribution's dist-info ({where})"
    return f"{name} would be written into {top}/, another package ({where})"


def _scripts(facts: WheelContents) -> list[Finding]:
    """Console and GUI scripts of entry_points.txt: the installer writes them to ``bin/``
    (a script named ``pip`` replaces the environment's pip)."""
    text = facts.texts.get(ENTRY_POINTS)
    if text is None:
        if f"{facts.dist_info}/{ENTRY_POINTS}" in facts.members:
            return [Finding("members", Status.FAIL, f"{facts.dist_info}/{ENTRY_POINTS} is too "
                                                    "large or unreadable to be checked for scripts")]
        return []
    sections = {line.strip().lower() for line in text.splitlines()}
    declared = [s for s in _SCRIPT_SECTIONS if s in sections]
    if not declared:
        return []
    return [Finding("members", Status.FAIL,
                    f"{facts.dist_info}/{ENTRY_POINTS} declares {' and '.join(declared)}: the "
                    "installer would write commands into the environment's bin/")]

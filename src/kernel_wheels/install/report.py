"""What an install run reports: its JSON document, and, when a kernel has no fitting
wheel, the error and each file's reason for not fitting."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import NoMatchingWheelError
from .core import DRY_RUN_FOLDER, Choice, InstallResult


def install_document(results: Sequence[InstallResult]) -> dict[str, object]:
    """``install --json``: one kernel's decision is the document; several kernels' are a
    list of them."""
    documents = [{**result.choice.to_dict(), "command": list(result.command),
                  "index_env": list(result.index_env), "installed": result.installed}
                 for result in results]
    return documents[0] if len(documents) == 1 else {"kernels": documents}


@dataclass(frozen=True)
class Unfit:
    """A kernel nothing on the index fits: the error (carrying the run's JSON document)
    and the lines shown before it, one per file with its reason (none when only the GPU
    ruled the builds out: the error names the GPU and what each build holds)."""

    error: NoMatchingWheelError
    rejections: tuple[str, ...]


def unfit(results: Sequence[InstallResult], *, backend: str | None, several: bool) -> Unfit | None:
    """The first kernel of ``results`` that has no fitting wheel, if any. ``backend``: the
    --backend asked for; ``several``: whether more than one kernel was asked for (then
    nothing was installed, and the error says so)."""
    choice = next((result.choice for result in results if result.choice.chosen is None), None)
    if choice is None:
        return None
    if choice.gpu is not None and (line := choice.gpu.no_fit()):
        found = Unfit(NoMatchingWheelError(f"no wheel of {choice.project} fits: {line}"), ())
    else:
        found = Unfit(NoMatchingWheelError(
            f"no wheel of {choice.project} fits {choice.environment.describe()}: "
            f"{len(choice.decisions)} file(s) on the index, each rejected above"
            + _backend_hint(choice, backend) + ("; nothing was installed" if several else "")),
            tuple(f"rejected {d.file.filename}: {d.rejected}" for d in choice.decisions))
    found.error.json_details = install_document(results)  # one document: the decisions and the error
    return found


def _backend_hint(choice: Choice, backend: str | None) -> str:
    """Nothing fits a GPU torch: point at ``--backend cpu`` only when a CPU build fits this
    torch (version, C++ ABI, Python, platform); CPU builds that do not are named as such."""
    target = choice.environment.target
    if backend is not None or target is None or target.backend == "cpu":
        return ""
    if choice.cpu_fit is not None:
        return (f" (a CPU build fits this torch: --backend cpu runs it on this "
                f"{target.backend_tag} torch)")
    builds = sorted({d.wheel.variant.name for d in choice.decisions
                     if d.wheel is not None and d.wheel.variant is not None
                     and d.wheel.variant.backend == "cpu"})
    if not builds:
        return ""
    several = len(builds) > 1
    return (f" (the CPU build{'s' if several else ''} there ({', '.join(builds)}) "
            f"{'do' if several else 'does'} not fit this torch either)")


def shell_line(result: InstallResult) -> str:
    """The installer's command as one line a POSIX shell runs as it stands: its
    variables (``NAME=value``) and every argument quoted; a dry run's folder is
    ``"$KW_INSTALL_TMP"`` (:data:`~.core.DRY_RUN_FOLDER`), expanded by the shell."""
    words = []
    for assignment in result.index_env:
        name, _, value = assignment.partition("=")
        words.append(f"{name}={shlex.quote(value)}")
    for argument in result.command:
        if argument == DRY_RUN_FOLDER or argument.startswith(DRY_RUN_FOLDER + "/"):
            rest = argument[len(DRY_RUN_FOLDER):]
            words.append(f'"{DRY_RUN_FOLDER}"' + (shlex.quote(rest) if rest else ""))
        else:
            words.append(shlex.quote(argument))
    return " ".join(words)

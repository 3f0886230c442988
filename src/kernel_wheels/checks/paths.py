"""The wheels a command line names: wheel files, or folders holding them. A path that
does not exist, or a folder with nothing to check, is a usage error."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError


def wheels_in(paths: Iterable[Path]) -> list[Path]:
    """``check``'s rule: each file as given, each folder's own ``*.whl`` files (not its
    subfolders'); a folder without any is an error."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.glob("*.whl"))
            if not inside:
                raise UsageError(f"{path} is a folder with no .whl files")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    return found


def wheels_under(paths: Iterable[Path]) -> list[Path]:
    """``verify``'s rule: each file as given, every ``*.whl`` anywhere below each folder
    (a static index site, an output folder); finding none at all is an error."""
    given = list(paths)
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            found += sorted(path.rglob("*.whl"))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    if not found:
        raise UsageError(f"no .whl files in {', '.join(map(str, given))}")
    return found

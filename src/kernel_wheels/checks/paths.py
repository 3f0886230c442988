"""The wheels a command line names: wheel files, or folders holding them. A path that
does not exist, or a folder with nothing to check, is a usage error."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError
from ..reading import not_a_file


def _not_a_wheel_file(path: Path) -> str:
    """A named path that is neither a folder nor a regular file: missing, or a FIFO or
    device (which would hang or never end the read), said by what it is."""
    why = not_a_file(path)
    return "does not exist" if why == "no such file" else f"is {why}; refusing to read it"


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
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path} {_not_a_wheel_file(path)}")
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
            raise UsageError(f"{path} {_not_a_wheel_file(path)}")
    if not found:
        raise UsageError(f"no .whl files in {', '.join(map(str, given))}")
    return found

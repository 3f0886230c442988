"""``install -r FILE``: a requirements file of kernels, read as pip reads the lines it
can mean here (a requirement per line, ``#`` comments, blank lines, ``\\`` line
continuations, ``-r`` of another file). Options that change where pip looks (``-i``,
``--extra-index-url``, ``-f``...) or what it installs (``-e``, URLs, hashes) are refused
by line: kernel-wheels reads indexes from its own options and pip's configuration, and
installs only the kernel build it chose."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..reading import read_text
from ..redaction import quoted


def read_requirements(path: Path, _seen: tuple[Path, ...] = ()) -> list[str]:
    """The requirements of ``path`` (and of the files it includes with ``-r``), in order."""
    try:
        text = read_text(path, "-r", UsageError)
    except OSError as exc:
        raise UsageError(f"-r {path}: cannot read it ({exc.strerror or exc})") from None
    found: list[str] = []
    logical, first = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw if raw.lstrip().startswith("#") else raw.split(" #", 1)[0]
        line = line.strip()
        if not logical:
            first = number
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical = (logical + line).strip()
        if logical and not logical.startswith("#"):
            found += _line(path, first, logical, _seen)
        logical = ""
    return found


def _line(path: Path, number: int, line: str, seen: tuple[Path, ...]) -> list[str]:
    where = f"{path}:{number}"
    if line.startswith(("-r ", "--requirement ", "-r\t")):
        included = (path.parent / line.split(None, 1)[1].strip()).resolve()
        if included in seen or included == path.resolve():
            raise UsageError(f"{where}: {quoted(str(included))} includes itself")
        return read_requirements(included, (*seen, path.resolve()))
    if line.startswith("-"):
        option = quoted(line.split()[0], 60)
        raise UsageError(f"{where}: {option} is pip's option, which kernel-wheels install does "
                         "not take from a requirements file: give it on the command line "
                         "(indexes: -i/--extra-index-url/-f) or leave it out")
    if "://" in line or line.startswith((".", "/")):
        raise UsageError(f"{where}: '{quoted(line)}' is a URL or path; give kernels by name "
                         "and version")
    return [line]

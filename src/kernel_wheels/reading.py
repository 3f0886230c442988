"""The one reader of files, records and answers from outside: bounded, typed, never a hang.

Every file the tool reads that it did not write itself in this run comes through here:
files the user names (``--policy``, ``install -r`` and the files it includes,
``--trusted-root``, a lock and its ``pyproject.toml``, ``build.toml``,
``--kernels-file``), records found on disk (a mirror's state, a site's state and yanks,
a variant's ``metadata.json``, serve's cache records) and the JSON or TOML of remote
answers. Three bounds hold for all of them:

- **a regular file** (:func:`read_regular`): opened without blocking, so that a FIFO
  with no writer is refused instead of waited on for ever, and judged by ``fstat``
  before a byte is read (a FIFO, ``/dev/zero``, a socket or a folder is one line);
- **a size cap**: the read stops one byte past the cap whatever the size said (a file
  that grows, a ``/proc`` file that says 0);
- **a nesting cap** for JSON and TOML (:func:`parse_json`, :func:`parse_toml`), checked
  *before* the parser recurses: ``json`` recurses once per level in C and ``tomllib``
  several frames per level in Python, with no depth option, so a file nested 5,000 deep
  was a RecursionError (a traceback, or in a thread a dead worker). The brackets outside
  strings and comments are counted first, and a TOML document's tables (``a.b.c...``,
  which ``tomllib`` builds without recursing) are measured after parsing, without
  recursion.

A refusal is ``error(message)``, one line naming what the file is (``the policy file``)
and its path, escaped.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .terminal import shown

#: The most a small file of outside data (a lock, a pyproject.toml, a build.toml, a
#: metadata.json, a policy, a requirements file, a record) may hold: none comes near it.
MAX_SMALL_FILE = 16 << 20
#: The deepest a JSON or TOML document from outside may nest (arrays, objects, tables).
#: Real ones nest under 10 (a lock's kernel_depends 2 per level); far below the depth
#: at which either parser would exhaust Python's recursion limit (about 300 for tomllib).
MAX_DEPTH = 100


class NestingError(ValueError):
    """A JSON or TOML text nested deeper than :data:`MAX_DEPTH` (a ``ValueError``, as the
    parsers' own errors are, so that a caller's handler of bad JSON handles it too)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested too deeply (more than {limit} levels)")


def open_regular(path: Path, what: str, error: Callable[[str], Exception],
                 limit: int | None = MAX_SMALL_FILE) -> BinaryIO:
    """``path`` (links followed) opened for reading, which must be a regular file of at
    most ``limit`` bytes (None: any size), or ``error(message)`` with one line naming
    ``what`` it is. For a file read as a stream (a wheel, a binary): the caller reads it
    to its size; :func:`read_regular` reads a small file whole.

    Opened without blocking (``O_NONBLOCK``): a FIFO with no writer would otherwise hang
    the open for ever; what was opened is then judged by ``fstat`` (a FIFO, a device such
    as ``/dev/zero``, a socket or a folder is refused before a byte is read).
    ``FileNotFoundError`` and other ``OSError`` reach the caller as they are: it knows
    what a missing file means there."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {shown(str(path), 300)} is not a regular file (a FIFO, a device, "
                        "a socket or a folder); refusing to read it")
        if limit is not None and info.st_size > limit:
            raise error(f"{what} {shown(str(path), 300)} is {info.st_size} bytes, more than the "
                        f"{limit} bytes such a file may hold; refusing to read it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, what: str, error: Callable[[str], Exception],
                 limit: int = MAX_SMALL_FILE) -> bytes:
    """The bytes of ``path``, opened by :func:`open_regular` (a regular file of at most
    ``limit`` bytes, or ``error(message)``), read whole. The read stops at ``limit + 1``
    bytes whatever the size said (a file that grows while it is read, or one of /proc's
    that says 0). ``OSError`` reaches the caller as it is."""
    with open_regular(path, what, error, limit) as stream:
        chunks: list[bytes] = []
        size = 0
        while chunk := stream.read(min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise error(f"{what} {shown(str(path), 300)} holds more than the {limit} bytes such "
                            "a file may hold; refusing to read it")
        return b"".join(chunks)


def not_a_file(path: Path) -> str:
    """Why ``path`` is no file to read, for a message: ``no such file``, or what it is
    (a FIFO, a device, a socket, a folder), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "no such file" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or
            stat.S_ISBLK(mode) else "not a regular file")
    return f"{kind}, not a regular file" if kind != "not a regular file" else kind


def read_text(path: Path, what: str, error: Callable[[str], Exception],
              limit: int = MAX_SMALL_FILE) -> str:
    """:func:`read_regular`'s bytes as UTF-8; text that is not UTF-8 is ``error``."""
    data = read_regular(path, what, error, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {shown(str(path), 300)} is not UTF-8 text ({shown(str(exc), 120)})") \
            from None


def read_json(path: Path, what: str, error: Callable[[str], Exception],
              limit: int = MAX_SMALL_FILE, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in ``path``, read by :func:`read_regular` and parsed by
    :func:`parse_json`; a document that is not JSON (or nests too deeply) is ``error``."""
    data = read_regular(path, what, error, limit)
    try:
        return parse_json(data, max_depth)
    except ValueError as exc:
        raise error(f"{what} {shown(str(path), 300)} is not valid JSON: {shown(str(exc), 160)}") \
            from None


def read_toml(path: Path, what: str, error: Callable[[str], Exception],
              limit: int = MAX_SMALL_FILE, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The TOML document in ``path``, as :func:`read_json` reads JSON."""
    text = read_text(path, what, error, limit)
    try:
        return parse_toml(text, max_depth)
    except ValueError as exc:
        raise error(f"{what} {shown(str(path), 300)} is not valid TOML: {shown(str(exc), 160)}") \
            from None


# --- parsing, nesting checked first ---------------------------------------------------------

# TOML's four kinds of string and its comments, longest forms first.
_TOML_SKIPPED = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"{3,5}'
                           r"|'''(?:[^']|'(?!''))*'{3,5}"
                           r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
                           r"|'[^'\n]*'"
                           r"|#[^\n]*", re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
# What cannot be part of a dotted key (bare parts, dots, blanks; quoted parts are gone
# with the strings): a run between two of them holds one key's dots at most.
_NOT_KEY = re.compile(r"[^A-Za-z0-9_\-. \t]+")
#: Of a JSON text's bytes, all but brackets and quotes (what bytes.translate deletes).
_NOT_JSON_SYNTAX = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")


def _deeper(brackets: bytes, limit: int) -> bool:
    """Whether a string of brackets alone (``{}`` read as ``[]``) nests deeper than
    ``limit``: it loses its innermost pairs once per level, at C speed, no recursion."""
    brackets = brackets.translate(_AS_SQUARE)
    for _level in range(limit):
        shorter = brackets.replace(b"[]", b"")
        if shorter == brackets:  # no pair left: what stays open, the parser still enters
            return brackets.count(b"[") > limit
        brackets = shorter
    return b"[]" in brackets


def json_nests_deeper(text: str, limit: int) -> bool:
    """Whether the arrays and objects of the JSON ``text`` nest deeper than ``limit``,
    brackets inside strings left out. A few C passes over its bytes: a 9 MB answer
    costs a tenth of what parsing it does."""
    if text.count("[") + text.count("{") <= limit:
        return False  # cannot nest deeper than it has brackets
    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:  # escaped backslashes, then escaped quotes: neither ends a string
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Brackets and quotes alone; two quotes side by side close and open strings (or
    # enclose nothing kept): dropping them leaves what is inside strings inside.
    kept = raw.translate(None, _NOT_JSON_SYNTAX).replace(b'""', b"")
    if b'"' in kept:  # strings that hold brackets: keep only what is between them
        kept = b"".join(kept.split(b'"')[::2])
    return _deeper(kept, limit)


def toml_nests_deeper(text: str, limit: int) -> bool:
    """Whether the arrays and inline tables of the TOML ``text`` nest deeper than
    ``limit`` (strings and comments left out; a table header counts one or two), or a
    dotted key (``a.b.c = 1``, ``[a.b.c]``) has more than ``limit`` parts: tomllib
    builds those without recursing, but checks every prefix of the key, so a key of
    100,000 parts took more memory than the machine had."""
    brackets, dots = text.count("[") + text.count("{"), text.count(".")
    if brackets <= limit and dots <= limit:
        return False
    outside = _TOML_SKIPPED.sub("", text)
    if dots > limit and max(chain.count(".") for chain in _NOT_KEY.split(outside)) > limit:
        return True
    return brackets > limit and _deeper(_NOT_BRACKET.sub("", outside).encode("ascii"), limit)


def parse_json(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)`` after proving it nests at most ``max_depth`` deep. Raises
    only ``ValueError``: ``json.JSONDecodeError``, ``UnicodeDecodeError`` (bytes that are
    not in JSON's encodings) or :class:`NestingError`."""
    text = data if isinstance(data, str) else bytes(data).decode(json.detect_encoding(data))
    if json_nests_deeper(text, max_depth):
        raise NestingError(max_depth)
    try:
        return json.loads(text)
    except RecursionError:  # the pre-scan's limit is far below this: a guard, not a path
        raise NestingError(max_depth) from None


def parse_toml(text: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """``tomllib.loads(text)`` after proving its arrays and inline tables nest at most
    ``max_depth`` deep, and its tables (``[a.b.c]``, ``a.b.c = 1``) too once parsed.
    Raises only ``ValueError``: ``tomllib.TOMLDecodeError`` or :class:`NestingError`."""
    if toml_nests_deeper(text, max_depth):
        raise NestingError(max_depth)
    try:
        document = tomllib.loads(text)
    except RecursionError:
        raise NestingError(max_depth) from None
    if deeper_than(document, max_depth):
        raise NestingError(max_depth)
    return document


def deeper_than(value: object, limit: int) -> bool:
    """Whether the lists and dicts of ``value`` nest deeper than ``limit`` (walked
    without recursion)."""
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False

"""The rules of issue #39 as a check over the package's source (like the import contract):
every outside read goes through ``kernel_wheels.reading``, every printed line through
the CLI's ``out``/``stderr`` (``kernel_wheels.terminal``), every paginated listing through
``kernel_wheels.paging.follow``. :func:`violations` lists what breaks them, by file,
function and call; tests/test_mechanisms.py holds the justified exceptions and proves the
check fails on planted code."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: The mechanisms themselves: the only modules that may call what the rules keep to them.
MECHANISMS = frozenset({"reading.py", "terminal.py", "paging.py"})

_PARSERS = {("json", "load"), ("json", "loads"), ("tomllib", "load"), ("tomllib", "loads")}
_READ_METHODS = {"read_text", "read_bytes"}
_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
_LOGGERS = {"log", "logger", "_log", "_logger", "logging", "LOG", "LOGGER"}
#: Calls that ask a remote listing for a page: the S3 API's, huggingface_hub's own paginated
#: listings, and the ``Link: next`` of an HTTP answer.
_LISTING_CALLS = {"list_objects_v2", "list_objects", "get_paginator", "paginate", "list_repo_tree",
                  "list_models", "list_repo_files", "list_datasets", "list_spaces", "list_repo_commits"}


#: Reads and writes to the terminal by their full names.
_DIRECT = {"io.open", "builtins.open", "sys.stdout.write", "sys.stderr.write", "sys.stdout.writelines",
           "sys.stderr.writelines"}


@dataclass(frozen=True, order=True)
class Violation:
    """One call that bypasses a mechanism: the file (relative to the package), the
    function it is in (``Class.method``; ``<module>`` at the top), and what it calls."""

    path: str
    function: str
    call: str
    line: int = 0

    @property
    def key(self) -> tuple[str, str, str]:
        return self.path, self.function, self.call


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def _reads_as_text_or_bytes(call: ast.Call) -> bool:
    """``x.open()``, ``x.open("rb")``: opened for reading (a zip member, ``zf.open(info)``,
    and a write, ``x.open("wb")``, are not)."""
    if not call.args:
        mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
        return mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                and "r" in mode.value and not set("wxa+") & set(mode.value))
    first = call.args[0]
    return (isinstance(first, ast.Constant) and isinstance(first.value, str)
            and "r" in first.value and not set("wxa+") & set(first.value))


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.found: list[Violation] = []
        self.parser_names: set[str] = set()  # from json import loads

    def _add(self, call: str, node: ast.AST) -> None:
        self.found.append(Violation(self.path, ".".join(self.scope) or "<module>", call,
                                    getattr(node, "lineno", 0)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802 (ast's name)
        for alias in node.names:
            if (node.module, alias.name) in _PARSERS:
                self.parser_names.add(alias.asname or alias.name)

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            self._check_listing(node)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped  # noqa: N815

    def _check_listing(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A function that asks a listing for a page must not loop itself: the loop over
        pages is :func:`kernel_wheels.paging.follow`'s (the function is its ``fetch``)."""
        own = list(_own_nodes(function))
        asks = [n for n in own if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in _LISTING_CALLS]
        # an HTTP answer's ``Link: next`` (httpx's ``response.links``)
        asks += [n for n in own if isinstance(n, ast.Attribute) and n.attr == "links"
                 and "response" in _dotted(n.value)]
        loops = [n for n in own if isinstance(n, (ast.While, ast.For, ast.AsyncFor))
                 and not (isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call)
                          and _dotted(n.iter.func).split(".")[-1] == "follow")]
        if asks and loops:
            self._add("a loop over a remote listing", loops[0])

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        func = node.func
        name = _dotted(func)
        if isinstance(func, ast.Name):
            if func.id == "open":
                self._add("open", node)
            elif func.id == "print":
                self._add("print", node)
            elif func.id in self.parser_names:
                self._add(func.id, node)
        elif isinstance(func, ast.Attribute):
            owner = _dotted(func.value)
            if (owner, func.attr) in _PARSERS:
                self._add(name, node)
            elif func.attr in _READ_METHODS:
                self._add(f".{func.attr}", node)
            elif func.attr == "open" and owner not in ("os", "io", "tarfile", "zipfile", "webbrowser") \
                    and _reads_as_text_or_bytes(node):
                self._add(".open", node)
            elif name in _DIRECT:
                self._add(name, node)
            elif func.attr in _LOG_METHODS and owner.split(".")[-1] in _LOGGERS:
                self._add(f"logging: {name}", node)
        self.generic_visit(node)


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of functions defined inside it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def violations_in(source: str, path: str) -> list[Violation]:
    """The calls of one module's ``source`` (``path``: relative to the package) that
    bypass a mechanism."""
    if Path(path).name in MECHANISMS and "/" not in path:
        return []
    visitor = _Visitor(path)
    visitor.visit(ast.parse(source, filename=path))
    return sorted(visitor.found)


def violations(package: Path) -> list[Violation]:
    """Every such call in the package at ``package`` (``src/kernel_wheels``)."""
    found: list[Violation] = []
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package).as_posix()
        found += violations_in(module.read_text("utf-8"), relative)
    return found

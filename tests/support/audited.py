"""``python tests/support/audited.py ARGS...``: kernel-wheels ARGS, watched (issue #30).

The tests start the tool through this file (``run_cli``): before the tool's first import
it installs an audit hook (``sys.addaudithook``, PEP 578) that sees every child process
the tool starts (``subprocess.Popen``, ``os.posix_spawn``, ``os.exec*``, ``os.system``)
and writes a line to the file ``KW_AUDIT_LOG`` names when a secret of
``KW_AUDIT_SECRETS`` (a JSON list) is in a child's argv, or, for a compiler or linker,
in its environment. Both variables are removed before the tool runs, so neither it nor
its children see them. The hook cannot be removed by the code it watches; it runs in
this process only (children of children are not watched).
"""

from __future__ import annotations

import json
import os
import runpy
import sys

#: Programs that compile or link: they must run with an environment holding no secret.
COMPILERS = frozenset({"cc", "c++", "gcc", "g++", "clang", "clang++", "nvcc", "hipcc", "icpx", "ld",
                       "ld.gold", "ld.lld", "cicc", "ptxas", "fatbinary", "nvlink", "ninja", "cmake"})
_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.system"})


def _words(value: object) -> list[str]:
    if isinstance(value, (str, bytes, os.PathLike)):
        return [os.fsdecode(value)]
    if isinstance(value, (list, tuple)):
        return [os.fsdecode(v) for v in value if isinstance(v, (str, bytes, os.PathLike))]
    return []


def _is_compiler(argv: list[str]) -> bool:
    name = os.path.basename(argv[0]) if argv else ""
    return name in COMPILERS or any(name.endswith("-" + c) for c in ("gcc", "g++", "ld", "cc", "c++"))


def _library_lookup() -> bool:
    """Whether the child is started by ``ctypes.util.find_library``: it runs gcc and ld to
    find where a system library lies (keyring's backends do, on import), compiling nothing
    of a kernel's; the rule is about the compilers a build runs."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("ctypes", "util.py")):
            return True
        frame = frame.f_back
    return False


def main() -> None:
    log = os.environ.pop("KW_AUDIT_LOG", None)
    secrets = [s for s in json.loads(os.environ.pop("KW_AUDIT_SECRETS", "[]")) if s]

    def found(kind: str, argv: list[str]) -> None:
        assert log is not None
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{kind}: {os.path.basename(argv[0]) if argv else '?'}\n")

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event not in _EVENTS:
            return
        if event == "os.system":
            argv, env = _words(args[0]), None
        elif event == "subprocess.Popen":  # (executable, args, cwd, env)
            argv, env = _words(args[1]), args[3]
        else:  # os.posix_spawn and os.exec: (path, argv, env)
            argv, env = _words(args[1]) or _words(args[0]), args[2]
        text = "\0".join(argv)
        if any(secret in text for secret in secrets):
            found("a secret in the argv of", argv)
        if _is_compiler(argv) and not _library_lookup():
            values = env if isinstance(env, dict) else os.environ
            if any(secret in os.fsdecode(value) for value in values.values() for secret in secrets):
                found("a secret in the environment of", argv)

    if log and secrets:
        sys.addaudithook(hook)
    sys.argv = ["kernel-wheels", *sys.argv[1:]]
    sys.path[0] = os.getcwd()  # as `python -m kernel_wheels` has it, not this file's folder
    runpy.run_module("kernel_wheels", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

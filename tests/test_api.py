"""The public API (docs/api.md): every command's entry point is a typed, documented name
of ``kernel_wheels``, and docs/api.md's examples run as written.

The examples are a tour: they run in the order the page gives them, each in a Python of
its own, in one folder (``to-wheel`` writes ``wheels/``, which ``check``, ``index``,
``publish`` and ``install`` then use), against the local Hub (olah, serving the sample
kernel as drbh/img2gray), a pypiserver for ``publish``, and the sample kernel's source
for ``build``. Each test runs the examples before its own first, once."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
import signal
import subprocess
import sys
import types
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kernel_wheels
from support.helpers import ROOT, SAMPLE, Olah, free_port, wait_for
from support.servers_index import IndexServer, pip_env, pypiserver

API_DOC = ROOT / "docs" / "api.md"
#: The commands whose entry points the API must name (completion is argcomplete's).
COMMANDS = ("to-wheel", "variants", "versions", "check", "verify", "index", "yank", "publish",
            "install", "local-kernels", "mirror", "serve", "build")
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"


# --- the names ----------------------------------------------------------------------------


def _every_module_imported() -> None:
    """Import every module of the package, so that each subpackage is an attribute of
    ``kernel_wheels`` (a public name equal to a subpackage's would then be shadowed)."""
    for info in pkgutil.walk_packages(kernel_wheels.__path__, "kernel_wheels."):
        if info.name != "kernel_wheels.__main__":
            importlib.import_module(info.name)


@pytest.mark.parametrize("name", kernel_wheels.__all__)
def test_each_public_name_is_what_it_says(name: str) -> None:
    """Every name resolves, to a function or class (never to a subpackage of the same
    name), documented, with every parameter and the result of a function typed."""
    _every_module_imported()
    value = getattr(kernel_wheels, name)
    assert not isinstance(value, types.ModuleType), f"{name} is shadowed by the subpackage"
    assert callable(value), name
    assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    if inspect.isfunction(value):
        signature = inspect.signature(value)
        untyped = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
        assert not untyped, f"{name}: untyped parameters {untyped}"
        assert signature.return_annotation is not inspect.Signature.empty, f"{name}: untyped result"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'to_wheel'"):
        kernel_wheels.to_wheel  # noqa: B018


def test_the_api_page_names_every_command_and_every_public_name() -> None:
    text = API_DOC.read_text()
    table = {row.split("|")[1].strip().strip("`") for row in text.splitlines() if row.startswith("| `")}
    assert set(COMMANDS) <= table
    missing = [name for name in kernel_wheels.__all__ if not re.search(rf"\b{name}\b", text)]
    assert missing == []
    assert "(docs/api.md)" in (ROOT / "README.md").read_text()


# --- the tour -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    title: str  # the heading above it: the command it shows
    code: str


def examples() -> list[Example]:
    """docs/api.md's ``python`` blocks, each with the ``###`` heading above it."""
    found, title = [], ""
    for match in re.finditer(r"^### (?P<title>[^\n]+)$|^```python\n(?P<code>.*?)^```$", API_DOC.read_text(),
                             re.MULTILINE | re.DOTALL):
        if match["title"]:
            title = match["title"].strip()
        else:
            found.append(Example(title, match["code"]))
    return found


@dataclass
class Tour:
    folder: Path
    env: dict[str, str]
    olah: Olah
    index: IndexServer
    done: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def run(self, example: Example) -> subprocess.CompletedProcess[str]:
        """The example and every one above it (once each), in the tour's folder."""
        for before in examples():
            if before.title not in self.done:
                self.done[before.title] = _run(before, self)
            if before == example:
                return self.done[before.title]
        raise AssertionError(f"{example.title} is not on the page")


def _run(example: Example, tour: Tour) -> subprocess.CompletedProcess[str]:
    if "run_server(" in example.code:
        return _run_server(example, tour)
    proc = subprocess.run([sys.executable, "-c", example.code], cwd=tour.folder, env=tour.env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"the {example.title} example failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _run_server(example: Example, tour: Tour) -> subprocess.CompletedProcess[str]:
    """The serve example runs until it is stopped: on a free port (its only change),
    until its index answers, then stopped with SIGTERM as a service manager would; it
    ends normally (0)."""
    port = free_port()
    assert example.code.count("port=8000") == 1
    code = example.code.replace("port=8000", f"port={port}")
    log = tour.folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-c", code], cwd=tour.folder, env=tour.env,
                                   stdout=subprocess.PIPE, stderr=out, text=True)
        try:
            wait_for(f"http://127.0.0.1:{port}/healthz", process, log)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/simple/img2gray/", timeout=60) as answer:
                page = answer.read().decode()
        finally:
            process.send_signal(signal.SIGTERM)
            stdout, _ = process.communicate()
    stderr = log.read_text()
    assert process.returncode == 0, f"serve ended with {process.returncode}:\n{stderr}"
    return subprocess.CompletedProcess(process.args, 0, stdout + page, stderr)


@pytest.fixture(scope="module")
def tour(olah: Olah, cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    """An empty folder holding only a link to the sample kernel's source (the build
    example's input; ``cpu_build`` built it once already, so its objects are cached)."""
    folder = tmp_path_factory.mktemp("tour")
    (folder / "sample-kernel").symlink_to(SAMPLE)
    with pypiserver(tmp_path_factory.mktemp("pypiserver")) as index:
        env = {**pip_env(), "HF_ENDPOINT": olah.endpoint, "HF_HOME": str(folder.parent / "hf-home"),
               "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TWINE_REPOSITORY_URL": index.upload_url,
               "TWINE_USERNAME": index.username, "TWINE_PASSWORD": index.password}
        env.pop("VIRTUAL_ENV", None)  # install's and local-kernels' Python: the one running them
        yield Tour(folder, env, olah, index)


def _wheels(tour: Tour) -> list[str]:
    return sorted(path.name for path in (tour.folder / "wheels").glob("*.whl"))


def _to_wheel(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    wheels = _wheels(tour)
    assert len(wheels) == 2 and all(name.startswith("img2gray-1.1.2+") for name in wheels)
    assert sorted(line.split()[0] for line in proc.stdout.splitlines() if line.endswith(" True")) == wheels


def _variants(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    commit, names = proc.stdout.strip().split(" ", 1)
    assert len(commit) == 40 and names == f"['{CPU_VARIANT}']"


def _versions(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    lines = proc.stdout.splitlines()
    assert [line.split()[:3] for line in lines] == [["release", "1.1.2", "v1.1.2"],
                                                    ["release", "1.1.1", "v1.1.1"], ["major", "1", "v1"]]


def _check(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.stdout.splitlines() == [f"PASS {name}" for name in _wheels(tour)]


def _verify(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.stdout.splitlines() == [f"{name} unsigned" for name in _wheels(tour)]


def _index(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    page = json.loads((tour.folder / "site" / "simple" / "img2gray" / "index.json").read_text())
    assert sorted(f["filename"] for f in page["files"]) == _wheels(tour)


def _yank(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.stdout.strip() == "img2gray 1.1.2 yanked"
    page = json.loads((tour.folder / "site" / "simple" / "img2gray" / "index.json").read_text())
    assert {f["yanked"] for f in page["files"]} == {"wrong results on sm_80"}


def _publish(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert sorted(tour.index.listing()) == _wheels(tour)
    uploaded = [line.split()[1] for line in proc.stdout.splitlines()
                if line.startswith("uploaded ") and len(line.split()) == 2]
    assert sorted(uploaded) == _wheels(tour)


def _install(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    """The CPU build, for this Python's CPU torch."""
    cpu = [name for name in _wheels(tour) if "cpu" in name]
    assert len(cpu) == 1 and cpu[0] in proc.stdout.splitlines(), proc.stdout


def _local_kernels(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.stdout.splitlines()[-1].startswith("LOCAL_KERNELS=")


def _mirror(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    counts = proc.stdout.strip().splitlines()[-1]
    assert "'added': 2" in counts and "'refused': 0" in counts, counts
    page = json.loads((tour.folder / "mirror" / "simple" / "img2gray" / "index.json").read_text())
    assert sorted(f["filename"].split("+")[0] for f in page["files"]) == ["img2gray-1.1.1", "img2gray-1.1.2"]


def _serve(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    assert "serving at http://127.0.0.1:" in proc.stdout
    assert "img2gray-1.1.2+" in proc.stdout  # the page it served


def _build(tour: Tour, proc: subprocess.CompletedProcess[str]) -> None:
    built = tour.folder / "build-output" / "build" / CPU_VARIANT
    assert (built / "metadata.json").is_file()
    listed = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert [(tour.folder / path).resolve() for path in listed] == [built.resolve()]


#: What each example must have done, besides running to its end.
CHECKS: dict[str, Callable[[Tour, subprocess.CompletedProcess[str]], None]] = {
    "to-wheel": _to_wheel, "variants": _variants, "versions": _versions, "check": _check,
    "verify": _verify, "index": _index, "yank": _yank, "publish": _publish, "install": _install,
    "local-kernels": _local_kernels, "mirror": _mirror, "serve": _serve, "build": _build,
}


def test_every_command_has_one_example() -> None:
    assert sorted(example.title for example in examples()) == sorted(COMMANDS) == sorted(CHECKS)


@pytest.mark.parametrize("example", examples(), ids=lambda example: example.title)
def test_the_example_runs(example: Example, tour: Tour) -> None:
    proc = tour.run(example)
    assert "Traceback" not in proc.stderr, proc.stderr
    CHECKS[example.title](tour, proc)

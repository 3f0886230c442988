"""One verdict (issue #37): every byte of a kernel wheel is signed by its publisher or
derived again by kernel-wheels, and every command judges a wheel the same way.

The wheels are the sample kernel's real CPU build, signed under the test Sigstore
deployment (scripts/make_test_signature.py) and converted by `to-wheel`; the attacks are
a forger's who knows the format (tests/support/forgery.py: the SBOM and RECORD written
again to agree with every byte). Each case goes through every command it reaches:
`check`, `verify`, `index`, and `install` with real pip and uv into a fresh venv with the
real torch 2.13.0, from a real index on 127.0.0.1. What users rely on: a wheel that
`check` refuses is refused by all of them, and nothing of the environment changes."""

from __future__ import annotations

import importlib.util
import json
import marshal
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from test_install_hostile import environment_state, install, serve
from test_provenance import signed_variant, to_wheel

from kernel_wheels import __version__
from support.forgery import forge
from support.helpers import make_venv, one_line_error, run_cli, torch_wheel
from support.hostile_index import HostileIndex
from support.servers_index import pip_env

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
LOADER = "img2gray/__init__.py"
#: What a forged wheel's code does when it runs: it marks a file the test names.
MARK = b"import os\nopen(os.environ.get('KW_MARK', os.devnull), 'a').write('ran\\n')\n"


@pytest.fixture(scope="module")
def signed(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A signed kernel's wheel and the test deployment's trusted root."""
    folder = tmp_path_factory.mktemp("signed")
    variant = signed_variant(cpu_build, folder / "k")
    root = folder / "k" / "root.json"
    assert to_wheel(variant.parent.parent, folder / "out", "--trusted-root", root).returncode == 0
    (wheel,) = (folder / "out").glob("*.whl")
    return wheel, root


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("verdict-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


@pytest.fixture
def index() -> object:
    with HostileIndex() as server:
        yield server


def _policy(root: Path) -> tuple[str | Path, ...]:
    return ("--trusted-root", root, "--require-signature")


def _check(wheel: Path, *options: str | Path) -> tuple[int, list[str]]:
    proc = run_cli("check", wheel, *options, check=False)
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout.splitlines()


def _loader_edited(wheel: Path, target: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        loader = archive.read(LOADER)
    return forge(wheel, target / wheel.name, replaced={LOADER: loader + MARK})


def _byte_code(wheel: Path, target: Path) -> Path:
    code = compile(MARK.decode(), "_ops.py", "exec")
    pyc = importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code)
    name = f"img2gray/{VARIANT}/__pycache__/_ops.cpython-311.pyc"
    return forge(wheel, target / wheel.name, added={name: pyc})


def test_the_signed_wheel_is_covered_whole(signed: tuple[Path, Path]) -> None:
    wheel, root = signed
    status, lines = _check(wheel, "-v", *_policy(root))
    assert status == 0, lines
    assert any(line.startswith("  pass: [contract] all 8 files kernel-wheels wrote are what it derives "
                               "from the kernel's files and the recorded conversion") for line in lines), lines
    verified = run_cli("verify", wheel, *_policy(root))
    assert verified.stdout.startswith(f"VERIFIED {wheel.name}: signed by ")
    assert verified.stdout.rstrip().endswith("every file is signed or derived again")


# --- 1. kernel-wheels' own files are no longer trusted blindly ---------------------------------


def test_an_edited_loader_is_refused_everywhere(signed: tuple[Path, Path], venv: Path,
                                                index: HostileIndex, tmp_path: Path) -> None:
    wheel, root = signed
    forged = _loader_edited(wheel, tmp_path / "forged")
    differs = f"{LOADER} differs from what kernel-wheels derives from the kernel's files and the " \
              "recorded conversion"
    status, lines = _check(forged, *_policy(root))
    assert status == 1 and f"  fail: [contract] {differs}" in lines, lines
    verify = run_cli("verify", forged, *_policy(root), check=False)
    assert verify.returncode == 1
    assert verify.stdout.startswith(f"FAILED {forged.name}: [contract] {differs}"), verify.stdout
    assert "0 verified, 0 unsigned, 0 not verified, 1 failed" in verify.stderr
    refused = run_cli("index", forged, "-o", tmp_path / "site", "--trusted-root", root, check=False)
    one_line_error(refused, f"[contract] {differs}", status=1)
    assert not (tmp_path / "site").exists()
    mark = tmp_path / "mark"
    before = environment_state(venv)
    proc = install(venv, serve(index, forged), "img2gray", *_policy(root), env={"KW_MARK": str(mark)})
    one_line_error(proc, f"{forged.name} from ", "fails kernel-wheels check, so no installer saw it: "
                   f"[contract] {differs}", "nothing was installed", status=1)
    assert environment_state(venv) == before and not mark.exists()


# --- 2. byte-code no longer rides along ----------------------------------------------------------


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_byte_code_is_refused_everywhere(signed: tuple[Path, Path], venv: Path, index: HostileIndex,
                                         tmp_path: Path, installer: str) -> None:
    wheel, root = signed
    forged = _byte_code(wheel, tmp_path / "forged")
    pyc = f"img2gray/{VARIANT}/__pycache__/_ops.cpython-311.pyc"
    refusal = f"{pyc} is byte-code, which no kernel wheel carries"
    status, lines = _check(forged, *_policy(root))
    assert status == 1 and any(line.startswith(f"  fail: [contract] {refusal}") for line in lines), lines
    assert run_cli("verify", forged, *_policy(root), check=False).returncode == 1
    before = environment_state(venv)
    proc = install(venv, serve(index, forged), "img2gray", "--installer", installer, *_policy(root))
    one_line_error(proc, f"[contract] {refusal}", "nothing was installed", status=1)
    assert environment_state(venv) == before


# --- 3. a kernel can no longer take another package's name ---------------------------------------


def _named(cpu_build: Path, folder: Path, name: str) -> Path:
    """The CPU build as a folder source whose metadata.json names the kernel ``name``."""
    variant = folder / "src" / "build" / VARIANT
    shutil.copytree(cpu_build, variant)
    metadata = json.loads((variant / "metadata.json").read_text())
    (variant / "metadata.json").write_text(json.dumps({**metadata, "name": name}))
    return folder / "src"


def test_a_project_cannot_install_another_package(cpu_build: Path, venv: Path, index: HostileIndex,
                                                   tmp_path: Path) -> None:
    """Project img2gray, package numpy: to-wheel refuses the name, check refuses such a
    wheel made anyway, install refuses it."""
    source = _named(cpu_build, tmp_path, "numpy")
    refused = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", "--dist-name", "img2gray",
                      check=False)
    one_line_error(refused, "--dist-name img2gray: a kernel wheel's project is named after the package "
                            "it installs, numpy", status=2)
    assert not (tmp_path / "out").exists()
    written = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "unchecked", "--no-check",
                      "--dist-name", "acme-numpy")
    assert written.returncode == 0
    (wheel,) = (tmp_path / "unchecked").glob("*.whl")
    dist_info = wheel.name.split("-cp39")[0] + ".dist-info/"
    metadata = zipfile.ZipFile(wheel).read(dist_info + "METADATA")
    renamed = forge(wheel, tmp_path / "renamed" / wheel.name.replace("acme_numpy", "img2gray"),
                    replaced={dist_info.replace("acme_numpy", "img2gray") + "METADATA":
                              metadata.replace(b"Name: acme-numpy", b"Name: img2gray")},
                    renamed=(dist_info, dist_info.replace("acme_numpy", "img2gray")))
    status, lines = _check(renamed)
    assert status == 1
    assert "  fail: [names] the project img2gray installs the package numpy/: a kernel wheel's project " \
           "is named after its package (numpy, or a prefixed form such as acme-numpy)" in lines, lines
    before = environment_state(venv)
    proc = install(venv, serve(index, renamed), "img2gray")
    one_line_error(proc, "[names] the project img2gray installs the package numpy/", status=1)
    assert environment_state(venv) == before


@pytest.mark.parametrize(("name", "taker"), [
    ("numpy", "torch, whose import looks for it (recorded in the target Python)"),
    ("json", "the standard library"),
    ("pip", "pip "),  # pip itself: a distribution of that name that is no kernel wheel
])
def test_install_refuses_a_name_the_target_already_takes(cpu_build: Path, venv: Path,
                                                         index: HostileIndex, tmp_path: Path,
                                                         name: str, taker: str) -> None:
    """A kernel honestly named numpy passes check (its wheel is what it says), but where
    torch is installed every `import torch` would import it: install refuses. Likewise a
    name of the standard library, or of another installed distribution."""
    run_cli("to-wheel", _named(cpu_build, tmp_path, name), "1.0.0", "-o", tmp_path / "out")
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert _check(wheel)[0] == 0
    before = environment_state(venv)
    proc = install(venv, serve(index, wheel), name)
    line = one_line_error(proc, f"[fit] its package {name}/ has a name the target already takes: {taker}",
                          "nothing was installed", status=1)
    assert "Traceback" not in line
    assert environment_state(venv) == before


# --- a wheel made by another release is said so --------------------------------------------------


def test_a_wheel_of_another_release_is_not_verified_and_said_so(signed: tuple[Path, Path], venv: Path,
                                                                index: HostileIndex,
                                                                tmp_path: Path) -> None:
    wheel, root = signed
    with zipfile.ZipFile(wheel) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith("/kernel_wheels.json"))
        record = json.loads(archive.read(record_name))
    record["generator"] = "kernel-wheels 0.0.1"
    older = forge(wheel, tmp_path / "older" / wheel.name,
                  replaced={record_name: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()})
    status, lines = _check(older, "--trusted-root", root)
    said = (f"[contract] made by kernel-wheels 0.0.1, not by this release (kernel-wheels {__version__}): "
            "the files it wrote are not re-derived")
    assert status == 0 and any(line.startswith(f"  not verified: {said}") for line in lines), lines
    assert sum("[contract]" in line for line in lines) == 1, lines
    verify = run_cli("verify", older, "--trusted-root", root)
    assert verify.stdout.startswith(f"NOT VERIFIED {older.name}: {said}"), verify.stdout
    assert "0 verified, 0 unsigned, 1 not verified, 0 failed" in verify.stderr
    # A policy that requires a signature requires every file covered: refused.
    strict, strict_lines = _check(older, *_policy(root))
    assert strict == 1 and any(line.startswith(f"  fail: {said}") and line.endswith(
        "the policy requires every file signed or re-derived") for line in strict_lines), strict_lines
    before = environment_state(venv)
    refused = install(venv, serve(index, older), "img2gray", *_policy(root))
    one_line_error(refused, "the policy requires every file signed or re-derived", status=1)
    assert environment_state(venv) == before
    # Under the default policy it installs, and install says what it did not prove.
    proc = install(venv, serve(index, older), "img2gray", "--trusted-root", root)
    assert proc.returncode == 0, proc.stderr
    assert f"note: {older.name}: made by kernel-wheels 0.0.1, not by this release" in proc.stderr
    subprocess.run([str(venv), "-m", "pip", "uninstall", "-y", "-q", "img2gray"], check=True,
                   capture_output=True, env=pip_env())


# --- 5. verify's words -------------------------------------------------------------------------------


def test_verify_counts_an_unsigned_wheel_as_unsigned(cpu_build: Path, tmp_path: Path) -> None:
    run_cli("to-wheel", _named(cpu_build, tmp_path, "img2gray"), "1.0.0", "-o", tmp_path / "out")
    (wheel,) = (tmp_path / "out").glob("*.whl")
    proc = run_cli("verify", wheel)
    assert proc.stdout == (f"UNSIGNED {wheel.name}: no signature covers it (no metadata.json.sigstore); "
                           "its checks pass\n")
    assert "0 verified, 1 unsigned, 0 not verified, 0 failed" in proc.stderr
    assert "PASS" not in proc.stdout and "1 of 1 verified" not in proc.stderr

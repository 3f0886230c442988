"""`install`, `check` and `local-kernels` against hostile wheels and installed distributions
(issue #30, classes 2, 7 and part of 10).

The wheels are the sample kernel's real CPU build, converted by `to-wheel` and then
changed the way an attacker who controls an index would change them (with a RECORD
that matches, so only the new rules can refuse them); they are served from a real index
on 127.0.0.1 (tests/support/hostile_index.py) and installed with real pip into a fresh
venv holding the real torch 2.13.0. What users rely on: `install` verifies the file it
chose as `check` does before pip sees it; nothing of the environment changes when it
refuses (pip, site-packages, torch's files); "torch unchanged" is measured on torch's
recorded files; `local-kernels` maps a repository only to a folder the distribution
itself installed, refuses two claims of one repository, never maps an id that names
another kernel and maps one typed by hand only on opt-in (#37); a lock pinning two
spellings of one Hub id differently is refused."""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import json
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import make_venv, one_line_error, run_cli, torch_wheel
from support.hostile_index import HostileIndex, answer, file_route
from support.servers_index import pip_env, torch_fingerprint

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
PROJECT = "img2gray"
WHEEL = "img2gray-1.0.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
DIST = "img2gray-1.0.0+torch213cpucxx11"


# --- wheels ----------------------------------------------------------------------------------


def _convert(cpu_build: Path, folder: Path, *args: str, name: str | None = None,
             **metadata_keys: object) -> Path:
    """to-wheel of the CPU build as a folder source (``name``: metadata.json's kernel name;
    ``metadata_keys``: further metadata.json keys, ``kernel_depends`` for kernel-depends)."""
    variant = folder / "src" / "build" / VARIANT
    shutil.copytree(cpu_build, variant)
    if name is not None or metadata_keys:
        metadata = json.loads((variant / "metadata.json").read_text())
        metadata.update({key.replace("_", "-"): value for key, value in metadata_keys.items()})
        if name is not None:
            metadata["name"] = name
        (variant / "metadata.json").write_text(json.dumps(metadata))
    run_cli("to-wheel", folder / "src", "1.0.0", "-o", folder / "out", *args)
    (wheel,) = (folder / "out").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def kernel_wheel(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _convert(cpu_build, tmp_path_factory.mktemp("kernel-wheel"))


def _record_row(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return [name, f"sha256={digest}", str(len(data))]


def repack(wheel: Path, target: Path, added: dict[str, bytes],
           replaced: dict[str, bytes] | None = None) -> Path:
    """``wheel`` with members added or replaced and a RECORD that matches every byte, and
    without its SBOM (a wheel without one is only "not verified"): a forged wheel that
    passes every check but the rules on where its files go."""
    replaced = replaced or {}
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        for name in src.namelist():
            if name == record or "/sboms/" in name:
                continue
            data = replaced.get(name, src.read(name))
            dst.writestr(name, data)
            rows.append(_record_row(name, data))
        for name, data in added.items():
            dst.writestr(name, data)
            rows.append(_record_row(name, data))
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([*rows, [record, "", ""]])
        dst.writestr(record, buffer.getvalue())
    return target


SITECUSTOMIZE = b"open(__import__('os').environ.get('KW_MARK', '/dev/null'), 'a').write('ran\\n')\n"
#: name -> (members added, what `check` and `install` must say about it)
HOSTILE = {
    "torch-file": ({"torch/version.py": b"__version__ = '2.13.0+cpu'\nimport os\n"},
                   "torch/version.py would be written into torch/, another package"),
    "data-scripts-pip": ({f"{DIST}.data/scripts/pip": b"#!python\nprint('not pip')\n"},
                         f"{DIST}.data/scripts/pip is a script the installer would put in the "
                         "environment's bin/"),
    "sitecustomize": ({"sitecustomize.py": SITECUSTOMIZE},
                      "sitecustomize.py is a module Python runs at every start"),
    "pth": ({"zz-kernel.pth": b"import os; os.environ.setdefault('KW_PTH', '1')\n"},
            "zz-kernel.pth is a .pth file, which Python runs at every start"),
    "top-level-module": ({"img2gray_helpers.py": b"X = 1\n"},
                         "img2gray_helpers.py is a top-level module"),
    "console-script": ({f"{DIST}.dist-info/entry_points.txt":
                        b"[console_scripts]\npip = img2gray:main\n"},
                       f"{DIST}.dist-info/entry_points.txt declares [console_scripts]"),
}


@pytest.fixture(scope="module")
def hostile_wheels(kernel_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("hostile-wheels")
    return {case: repack(kernel_wheel, out / case / WHEEL, added)
            for case, (added, _) in HOSTILE.items()}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_check_refuses_files_outside_the_kernels_package(hostile_wheels: dict[str, Path],
                                                         case: str) -> None:
    proc = run_cli("check", hostile_wheels[case], check=False)
    assert proc.returncode == 1, proc.stdout
    assert proc.stdout.splitlines()[0] == f"FAIL {WHEEL}"
    assert any(line.startswith(f"  fail: [members] {HOSTILE[case][1]}")
               for line in proc.stdout.splitlines()), proc.stdout
    assert "Traceback" not in proc.stderr


def test_the_converted_wheel_passes_the_members_rule(kernel_wheel: Path) -> None:
    """The rule fails what is outside, not what to-wheel writes (--dist-name included)."""
    proc = run_cli("check", "-v", kernel_wheel)
    assert f"  pass: [members] every file is inside img2gray/ or {DIST}.dist-info/" in \
        proc.stdout.splitlines()


def test_check_refuses_a_package_python_imports_at_every_start(tmp_path: Path) -> None:
    """A package named sitecustomize runs at every interpreter start like the module."""
    wheel = _plain_wheel(tmp_path, "sitecustomize", {"sitecustomize/__init__.py": SITECUSTOMIZE})
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1, proc.stdout
    assert "  fail: [members] the package sitecustomize/ is imported by Python at every start" \
        in proc.stdout.splitlines(), proc.stdout


def test_check_shows_a_hostile_member_name_escaped(kernel_wheel: Path, tmp_path: Path) -> None:
    """A member name is the attacker's text: its control characters (here one that
    clears the terminal) are shown escaped, in check's report and install's error."""
    wheel = repack(kernel_wheel, tmp_path / WHEEL, {"evil\x1b[2J.py": b"X = 1\n"})
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1 and "\x1b" not in proc.stdout, proc.stdout
    assert any(line.startswith("  fail: [members] evil\\x1b[2J.py is a top-level module")
               for line in proc.stdout.splitlines()), proc.stdout


# --- an index serving them, and a venv with torch ------------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("hostile-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


@pytest.fixture
def index() -> Iterator[HostileIndex]:
    with HostileIndex() as server:
        yield server


def serve(index: HostileIndex, *wheels: Path) -> str:
    """Each wheel listed on its project's page (with its sha256) and downloadable; the
    index URL."""
    index.routes.clear()
    pages: dict[str, list[str]] = {}
    for wheel in wheels:
        project = wheel.name.split("-", 1)[0].replace("_", "-")
        data = wheel.read_bytes()
        index.routes[f"/files/{wheel.name}"] = file_route(data)
        pages.setdefault(project, []).append(
            f'<a href="/files/{html.escape(wheel.name)}#sha256={hashlib.sha256(data).hexdigest()}" '
            f'data-requires-python="&gt;=3.9">{html.escape(wheel.name)}</a><br>')
    for project, anchors in pages.items():
        body = f"<!DOCTYPE html><html><body>{''.join(anchors)}</body></html>".encode()
        index.routes[f"/simple/{project}/"] = answer(body=body)
    return index.base + "simple/"


def site_packages(venv: Path) -> Path:
    return next((venv.parent.parent / "lib").glob("python3*/site-packages"))


def environment_state(venv: Path) -> dict[str, object]:
    """What a refused install must leave as it was: every file of bin/ (pip's scripts
    among them) by content, the names in site-packages, torch's recorded files."""
    bin_folder = venv.parent
    return {
        "bin": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(bin_folder.iterdir())
                if p.is_file()},
        "site-packages": sorted(p.name for p in site_packages(venv).iterdir()),
        "torch": torch_fingerprint(venv),
    }


def install(venv: Path, url: str, requirement: str = PROJECT, *extra: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("install", requirement, "--index-url", url, "--python", venv, *extra,
                   env={**pip_env(), **(env or {})}, check=False)


# --- 2. install verifies what pip gets ---------------------------------------------------------


def test_install_refuses_what_check_refuses_before_pip_runs(hostile_wheels: dict[str, Path],
                                                            venv: Path, index: HostileIndex,
                                                            tmp_path: Path) -> None:
    before = environment_state(venv)
    for case in sorted(HOSTILE):
        url = serve(index, hostile_wheels[case])
        proc = install(venv, url, env={"KW_MARK": str(tmp_path / "mark")})
        line = one_line_error(proc, WHEEL, HOSTILE[case][1], "nothing was installed", status=1)
        assert line.startswith(f"kernel-wheels: error: {WHEEL} from {url}"), line
        assert index.requests(f"/files/{WHEEL}"), case  # downloaded, verified, refused
        assert environment_state(venv) == before, case
        assert not (tmp_path / "mark").exists(), case


def test_install_refuses_a_kernel_package_another_distribution_owns(
        cpu_build: Path, venv: Path, index: HostileIndex, tmp_path: Path) -> None:
    """A wheel that passes `check` whose package is `torch` (metadata.json named the
    kernel so, `--dist-name` gave it a prefixed project): pip would write its loader over
    torch/__init__.py. install reads which distribution owns which top-level name in
    the target environment and refuses before pip runs."""
    wheel = _convert(cpu_build, tmp_path, "--dist-name", "evil-torch", name="torch")
    assert run_cli("check", wheel).returncode == 0  # a wheel check alone cannot know
    before = environment_state(venv)
    proc = install(venv, serve(index, wheel), "evil-torch")
    one_line_error(proc, f"{wheel.name} from ", "[fit] its package torch/ has a name the target "
                         "already takes: torch 2.13.0+cpu, installed there", "nothing was installed",
                   status=1)
    assert environment_state(venv) == before


def _plain_wheel(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    """A pure-Python wheel made by hand, as any project on an index can publish."""
    dist = f"{name}-1.0.dist-info"
    members = {**files,
               f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
               f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                b"Tag: py3-none-any\n"}
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(
        [*(_record_row(n, d) for n, d in members.items()), [f"{dist}/RECORD", "", ""]])
    path = folder / f"{name}-1.0-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in {**members, f"{dist}/RECORD": buffer.getvalue().encode()}.items():
            zf.writestr(member, data)
    return path


def test_torch_unchanged_is_measured_on_its_recorded_files(
        cpu_build: Path, index: HostileIndex, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The kernel itself passes every check, but it requires kwhelper (a kernel-depends
    entry of its metadata.json), which the index also serves and which writes torch/version.py (pip checks no file ownership; the
    torch pin holds, torch's version reads the same). The run must not end in "torch
    unchanged": it names the changed file and says how to repair."""
    python = make_venv(tmp_path / "venv", torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))
    # The kernel requires kwhelper as metadata.json says it (another kernel, version 1).
    kernel = _convert(cpu_build, tmp_path / "kernel",
                      kernel_depends=[{"repo-id": "org/kwhelper", "version": 1}])
    helper = _plain_wheel(tmp_path / "helper", "kwhelper", {
        "kwhelper/__init__.py": b"",
        "torch/version.py": b"__version__ = '2.13.0+cpu'\ngit_version = 'replaced'\n"})
    proc = install(python, serve(index, kernel, helper))
    assert "torch 2.13.0+cpu unchanged" not in proc.stderr
    one_line_error(proc, "changed torch's installed files: torch/version.py",
                   "reinstall torch==2.13.0+cpu", status=1)


def test_torch_changes_are_named_when_the_installer_fails(
        cpu_build: Path, index: HostileIndex, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """kwhelper writes into torch/ and leaves a folder where the kernel's __init__.py
    goes, so pip fails on the kernel itself: the error says so, and that torch changed."""
    python = make_venv(tmp_path / "venv", torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))
    # The kernel requires kwhelper as metadata.json says it (another kernel, version 1).
    kernel = _convert(cpu_build, tmp_path / "kernel",
                      kernel_depends=[{"repo-id": "org/kwhelper", "version": 1}])
    helper = _plain_wheel(tmp_path / "helper", "kwhelper", {
        "kwhelper/__init__.py": b"",
        "torch/version.py": b"__version__ = '2.13.0+cpu'\ngit_version = 'replaced'\n",
        "img2gray/__init__.py/blocker.py": b""})
    proc = install(python, serve(index, kernel, helper))
    one_line_error(proc, "pip could not install img2gray==1.0.0+torch213cpucxx11",
                   "the installer changed torch's installed files: torch/version.py",
                   "reinstall torch==2.13.0+cpu", status=1)


def test_a_clean_install_says_torch_is_unchanged_after_measuring(kernel_wheel: Path,
                                                                 venv: Path,
                                                                 index: HostileIndex) -> None:
    before = torch_fingerprint(venv)
    proc = install(venv, serve(index, kernel_wheel))
    assert proc.returncode == 0, proc.stderr
    assert f"installed {WHEEL}; torch 2.13.0+cpu unchanged (none of its " in proc.stderr
    assert " recorded files in what the installer recorded writing)" in proc.stderr
    assert torch_fingerprint(venv) == before
    subprocess.run([str(venv), "-m", "pip", "uninstall", "-y", "-q", PROJECT], check=True,
                   capture_output=True, env=pip_env())


# --- 7. local-kernels maps only what a distribution installed ---------------------------------


def _kernel_dist(folder: Path, name: str, repo: str | None, variant_folder: str | None = None,
                 metadata: bytes = b'{"version": 1}\n', **record_keys: object) -> Path:
    """A hand-made wheel that records a Hub repository in kernel_wheels.json, as a
    kernel wheel does (``repo``: as its source; None: none, ``record_keys`` give what
    the record says instead); its variant folder (with ``metadata`` as metadata.json) is
    its own unless ``variant_folder`` points elsewhere."""
    own = f"{name}/{VARIANT}"
    record = {"wheel_layout": 2, "variant_folder": variant_folder or own,
              "source": f"https://huggingface.co/{repo}" if repo else None, "commit": "0" * 40,
              "variant": {"name": VARIANT}, "module": name, **record_keys}
    wheel = _plain_wheel(folder, name, {f"{name}/__init__.py": b"",
                                        f"{own}/metadata.json": metadata})
    return repack(wheel, folder / "with-record" / wheel.name,
                  {f"{name}-1.0.dist-info/kernel_wheels.json": json.dumps(record).encode()})


def _pip_install(python: Path, *wheels: Path) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    *map(str, wheels)], check=True, capture_output=True, env=pip_env())


def assert_no_mapping(proc: subprocess.CompletedProcess[str], extra: tuple[str, ...]) -> None:
    """Nothing on stdout but, with --json, the error document."""
    if extra == ("--json",):
        assert set(json.loads(proc.stdout)) == {"error"}, proc.stdout
    else:
        assert proc.stdout == "", proc.stdout


def test_local_kernels_refuses_a_folder_the_distribution_did_not_install(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    elsewhere = tmp_path / "anywhere" / VARIANT
    elsewhere.mkdir(parents=True)
    (elsewhere / "metadata.json").write_text('{"version": 1}\n')
    _pip_install(python, _kernel_dist(tmp_path / "a", "kwowner", "drbh/img2gray"))
    for name, folder in (("kwabsolute", str(elsewhere)),
                         ("kwborrow", f"kwowner/{VARIANT}")):  # another distribution's folder
        _pip_install(python, _kernel_dist(tmp_path / name, name, f"evil/{name}", folder))
        for extra in ((), ("--json",), ("--shell",)):
            proc = run_cli("local-kernels", "--python", python, *extra, check=False)
            one_line_error(proc, f"{name} 1.0 maps evil/{name} to {folder}, which is not among "
                                 f"the files {name} installed", status=1)
            assert_no_mapping(proc, extra)
        subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", name], check=True,
                       capture_output=True, env=pip_env())
    proc = run_cli("local-kernels", "--python", python)
    assert proc.stdout.strip() == f"drbh/img2gray={site_packages(python) / 'kwowner' / VARIANT}"
    assert "drbh/img2gray -> kwowner 1.0: id from the Hub repository it was converted from" \
        in proc.stderr.splitlines(), proc.stderr


def test_local_kernels_refuses_two_claims_of_one_repository(tmp_path: Path) -> None:
    """Hub ids ignore case: drbh/img2gray and DRBH/Img2Gray are one repository, and the
    kernels library would keep whichever comes last."""
    python = make_venv(tmp_path / "venv")
    _pip_install(python, _kernel_dist(tmp_path / "a", "kwfirst", "drbh/img2gray"),
                 _kernel_dist(tmp_path / "b", "kwsecond", "DRBH/Img2Gray"))
    packages = site_packages(python)
    for extra in ((), ("--json",), ("--shell",)):
        proc = run_cli("local-kernels", "--python", python, *extra, check=False)
        one_line_error(proc, "drbh/img2gray is claimed by two installed distributions",
                       f"kwfirst 1.0 ({packages / 'kwfirst' / VARIANT})",
                       f"kwsecond 1.0 ({packages / 'kwsecond' / VARIANT})", status=1)
        assert_no_mapping(proc, extra)


# Issue #37, point 6: a record's repository id must name its kernel, and say where it came
# from; local-kernels maps an id typed by hand (or of no recorded origin) only on opt-in.


def _with_record(wheel: Path, target: Path, **keys: object) -> Path:
    """``wheel`` with ``keys`` set in its provenance record, and every member kernel-wheels
    writes derived again from it (SBOM and RECORD included), as anyone with kernel-wheels'
    source can: a forged wheel that the closed contract, which is not a signature, passes."""
    from kernel_wheels.checks.contract import derive
    from kernel_wheels.checks.facts import read_wheel_contents

    name = f"{DIST}.dist-info/kernel_wheels.json"
    with zipfile.ZipFile(wheel) as zf:
        record = json.loads(zf.read(name))
    draft = repack(wheel, target.parent / "draft" / target.name, {},
                   {name: json.dumps({**record, **keys}).encode()})
    facts = read_wheel_contents(draft, draft.name, lambda: target.parent / "scratch")
    assert facts.provenance is not None
    derived = derive(facts, facts.provenance, None, None).members
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(draft) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for member in src.namelist():
            dst.writestr(member, derived.pop(member, None) or src.read(member))
        for member, data in derived.items():  # the SBOM, which repack left out
            dst.writestr(member, data)
    return target


FORGED_IDS = {
    "another-kernel": ({"repo_id": "kernels-community/flash-attn", "repo_id_from": "--repo-id"},
                       "the record maps the Hub repository kernels-community/flash-attn to the kernel "
                       "img2gray, but that id names the kernel flash-attn: local-kernels would make "
                       "get_kernel('kernels-community/flash-attn') load this wheel"),
    "not-metadata-json": ({"repo_id": "acme/img2gray", "repo_id_from": "metadata.json"},
                          "the record says its repo_id acme/img2gray is metadata.json's, but "
                          "metadata.json's repo-id is absent"),
    "not-an-origin": ({"repo_id": "acme/img2gray", "repo_id_from": "hub"},
                      "the record's repo_id acme/img2gray came from 'hub': kernel-wheels records "
                      "'metadata.json' or '--repo-id'"),
}


@pytest.mark.parametrize("case", sorted(FORGED_IDS))
def test_check_fails_a_record_whose_repo_id_is_not_the_kernels(kernel_wheel: Path, tmp_path: Path,
                                                               case: str) -> None:
    keys, finding = FORGED_IDS[case]
    proc = run_cli("check", _with_record(kernel_wheel, tmp_path / WHEEL, **keys), check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"  fail: [names] {finding}" in proc.stdout.splitlines(), proc.stdout


def test_check_passes_a_record_whose_repo_id_names_its_kernel(kernel_wheel: Path, tmp_path: Path) -> None:
    """The same forged wheel with an id that names its kernel: only the new rule differs."""
    wheel = _with_record(kernel_wheel, tmp_path / WHEEL, repo_id="acme/Img2Gray", repo_id_from="--repo-id")
    proc = run_cli("check", "-v", wheel)
    assert "  pass: [names] one package, img2gray/, the kernel img2gray's own, installed by the project " \
           "img2gray, recorded as the Hub repository acme/Img2Gray (--repo-id)" in proc.stdout.splitlines(), \
        proc.stdout


def test_local_kernels_maps_an_id_only_as_its_origin_allows(tmp_path: Path) -> None:
    """Installed records (made by hand, as a hostile or earlier wheel's would be): an id
    that names another kernel is never mapped; one of no recorded origin, or of an origin
    its metadata.json does not bear out, is taken as typed by hand; a metadata.json that
    says the id is mapped without an opt-in."""
    python = make_venv(tmp_path / "venv")
    dists = {
        "kwevil": {"repo_id": "kernels-community/flash-attn", "repo_id_from": "--repo-id"},
        "kwold": {"repo_id": "acme/kwold"},
        "kwclaim": {"repo_id": "acme/kwclaim", "repo_id_from": "metadata.json"},
        "kwhub": {"repo_id": "acme/kwhub", "repo_id_from": "hub"},
        "kwbuild": {"repo_id": "acme/kwbuild", "repo_id_from": "metadata.json"},
    }
    for name, keys in dists.items():
        metadata = json.dumps({"version": 1, "name": name, "repo-id": f"acme/{name}"}).encode() \
            if name == "kwbuild" else b'{"version": 1}\n'
        _pip_install(python, _kernel_dist(tmp_path / name, name, None, metadata=metadata, **keys))
    packages = site_packages(python)
    refused = ("warning: kwevil 1.0 records the repository id kernels-community/flash-attn, which names "
               "the kernel flash-attn, not its kernel kwevil: not mapped (convert it again with an id "
               "that names it)")
    without = run_cli("local-kernels", "--python", python)
    assert without.stdout.strip() == f"acme/kwbuild={packages / 'kwbuild' / VARIANT}", without.stdout
    assert refused in without.stderr.splitlines(), without.stderr
    for name in ("kwold", "kwclaim", "kwhub"):
        assert (f"warning: {name} 1.0: its repository id acme/{name} is of no recorded origin (taken as "
                "typed by hand): not mapped; if you trust it, map it with --allow-hand-ids (or "
                "KERNEL_WHEELS_ALLOW_HAND_IDS=1)") in without.stderr.splitlines(), without.stderr
    opted = run_cli("local-kernels", "--python", python, "--allow-hand-ids")
    assert sorted(opted.stdout.strip().split(":")) == [
        f"acme/{name}={packages / name / VARIANT}" for name in ("kwbuild", "kwclaim", "kwhub", "kwold")]
    assert refused in opted.stderr.splitlines(), opted.stderr
    listed = {k["distribution"]: k for k in json.loads(
        run_cli("local-kernels", "--python", python, "--json", "--allow-hand-ids").stdout)}
    assert {name: (k["repo_id_from"], k["mapped"]) for name, k in listed.items()} == {
        "kwevil": ("--repo-id", False), "kwold": ("unconfirmed", True), "kwclaim": ("unconfirmed", True),
        "kwhub": ("unconfirmed", True), "kwbuild": ("metadata.json", True)}
    assert listed["kwevil"]["left_out"] == refused.removeprefix("warning: ")


# --- 10. a lock pinning one repository twice --------------------------------------------------


def test_a_lock_pinning_two_spellings_of_one_repository_is_refused(tmp_path: Path) -> None:
    lock = [{"repo_id": "drbh/img2gray", "sha": "a" * 40, "variants": {}},
            {"repo_id": "DRBH/Img2Gray", "sha": "b" * 40, "variants": {}}]
    (tmp_path / "kernels.lock").write_text(json.dumps(lock))
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf")}
    proc = run_cli("to-wheel", "--lock", tmp_path / "kernels.lock", "-o", tmp_path / "out",
                   env=env, check=False)
    one_line_error(proc, "locks drbh/img2gray and DRBH/Img2Gray, one Hub repository (ids ignore "
                         "case), at different commits", status=1)
    assert not (tmp_path / "out").exists()

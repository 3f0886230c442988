"""`kernel-wheels index` and the target scheme: the loader's rules (checked against the
real `kernels` package), the static site's pages, what pip gets from every target index,
and the site's promises: incremental, atomic (a run killed for real), locked, refusing."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from kernel_wheels.index.targets import (
    parse_kernel_wheel,
    parse_target_key,
    select_for_target,
)
from kernel_wheels.install.environment import target_key
from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.wheel.plan import TagOptions, plan_wheel
from support.contract import CONTRACT
from support.gpu_stub import with_device_code
from support.helpers import run_cli
from support.servers_index import (
    anchors,
    corrupt_copy,
    make_noarch_wheels,
    pip_pick,
    static_server,
    tree_snapshot,
    validate_site,
)

CPU = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


# --- the rules ----------------------------------------------------------------------------


def _names_for_rules() -> list[str]:
    names = []
    for torch in ("torch26", "torch27", "torch212", "torch213"):
        for abi in ("-cxx11", "-cxx98"):
            for backend in ("cu118", "cu126", "cu128", "cu129", "cu130", "rocm71", "rocm72",
                            "xpu20253", "cpu"):
                names += [f"{torch}{abi}-{backend}-{arch}-linux" for arch in ("x86_64", "aarch64")]
        names += [f"{torch}-cpu-aarch64-darwin", f"{torch}-metal-aarch64-darwin",
                  f"{torch}-cu130-x86_64-windows", f"{torch}-cxx11-cu130-x86_64-windows"]
    for stable in ("torch-stable-abi29", "torch-stable-abi210", "torch-stable-abi212"):
        names += [f"{stable}-{b}-x86_64-linux" for b in ("cu126", "cu128", "cu130", "cpu")]
    return names + ["torch-cuda", "torch-cpu", "torch-universal", "torch-xpu", "torch-rocm",
                    "torch-metal"]


RULE_TARGETS = ["torch27-cxx11-cu128", "torch27-cxx11-cu129", "torch213-cxx11-cu130",
                "torch213-cxx98-cu126", "torch212-cxx11-rocm71", "torch213-cxx11-xpu20253",
                "torch213-cxx11-cpu", "torch213-metal", "torch213-cpu", "torch213-cu130",
                "torch212-cxx11-cu132"]


def test_target_indexes_give_what_the_kernels_loader_picks() -> None:
    """For random sets of builds, on every machine a target stands for, the wheel pip
    takes from the target's index (the highest version among those its platform fits)
    is the variant the Hub's loader (`kernels`, the real package) resolves, except
    the documented case where a Python-only build would outrank an arch build."""
    from kernels.backends import CPU as KCPU
    from kernels.backends import CUDA, XPU, Metal, ROCm
    from kernels.variants import _resolve_variant_for_system
    from kernels.variants import parse_variant as loader_parse

    names = _names_for_rules()
    generator = random.Random(8)
    subsets = [names] + [generator.sample(names, generator.randint(1, 12)) for _ in range(250)]
    compared = 0
    for subset in subsets:
        wheels = []
        for name in subset:
            filename = plan_wheel(parse_variant(name), "img2gray", "1.0.0", TagOptions()).filename
            wheel = parse_kernel_wheel(filename)
            assert wheel is not None and wheel.variant == parse_variant(name)
            wheels.append(wheel)
        loader_variants = [loader_parse(n) for n in subset]
        for key in RULE_TARGETS:
            target = parse_target_key(key)
            version = Version("{}.{}".format(*target.backend_version or (0, 0)))
            versioned = {"cuda": CUDA, "rocm": ROCm, "xpu": XPU}
            backend = versioned[target.backend](version=version) \
                if target.backend in versioned else {"cpu": KCPU, "metal": Metal}[target.backend]()
            listed = select_for_target(target, wheels)
            if target.cxx_abi:
                machines = [("linux", "x86_64"), ("linux", "aarch64")]
            elif key in ("torch213-metal", "torch213-cpu"):
                machines = [("darwin", "aarch64")]
            else:
                machines = [("windows", "x86_64")]
            for system, cpu in machines:
                accepted, _ = _resolve_variant_for_system(
                    loader_variants, backend, cpu, system, Version("{}.{}".format(*target.torch)),
                    target.cxx_abi == "cxx11" if system == "linux" else None, None, Version("26.0"))
                loader = accepted[0].variant_str if accepted else None
                fits = [w for w in listed if w.machine in (None, (system, cpu))]
                picked = max(fits, key=lambda w: w.version).variant if fits else None
                compared += 1
                if picked is None and loader is not None:
                    # Documented: +xpu sorts above +torch...xpu..., so the Python-only
                    # build is left out where an arch build of the release is listed.
                    assert loader == "torch-xpu" and any(
                        w.variant and w.variant.backend == "xpu" and not w.variant.noarch
                        for w in wheels), (key, system, cpu, subset)
                    continue
                assert (picked.name if picked else None) == loader, (key, system, cpu, subset)
    assert compared > 4000


def test_environment_target_keys() -> None:
    linux = {"os": "linux", "hip": None, "xpu": None, "mps": False}
    assert target_key("2.13.0+cpu", cxx11_abi=True, cuda=None, **linux) == "torch213-cxx11-cpu"
    assert target_key("2.7.1+cu128", cxx11_abi=True, cuda="12.8", **linux) == "torch27-cxx11-cu128"
    assert target_key("2.6.0", cxx11_abi=False, cuda="11.8", **linux) == "torch26-cxx98-cu118"
    assert target_key("2.14.1+cu130", cxx11_abi=True, cuda="13.0", **linux) == "torch214-cxx11-cu130"
    assert target_key("2.13.0", os="linux", cxx11_abi=True, cuda=None, hip="7.1.25424-4179531dcd",
                      xpu=None, mps=False) == "torch213-cxx11-rocm71"
    assert target_key("2.13.0+xpu", os="linux", cxx11_abi=True, cuda=None, hip=None,
                      xpu="20260000", mps=False) == "torch213-cxx11-xpu20260"
    assert target_key("2.12.0", os="linux", cxx11_abi=True, cuda=None, hip=None,
                      xpu="20250300", mps=False) == "torch212-cxx11-xpu20253"
    assert target_key("2.13.0", os="darwin", cxx11_abi=True, cuda=None, hip=None, xpu=None,
                      mps=True) == "torch213-metal"
    assert target_key("2.13.0", os="darwin", cxx11_abi=True, cuda=None, hip=None, xpu=None,
                      mps=False) == "torch213-cpu"
    assert target_key("2.13.0+cu130", os="windows", cxx11_abi=True, cuda="13.0", hip=None,
                      xpu=None, mps=False) == "torch213-cu130"
    # every key parses back with the variant grammar
    for key in ("torch213-cxx11-cpu", "torch213-metal", "torch213-cu130", "torch27-cxx11-cu129"):
        assert parse_target_key(key).key == key


def test_the_contract_reads_back_from_wheel_names() -> None:
    """A wheel's file name alone (local label + platform tag) gives back its variant:
    `install` and `serve` see only file names."""
    for name, (filename, _torch) in CONTRACT.items():
        wheel = parse_kernel_wheel(filename)
        assert wheel is not None and wheel.variant == parse_variant(name), name
    plain = parse_kernel_wheel("einops-0.8.1-py3-none-any.whl")
    assert plain is not None and plain.variant is not None and plain.variant.backend == "universal"
    foreign = parse_kernel_wheel("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert foreign is not None and foreign.variant is None


# --- a site with CPU and CUDA builds for several torch versions ----------------------------

MULTI = {
    # variant -> binary: "real" (the sample's CPU build, runnable here), "so" (the real
    # CPU .so under another variant's name), "aarch64", "macos" (zig-built), or None
    "torch213-cxx11-cpu-x86_64-linux": "real",
    "torch212-cxx11-cpu-x86_64-linux": "so",
    "torch213-cxx11-cpu-aarch64-linux": "aarch64",
    "torch213-cxx11-cu126-x86_64-linux": "so",
    "torch213-cxx11-cu128-x86_64-linux": "so",
    "torch213-cxx11-cu130-x86_64-linux": "so",
    "torch212-cxx11-cu128-x86_64-linux": "so",
    "torch27-cxx11-cu128-x86_64-linux": "so",
    "torch27-cxx98-cu118-x86_64-linux": "so",
    "torch-stable-abi214-cu130-x86_64-linux": "so",
    "torch213-metal-aarch64-darwin": "macos",
    "torch-cuda": None,
    "torch-universal": None,
}

# (target index, --platform or None for this interpreter) -> the file pip must pick
EXPECTED = {
    ("torch213-cxx11-cpu", None): CPU,
    ("torch213-cxx11-cpu", "manylinux_2_28_aarch64"):
        "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
    ("torch213-cxx11-cpu", "macosx_26_0_arm64"): "img2gray-1.1.2-py3-none-any.whl",
    ("torch212-cxx11-cpu", None): "img2gray-1.1.2+torch212cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch213-cxx11-cu130", None): "img2gray-1.1.2+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch213-cxx11-cu130", "manylinux_2_28_aarch64"): "img2gray-1.1.2+cuda-py3-none-any.whl",
    ("torch213-cxx11-cu128", None): "img2gray-1.1.2+torch213cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch213-cxx11-cu129", None): "img2gray-1.1.2+torch213cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch213-cxx11-cu126", None): "img2gray-1.1.2+torch213cu126cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch212-cxx11-cu128", None): "img2gray-1.1.2+torch212cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch27-cxx11-cu128", None): "img2gray-1.1.2+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch27-cxx98-cu118", None): "img2gray-1.1.2+torch27cu118cxx98-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch214-cxx11-cu130", None): "img2gray-1.1.2+torchstableabi214cu130-cp39-abi3-manylinux_2_28_x86_64.whl",
    ("torch213-cxx11-rocm71", None): "img2gray-1.1.2-py3-none-any.whl",
    ("torch213-metal", "macosx_26_0_arm64"): "img2gray-1.1.2+torch213metal-cp39-abi3-macosx_26_0_arm64.whl",
}


@pytest.fixture(scope="module")
def multi_wheels(tmp_path_factory: pytest.TempPathFactory, cpu_build: Path,
                 foreign_binaries: dict[str, Path]) -> Path:
    """Wheels of img2gray 1.1.2 for CPU and CUDA builds of several torch versions, made
    by `to-wheel` from variant folders that reuse real binaries."""
    from kernel_wheels.kernel.digest import digest_folder

    root = tmp_path_factory.mktemp("multi") / "img2gray"
    real_so = next(cpu_build.glob("*.abi3.so"))
    for name, binary in MULTI.items():
        variant = root / "build" / name
        if binary == "real":
            shutil.copytree(cpu_build, variant)
            continue
        variant.mkdir(parents=True)
        (variant / "__init__.py").write_text(f'VARIANT = "{name}"\n')
        (variant / "_ops.py").write_text("ops = None\n")
        if binary == "so" and "-cu1" in name:
            with_device_code(real_so, variant / real_so.name)  # a CUDA build holds device code
        elif binary == "so":
            shutil.copy(real_so, variant / real_so.name)
        elif binary is not None:
            key = {"aarch64": "linux-aarch64", "macos": "macos-26"}[binary]
            shutil.copy(foreign_binaries[key], variant / "_img2gray_x.abi3.so")
        (variant / "img2gray").mkdir()
        (variant / "img2gray" / "__init__.py").write_text("from .. import *\n")
        backend = "cuda" if "-cu1" in name else "metal" if "-metal-" in name else "cpu"
        meta = {"name": "img2gray", "id": "_img2gray_x", "version": 1, "license": "apache-2.0",
                "python-depends": [], "backend": {"type": backend},
                "digest": {"algorithm": "sha256", "files": digest_folder(variant)}}
        (variant / "metadata.json").write_text(json.dumps(meta))
    out = tmp_path_factory.mktemp("multi-wheels")
    run_cli("to-wheel", root, "1.1.2", "-o", out)
    assert len(list(out.glob("*.whl"))) == len(MULTI)
    return out


@pytest.fixture(scope="module")
def multi_site(multi_wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("multi-site") / "site"
    proc = run_cli("index", multi_wheels, "-o", site, "--target", "torch213-cxx11-cu129",
                   "--target", "torch213-cxx11-rocm71", "--target", "torch214-cxx11-cu130",
                   "--json")
    result = json.loads(proc.stdout)
    assert len(result["added"]) == len(MULTI)
    return site


def test_site_layout_and_pages(multi_site: Path, multi_wheels: Path) -> None:
    listed = validate_site(multi_site)
    assert listed["simple"] == {p.name for p in multi_wheels.glob("*.whl")}
    targets = sorted(k for k in listed if k != "simple")
    assert targets == sorted(f"{t}/simple" for t in [
        "torch213-cxx11-cpu", "torch212-cxx11-cpu", "torch213-cxx11-cu126", "torch213-cxx11-cu128",
        "torch213-cxx11-cu130", "torch212-cxx11-cu128", "torch27-cxx11-cu128", "torch27-cxx98-cu118",
        "torch213-metal", "torch213-cxx11-cu129", "torch213-cxx11-rocm71", "torch214-cxx11-cu130"])
    # a CPU target never lists a CUDA build
    for name in listed["torch213-cxx11-cpu/simple"]:
        wheel = parse_kernel_wheel(name)
        assert wheel and wheel.variant and wheel.variant.backend in ("cpu", "universal"), name
    # PEP 503 / 691 / 658 details
    page = (multi_site / "simple" / "img2gray" / "index.html").read_text()
    assert '<meta name="pypi:repository-version" content="1.1">' in page
    link = next(a for a in anchors(page) if "torch213cpucxx11" in (a["href"] or "")
                and "x86_64" in (a["href"] or ""))
    assert link["href"].startswith("../../files/img2gray-1.1.2%2Btorch213cpucxx11-")
    assert link["data-requires-python"] == ">=3.9"
    assert link["data-dist-info-metadata"] == link["data-core-metadata"]
    data = json.loads((multi_site / "simple" / "img2gray" / "index.json").read_text())
    assert data["meta"]["api-version"] == "1.1" and data["name"] == "img2gray"
    assert "1.1.2+torch213cpucxx11" in data["versions"] and "1.1.2" in data["versions"]
    entry = next(f for f in data["files"] if f["filename"] == CPU)
    assert entry["requires-python"] == ">=3.9" and entry["yanked"] is False
    assert entry["size"] == (multi_site / "files" / CPU).stat().st_size
    with zipfile.ZipFile(multi_site / "files" / CPU) as zf:
        metadata = zf.read("img2gray-1.1.2+torch213cpucxx11.dist-info/METADATA")
    assert (multi_site / "files" / f"{CPU}.metadata").read_bytes() == metadata
    root = json.loads((multi_site / "simple" / "index.json").read_text())
    assert root["projects"] == [{"name": "img2gray"}]
    assert "torch213-cxx11-cpu/simple/" in (multi_site / "index.html").read_text()


def test_every_target_index_gives_pip_the_expected_wheel(multi_site: Path) -> None:
    with static_server(multi_site) as base:
        for (target, platform), expected in EXPECTED.items():
            picked = pip_pick(f"{base}{target}/simple/", "img2gray", platform=platform)
            assert picked == expected, (target, platform)
        # the root index lists everything: plain pip there is not told what fits
        assert pip_pick(f"{base}simple/", "img2gray") is not None


# --- incremental, atomic, locked, refusing ---------------------------------------------------


@pytest.fixture(scope="module")
def small_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noarch_wheels(tmp_path_factory.mktemp("small") / "w", 30, 3)[0].parent


def _changed(before: dict[str, tuple[int, int, str]], after: dict[str, tuple[int, int, str]]) -> set[str]:
    return {path for path in set(before) | set(after) if before.get(path) != after.get(path)}


def test_adding_a_wheel_rewrites_only_what_changed(tmp_path: Path, small_wheels: Path,
                                                   multi_wheels: Path) -> None:
    site = tmp_path / "site"
    run_cli("index", small_wheels, multi_wheels / CPU, "-o", site)
    before = tree_snapshot(site)
    rerun = run_cli("index", small_wheels, multi_wheels / CPU, "-o", site)
    assert "0 wheel(s) added" in rerun.stderr
    assert _changed(before, tree_snapshot(site)) == set()  # nothing rewritten, not even the state

    extra = make_noarch_wheels(tmp_path / "extra", 1, 1, start=7, name="other")[0]
    run_cli("index", extra, "-o", site)
    changed = _changed(before, tree_snapshot(site))
    assert changed == {
        f"files/{extra.name}", f"files/{extra.name}.metadata",
        "simple/index.html", "simple/index.json",
        "simple/other-00007/index.html", "simple/other-00007/index.json",
        # a universal build: listed in the one target index, which gains a project
        "torch213-cxx11-cpu/simple/index.html", "torch213-cxx11-cpu/simple/index.json",
        "torch213-cxx11-cpu/simple/other-00007/index.html",
        "torch213-cxx11-cpu/simple/other-00007/index.json",
        ".kernel-wheels/state.json"}
    validate_site(site)


def test_corrupt_or_conflicting_wheels_are_refused_and_nothing_changes(
        tmp_path: Path, small_wheels: Path) -> None:
    site = tmp_path / "site"
    run_cli("index", small_wheels, "-o", site)
    before = tree_snapshot(site)
    good = make_noarch_wheels(tmp_path / "good", 1, 1, start=500)[0]
    bad = corrupt_copy(make_noarch_wheels(tmp_path / "src", 1, 1, start=501)[0], tmp_path / "bad")
    proc = run_cli("index", good, bad, "-o", site, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"kernel-wheels: error: {bad.name} refused: [record]")
    assert "Traceback" not in proc.stderr
    assert tree_snapshot(site) == before
    # same name as a wheel in the site, different bytes
    existing = sorted(small_wheels.iterdir())[0]
    conflicting = corrupt_copy(existing, tmp_path / "conflict")
    proc = run_cli("index", conflicting, "-o", site, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"kernel-wheels: error: {existing.name} is already in {site} "
                                   "with different content; a published file never changes: "
                                   "give the new build another version")
    assert tree_snapshot(site) == before


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    cases = [(["index", tmp_path / "missing", "-o", tmp_path / "s"], "does not exist"),
             (["index", "-o", tmp_path / "s", "--target", "cuda12"], "is not a target key"),
             (["index", Path(__file__), "-o", tmp_path / "s"], "is not a wheel (.whl)")]
    for args, message in cases:
        proc = run_cli(*args, check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("phase", ["checks", "files", "pages"])
def test_a_run_killed_midway_leaves_a_valid_index(tmp_path: Path, small_wheels: Path,
                                                  multi_wheels: Path, phase: str) -> None:
    """SIGKILL while workers check the new wheels, while the run moves files into place,
    or while it writes pages: the previous pages and every file they link stay valid,
    the workers die with the run, and the next run completes."""
    site = tmp_path / "site"
    run_cli("index", small_wheels, multi_wheels / CPU, "-o", site)
    listed_before = validate_site(site)
    files_before = len(os.listdir(site / "files"))
    batch = make_noarch_wheels(tmp_path / "batch", 1000, 2, start=1000)
    process = subprocess.Popen([sys.executable, "-m", "kernel_wheels", "index",
                                str(batch[0].parent), "-o", str(site), "-j", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    deadline = time.monotonic() + 180
    while process.poll() is None and time.monotonic() < deadline:
        if phase == "checks":
            workers |= _children(process.pid)
            if len(workers) >= 2:
                time.sleep(0.3)
                break
        elif (phase == "files" and len(os.listdir(site / "files")) > files_before + 100) or \
                (phase == "pages" and (site / "simple" / "kernel-01000").exists()):
            break
        time.sleep(0.002)
    assert process.poll() is None, f"the run ended before it could be killed ({phase})"
    process.send_signal(signal.SIGKILL)
    process.wait()
    if phase == "checks":
        # the workers die with the run; the deadline is a guard against waiting forever for
        # one that does not (they go at once), not a measure
        deadline = time.monotonic() + 60
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "worker processes outlived the killed run"
    listed = validate_site(site)
    for index, names in listed_before.items():
        assert names <= listed[index]
    # the next run finishes the job
    run_cli("index", batch[0].parent, "-o", site)
    final = validate_site(site)
    assert {p.name for p in batch} <= final["simple"]
    assert not (site / ".kernel-wheels" / "staging").exists()


def test_two_runs_at_once_do_not_corrupt_the_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    first = make_noarch_wheels(tmp_path / "a", 150, 2, start=0)
    second = make_noarch_wheels(tmp_path / "b", 150, 2, start=150)
    runs = [subprocess.Popen([sys.executable, "-m", "kernel_wheels", "index", str(batch[0].parent),
                              "-o", str(site)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for batch in (first, second)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert any("waiting for another kernel-wheels run" in err for _, err in outputs)
    listed = validate_site(site)
    assert listed["simple"] == {p.name for p in first + second}
    state = json.loads((site / ".kernel-wheels" / "state.json").read_text())
    assert len(state["wheels"]) == 600


def test_pages_render_from_entries_alone() -> None:
    """What `serve` relies on: pages are a pure function of wheel entries, also for
    files not built yet (no hash, no size, metadata promised without a hash)."""
    from kernel_wheels.index.simple import WheelEntry, render_index

    entries = [WheelEntry("img2gray", CPU, f"/files/{CPU}", None, ">=3.9", None, size=None,
                          core_metadata_unhashed=True),
               WheelEntry("Img2Gray", "img2gray-1.1.1-py3-none-any.whl", "/f/a.whl", "ab" * 32,
                          None, "cd" * 32, yanked="broken", size=10)]
    pages = render_index(entries)
    assert sorted(pages) == ["", "img2gray/"]
    assert pages == render_index(list(reversed(entries)))  # order of entries does not matter
    html, page_json = pages["img2gray/"]
    links = anchors(html)
    assert [a["href"] for a in links] == [f"/f/a.whl#sha256={'ab' * 32}", f"/files/{CPU}"]
    assert links[0]["data-yanked"] == "broken" and links[1]["data-core-metadata"] == "true"
    data = json.loads(page_json)
    assert data["meta"]["api-version"] == "1.0" and "versions" not in data  # a size is unknown
    assert data["files"][1]["core-metadata"] is True and data["files"][1]["hashes"] == {}
    assert json.loads(pages[""][1])["projects"] == [{"name": "img2gray"}]

"""The SBOM every wheel carries (PEP 770, CycloneDX 1.6): valid against the official
schema (cyclonedx-python-lib's strict JSON validator), complete (every file with its
sha256, the kernel's repository, commit and variant, metadata.json's facts, the Python
dependencies, kernel-wheels as the tool), the same bytes on every run, made without a
second read of any binary, and verified by `check`."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import threading
import zipfile
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from kernel_wheels import __version__
from kernel_wheels.wheel.sbom import SbomFacts, sbom_member
from kernel_wheels.wheel.writer import Member, write_wheel
from support.helpers import run_cli

SBOM = "sboms/kernel-wheels.cdx.json"


def _sbom(wheel: Path) -> tuple[dict[str, object], dict[str, bytes]]:
    """The SBOM document and every other member's bytes (RECORD left out)."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sbom_name = next(n for n in names if n.endswith(".dist-info/" + SBOM))
        members = {n: zf.read(n) for n in names
                   if n != sbom_name and not n.endswith(".dist-info/RECORD")}
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        assert any(row[0] == sbom_name and row[1] for row in csv.reader(io.StringIO(record)))
        return json.loads(zf.read(sbom_name)), members


def _files(document: dict[str, object]) -> dict[str, str]:
    kernel = next(c for c in document["components"] if c["bom-ref"] == "kernel")  # type: ignore[attr-defined]
    return {f["name"]: f["hashes"][0]["content"] for f in kernel["components"]}


def _properties(component: dict[str, object]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component["properties"]}  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def hub_wheels(olah: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both sample wheels of tag v1.1.2 from the Hub (through olah): a source URL and a commit."""
    out = tmp_path_factory.mktemp("hub-wheels")
    home = tmp_path_factory.mktemp("hf-home")
    run_cli("to-wheel", "drbh/img2gray", "1.1.2", "-o", out,
            env={"HF_ENDPOINT": olah.endpoint, "HF_HOME": str(home),  # type: ignore[attr-defined]
                 "KERNEL_WHEELS_CACHE": str(home / "kw"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    return out


def test_every_wheel_carries_a_cyclonedx_sbom_that_validates(hub_wheels: Path, kernel_repo: Path) -> None:
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    wheels = sorted(hub_wheels.glob("*.whl"))
    assert len(wheels) == 2
    commit = (kernel_repo / ".git").exists() and os.popen(
        f"git -C {kernel_repo} rev-parse 'v1.1.2^{{commit}}'").read().strip()
    for wheel in wheels:
        document, members = _sbom(wheel)
        assert validator.validate_str(json.dumps(document)) is None, wheel.name
        assert document["bomFormat"] == "CycloneDX" and document["specVersion"] == "1.6"
        assert str(document["serialNumber"]).startswith("urn:uuid:")
        # every member (RECORD and the SBOM itself aside), with the sha256 it has
        assert _files(document) == {n: hashlib.sha256(b).hexdigest() for n, b in members.items()}
        metadata = document["metadata"]
        assert metadata["tools"]["components"][0]["name"] == "kernel-wheels"  # type: ignore[index]
        assert metadata["tools"]["components"][0]["version"] == __version__  # type: ignore[index]
        assert metadata["component"]["version"] == wheel.name.split("-")[1]  # type: ignore[index]
        kernel = next(c for c in document["components"] if c["bom-ref"] == "kernel")  # type: ignore[attr-defined]
        props = _properties(kernel)
        assert kernel["name"] == "img2gray" and kernel["version"] == "1.1.2"
        assert kernel["externalReferences"] == [{"type": "vcs", "url": "https://huggingface.co/kernels/drbh/img2gray"}]
        assert kernel["licenses"] == [{"expression": "Apache-2.0"}]
        assert props["kernel-wheels:commit"] == commit and props["kernel-wheels:release"] == "v1.1.2"
        assert props["kernel-wheels:variant"] == ("torch213-cxx11-cpu-x86_64-linux" if "cpu" in wheel.name
                                                  else "torch214-cxx11-cu130-x86_64-linux")
        # metadata.json's backend facts; its digest is the file list, not a property
        assert props["kernel-wheels:metadata:backend.type"] in ("cpu", "cuda")
        assert not any(name.startswith("kernel-wheels:metadata:digest") for name in props)
        dependencies = [c for c in document["components"] if c["bom-ref"].startswith("pypi:")]  # type: ignore[attr-defined]
        assert [(d["name"], _properties(d)["kernel-wheels:requirement"]) for d in dependencies] == \
            [("torch", "torch==2.13.*" if "cpu" in wheel.name else "torch==2.14.*")]
    cuda = next(w for w in wheels if "cu130" in w.name)
    assert _properties(next(c for c in _sbom(cuda)[0]["components"] if c["bom-ref"] == "kernel"))[  # type: ignore[attr-defined]
        "kernel-wheels:metadata:backend.archs"] == "8.0,9.0+PTX"


def test_two_runs_give_identical_sbom_bytes(cpu_build: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kernel" / "build"
    shutil.copytree(cpu_build, folder / cpu_build.name)
    first = run_cli("to-wheel", folder.parent, "1.1.2", "-o", tmp_path / "a")
    second = run_cli("to-wheel", folder.parent, "1.1.2", "-o", tmp_path / "b",
                     env={"TZ": "Pacific/Auckland"})
    assert first.returncode == second.returncode == 0
    [a] = sorted((tmp_path / "a").glob("*.whl"))
    [b] = sorted((tmp_path / "b").glob("*.whl"))
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        name = next(n for n in za.namelist() if n.endswith(SBOM))
        assert za.read(name) == zb.read(name)
    assert a.read_bytes() == b.read_bytes()


def test_sbom_is_made_without_reading_a_binary_twice(tmp_path: Path) -> None:
    """The binary is a FIFO its writer fills once: a second read of it would wait for a
    writer that never comes, and the wheel would not be finished."""
    fifo = tmp_path / "kernel.so"
    os.mkfifo(fifo)
    payload = os.urandom(3 << 20)
    feeder = threading.Thread(target=lambda: fifo.write_bytes(payload), daemon=True)
    feeder.start()
    facts = SbomFacts("k-1-py3-none-any.whl", "k", "1", "k", "1", "torch-universal", None, None,
                      None, None, ("torch",), {})
    members = [Member("k/kernel.so", source=fifo), Member("k-1.dist-info/METADATA", content=b"x"),
               sbom_member("k-1.dist-info", facts)]
    done: list[object] = []
    writer = threading.Thread(target=lambda: done.append(write_wheel(tmp_path / "k.whl", members,
                                                                     "k-1.dist-info", 0)),
                              daemon=True)
    writer.start()
    writer.join(timeout=120)
    assert done, "the wheel was not finished: something read the binary again"
    with zipfile.ZipFile(tmp_path / "k.whl") as zf:
        document = json.loads(zf.read("k-1.dist-info/" + SBOM))
        assert zf.read("k/kernel.so") == payload
    assert _files(document)["k/kernel.so"] == hashlib.sha256(payload).hexdigest()


def _rewrite(wheel: Path, out: Path, change: dict[str, bytes]) -> Path:
    """A copy of ``wheel`` with members replaced and RECORD rewritten to match, so that
    only the SBOM's own check can object."""
    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members.update(change)
    record_name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = []
    for name, data in members.items():
        if name != record_name:
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(data)}")
    members[record_name] = ("\n".join(rows) + f"\n{record_name},,\n").encode()
    target = out / wheel.name
    with zipfile.ZipFile(target, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return target


@pytest.mark.parametrize("tamper, message", [
    ("digest", "img2gray/__init__.py: its sha256 differs from the SBOM's"),
    ("unlisted", "is in the wheel but not in its SBOM"),
    ("phantom", "the SBOM lists img2gray/backdoor.so, which is not in the wheel"),
    ("not-json", "sboms/kernel-wheels.cdx.json: not valid JSON"),
    ("no-files", "sboms/kernel-wheels.cdx.json: no kernel component with a file list"),
])
def test_check_refuses_a_wheel_whose_sbom_disagrees_with_its_files(
        hub_wheels: Path, tmp_path: Path, tamper: str, message: str) -> None:
    wheel = next(hub_wheels.glob("*cpu*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        sbom_name = next(n for n in zf.namelist() if n.endswith(SBOM))
        document = json.loads(zf.read(sbom_name))
    kernel = next(c for c in document["components"] if c["bom-ref"] == "kernel")
    change: dict[str, bytes] = {}
    if tamper == "digest":
        entry = next(f for f in kernel["components"] if f["name"] == "img2gray/__init__.py")
        entry["hashes"][0]["content"] = "0" * 64
    elif tamper == "unlisted":
        kernel["components"] = kernel["components"][1:]
    elif tamper == "phantom":
        kernel["components"].append({"type": "file", "name": "img2gray/backdoor.so",
                                     "hashes": [{"alg": "SHA-256", "content": "0" * 64}]})
    elif tamper == "no-files":
        del kernel["components"]
    change[sbom_name] = b"{not json" if tamper == "not-json" else json.dumps(document).encode()
    bad = _rewrite(wheel, tmp_path, change)
    proc = run_cli("check", bad, "--json", check=False)
    assert proc.returncode == 1, proc.stdout
    report = json.loads(proc.stdout)
    failures = [f for r in report for f in r["findings"] if f["status"] == "fail"]
    assert any(f["check"] == "sbom" and message in f["message"] for f in failures), failures
    # Beside the SBOM rule, only the closed contract speaks: the SBOM (and the RECORD
    # listing it) are not what kernel-wheels derives; no other file is blamed.
    others = [f for f in failures if f["check"] != "sbom"]
    assert {f["check"] for f in others} <= {"contract"}, failures
    assert all(f["message"].startswith((sbom_name, sbom_name.split("/")[0] + "/RECORD")) for f in others), others
    assert "Traceback" not in proc.stderr


def test_check_passes_the_sbom_of_a_fresh_wheel(hub_wheels: Path) -> None:
    proc = run_cli("check", hub_wheels, "--json")
    report = json.loads(proc.stdout)
    for wheel in report:
        sbom = [f for f in wheel["findings"] if f["check"] == "sbom"]
        assert [f["status"] for f in sbom] == ["pass"], sbom

"""Issue #22, item 4: `kernel-wheels serve` lists every kernel before it starts (a kernel
that cannot be listed stops the start-up, or with --unlisted degraded makes /healthz say
degraded), and serve and to-wheel give the same wheel, name and bytes, for a repository
whose name is not the kernel's (metadata.json's) name. Real olah on 127.0.0.1 serving a
CPU-only kernel repository under two names. On a terminal, serve says in a line where to
point pip and `kernel-wheels install`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from support.helpers import ROOT, SAMPLE, Olah, free_port, olah_server, run_cli
from support.servers_serve import get, serve

CPU_TAIL = "1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="module")
def hub(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Olah]:
    """drbh/img2gray and drbh/bigkernel: the same CPU-only repository (metadata.json
    says img2gray) under two names."""
    output = tmp_path_factory.mktemp("startup-build")
    shutil.copytree(cpu_build, output / "build" / cpu_build.name)
    root = tmp_path_factory.mktemp("startup-olah")
    repo = root / "mirror" / "kernels" / "drbh" / "img2gray"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kernel_repo.py"), str(output), str(repo),
                    "--card", str(SAMPLE / "README.md")], check=True, capture_output=True)
    shutil.copytree(repo, root / "mirror" / "kernels" / "drbh" / "bigkernel")
    with olah_server(root, root / "mirror", "kernels/drbh/img2gray") as server:
        yield server


def env_for(hub: Olah, folder: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(folder / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(folder / "kw-cache")}


def health(base: str) -> dict[str, object]:
    status, _, body = get(base + "healthz")
    assert status == 200
    found: dict[str, object] = json.loads(body)
    return found


def test_a_kernel_that_cannot_be_listed_stops_the_start_up(hub: Olah, tmp_path: Path) -> None:
    proc = run_cli("serve", "--kernels", "drbh/img2gray,drbh/no-such-kernel", "--cache", tmp_path / "cache",
                   "--port", str(free_port()), "--retries", "0", env=env_for(hub, tmp_path), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("kernel-wheels: error: cannot list drbh/no-such-kernel: "), line
    assert line.endswith(": not starting; check the name, HF_ENDPOINT and HF_TOKEN, or start with "
                         "--unlisted degraded to serve the other kernels (/healthz then says degraded)")
    assert "trying again" not in proc.stderr  # --retries 0: stopped at the first answer, no retry


def test_unlisted_degraded_serves_the_others_and_healthz_says_so(hub: Olah, tmp_path: Path) -> None:
    with serve("drbh/img2gray,drbh/no-such-kernel", tmp_path / "cache", env_for(hub, tmp_path),
               "--unlisted", "degraded", "--retries", "0") as server:
        found = health(server.base)  # before any page was asked for
        assert (found["status"], found["listed"], found["unlisted"]) == ("degraded", 1, 1)
        problems = found["problems"]
        assert isinstance(problems, list)
        assert [(p["repo"], p["state"]) for p in problems] == [("drbh/no-such-kernel", "unlisted")]
        assert get(server.base + "simple/img2gray/")[0] == 200
        assert [e["repo"] for e in server.events("kernel-unlisted")] == ["drbh/no-such-kernel"]


def test_every_kernel_is_listed_before_the_first_request(hub: Olah, tmp_path: Path) -> None:
    with serve("drbh/img2gray,drbh/bigkernel", tmp_path / "cache", env_for(hub, tmp_path)) as server:
        found = health(server.base)
        assert (found["status"], found["listed"], found["unlisted"]) == ("ok", 2, 0)


def test_a_renamed_repository_is_named_after_its_kernel_not_served_under_another_name(
        hub: Olah, tmp_path: Path) -> None:
    """drbh/bigkernel's metadata.json names the kernel img2gray. A kernel wheel's project
    is named after its package (issue #37: a project that installs another package's name
    is a trap), so to-wheel names its wheel img2gray, with a warning, byte for byte the
    wheel of drbh/img2gray's same build; serve, which lists by the repository's name
    before any download, does not serve a bigkernel wheel that installs img2gray/."""
    env = env_for(hub, tmp_path)
    converted = {}
    for repo in ("drbh/bigkernel", "drbh/img2gray"):
        out = tmp_path / repo.replace("/", "-")
        proc = run_cli("to-wheel", repo, "1.1.2", "-o", out, "--json", env=env)
        (wheel,) = [Path(w["path"]) for w in json.loads(proc.stdout)["wheels"]]
        converted[repo] = (wheel, proc.stderr)
    wheel, said = converted["drbh/bigkernel"]
    assert wheel.name == f"img2gray-{CPU_TAIL}"
    assert "warning: the repository's name bigkernel does not name the kernel's package img2gray: its " \
           "wheels are named img2gray instead" in said
    with zipfile.ZipFile(wheel) as zf:
        assert any(name.startswith("img2gray/") for name in zf.namelist())
    with serve("drbh/bigkernel,drbh/img2gray", tmp_path / "cache", {**env, "HF_HOME": str(tmp_path / "hf-2")}) \
            as server:
        img2gray, _ = converted["drbh/img2gray"]
        status, _, served = get(f"{server.base}files/{quote(img2gray.name, safe='')}")
        assert status == 200 and served == img2gray.read_bytes()
        status, _, page = get(f"{server.base}simple/bigkernel/", "application/vnd.pypi.simple.v1+json")
        assert status == 200
        listed = [f["filename"] for f in json.loads(page)["files"]]
        assert listed  # listed by the repository's name (serve reads no metadata.json to list)
        for name in listed:
            status, _, body = get(f"{server.base}files/{quote(name, safe='')}")
            assert status >= 500, (name, status)  # never a bigkernel wheel holding img2gray/
            assert b"a kernel wheel's project is named after the package it installs" in body, body[:300]


def test_serve_on_a_terminal_prints_a_human_line_with_the_urls(hub_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    import pexpect

    from support.helpers import free_port

    port = free_port()
    child = pexpect.spawn(sys.executable, ["-m", "kernel_wheels", "serve", "--kernels", "drbh/img2gray",
                                           "--port", str(port), "--cache", str(tmp_path / "c")],
                          env={**os.environ, **hub_env}, encoding="utf-8", timeout=120,
                          dimensions=(40, 400))
    try:
        child.expect(r"serving drbh/img2gray at (\S+): kernel-wheels install img2gray -i (\S+) ")
        assert child.match.group(1) == f"http://127.0.0.1:{port}/"
        assert child.match.group(2) == f"http://127.0.0.1:{port}/simple/"
        child.expect(r"pip install img2gray --index-url \S+/TARGET/simple/")
        child.expect("Application startup complete")
        child.kill(signal.SIGTERM)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)

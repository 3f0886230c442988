"""Issue #33 (UX round 3): what a newcomer and a platform engineer tripped over, each
tried as they would, with the real command, real servers on 127.0.0.1 and real venvs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import ROOT, UV, make_venv, one_line_error, run_cli, torch_wheel
from support.helpers import cuda_python as cuda_venv_python
from support.hostile_index import HostileIndex, answer
from support.mirror_hub import S3Server, s3_server
from support.servers_index import IndexServer, pip_env, pypiserver, static_server


@pytest.fixture(scope="module")
def kernel_folder(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder holding the sample kernel's CPU build, as `build -o` writes it."""
    root = tmp_path_factory.mktemp("kernel") / "img2gray"
    shutil.copytree(cpu_build, root / "build" / cpu_build.name)
    return root


@pytest.fixture(scope="module")
def variant_output(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`to-wheel --variants` output: the plain wheel and its variant wheel."""
    out = tmp_path_factory.mktemp("variants")
    run_cli("to-wheel", kernel_folder, "1.1.2", "--variants", "-o", out)
    assert len(list(out.glob("*.whl"))) == 2
    return out


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    with pypiserver(tmp_path_factory.mktemp("pypiserver")) as server:
        yield server


def _publish_env(server: IndexServer) -> dict[str, str]:
    return {**pip_env(), "TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}


# --- 1. publish refuses variant wheels up front --------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_publish_refuses_variant_wheels_before_uploading(variant_output: Path, pypi: IndexServer,
                                                         as_json: bool) -> None:
    proc = run_cli("publish", variant_output, "--repository-url", pypi.upload_url,
                   *(["--json"] if as_json else []), env=_publish_env(pypi), check=False)
    line = one_line_error(proc, "variant wheel", "index", status=2)
    assert "--variants" in line, line
    assert pypi.listing() == {}  # nothing uploaded, not even the plain wheel
    if as_json:
        error = json.loads(proc.stdout)["error"]
        assert error["type"] == "UsageError" and "variant wheel" in error["message"]


# --- 5. self-built kernels carry their Hub repository to get_kernel ------------------------

HUB_KERNEL = """\
[general]
name = "kw-hub"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "acme/kw-hub"

[torch-noarch]
"""


def build_hub_kernel(root: Path, toml: str = HUB_KERNEL) -> Path:
    """A Python-only kernel (kernel-builder's torch-noarch) built by `build`: its
    torch-cpu variant fits any torch that runs on the CPU."""
    tree = root / "kw-hub"
    (tree / "torch-ext" / "kw_hub").mkdir(parents=True)
    (tree / "torch-ext" / "kw_hub" / "__init__.py").write_text("def answer():\n    return 42\n")
    (tree / "build.toml").write_text(toml)
    run_cli("build", tree, "-o", root / "out")
    return root / "out"


def _pip_install(python: Path, *wheels: Path) -> None:
    subprocess.run([UV, "pip", "install", "-q", "--no-deps", "--python", str(python),
                    *map(str, wheels)], check=True, capture_output=True, env=pip_env())


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without torch: local-kernels reads dist-infos only."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v")


def test_build_records_hub_repo_id_and_local_kernels_maps_it(tmp_path: Path,
                                                             plain_venv: Path) -> None:
    build_hub_kernel(tmp_path)
    meta = json.loads((tmp_path / "out" / "build" / "torch-cpu" / "metadata.json").read_text())
    assert meta["repo-id"] == "acme/kw-hub"
    run_cli("to-wheel", tmp_path / "out", "1.0.0", "-o", tmp_path / "wheels")
    _pip_install(plain_venv, *(tmp_path / "wheels").glob("*.whl"))
    proc = run_cli("local-kernels", "--python", plain_venv)
    installed = plain_venv.parent.parent / "lib"
    mapping = dict(entry.split("=", 1) for entry in proc.stdout.strip().split(":"))
    assert Path(mapping["acme/kw-hub"]).is_relative_to(installed), proc.stdout
    assert (Path(mapping["acme/kw-hub"]) / "metadata.json").is_file()
    assert "no repository id" not in proc.stderr


def test_to_wheel_repo_id_of_a_plain_folder(kernel_folder: Path, tmp_path: Path,
                                            plain_venv: Path) -> None:
    run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", "acme/img2gray", "-o", tmp_path)
    wheel = next(tmp_path.glob("*.whl"))
    _pip_install(plain_venv, wheel)
    listed = json.loads(run_cli("local-kernels", "--python", plain_venv, "--json").stdout)
    assert {k["distribution"]: k["repo_id"] for k in listed}["img2gray"] == "acme/img2gray"


@pytest.mark.parametrize("repo_id", ["acme", "acme/../x", "a/b=c", "a/b:c"])
def test_to_wheel_refuses_a_malformed_repo_id(kernel_folder: Path, tmp_path: Path,
                                              repo_id: str) -> None:
    proc = run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", repo_id, "-o", tmp_path,
                   check=False)
    one_line_error(proc, "--repo-id", "org/name", status=2)
    assert not list(tmp_path.iterdir())


def test_metadata_repo_id_from_a_hostile_folder_is_refused(kernel_folder: Path,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "k"
    shutil.copytree(kernel_folder, root)
    meta_path = next(root.glob("build/*/metadata.json"))
    meta = json.loads(meta_path.read_text())
    meta["repo-id"] = "acme/x=/etc:evil/y"
    meta_path.write_text(json.dumps(meta))
    proc = run_cli("to-wheel", root, "1.1.2", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "repo-id", status=1)


# --- 4 and 7: install checks what costs nothing first; pip's habits ------------------------

# kw-hub with a Python dependency the test index does not have: --no-deps is then the
# difference between an install and a failure.
HUB_KERNEL_WITH_DEPENDS = HUB_KERNEL.replace('backends = ["cpu"]',
                                             'backends = ["cpu"]\npython-depends = ["einops"]')


@pytest.fixture(scope="module")
def index_url(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A static index (`index` over a web server on 127.0.0.1) with two kernels: img2gray
    (its CPU build for torch 2.13) and kw-hub (Python-only, needing einops)."""
    root = tmp_path_factory.mktemp("index")
    wheels = root / "wheels"
    run_cli("to-wheel", kernel_folder, "1.1.2", "-o", wheels)
    run_cli("to-wheel", build_hub_kernel(root, HUB_KERNEL_WITH_DEPENDS), "1.0.0", "-o", wheels)
    run_cli("index", wheels, "-o", root / "site")
    with static_server(root / "site") as base:
        yield base + "simple/"


TORCH_STAND_IN = """\
# A stand-in for torch that records that it was imported, then fails: the test is about
# when install reads the target Python, not about torch itself.
import os, pathlib
pathlib.Path(os.environ["KW_TEST_TORCH_IMPORTED"]).write_text("imported")
raise ImportError("torch stand-in")
"""


def _venv_with_torch_stand_in(path: Path, pip: bool = True) -> Path:
    """A venv whose torch (2.13.0, as importlib.metadata sees it) records its import."""
    subprocess.run([UV, "venv", "-q", *(["--seed"] if pip else []), str(path)], check=True,
                   capture_output=True)
    site = next(path.glob("lib/python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(TORCH_STAND_IN)
    dist_info = site / "torch-2.13.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    (dist_info / "RECORD").write_text("")
    return path / "bin" / "python"


@pytest.mark.parametrize("case", ["bad name", "closed port", "wrong password", "no pip",
                                  "no torch", "no python"])
def test_install_checks_what_costs_nothing_before_importing_torch(case: str, index_url: str,
                                                                  tmp_path: Path) -> None:
    marker = tmp_path / "torch-imported"
    env = {**pip_env(), "KW_TEST_TORCH_IMPORTED": str(marker)}
    python = _venv_with_torch_stand_in(tmp_path / "venv", pip=case != "no pip")
    args = ["install", "img2gray", "-i", index_url, "--python", python]
    with HostileIndex() as refusing:
        refusing.routes["/simple/img2gray/"] = answer(401, b"no")
        if case == "bad name":
            args[1] = "img2gray=="
        elif case == "closed port":
            with HostileIndex() as gone:
                closed = gone.base
            args[3] = closed + "simple/"
        elif case == "wrong password":
            args[3] = refusing.url("/simple/").replace("http://", "http://reader:wrong@")
        elif case == "no torch":
            args[-1] = make_venv(tmp_path / "bare")
        elif case == "no python":
            args[-1] = tmp_path / "nonexistent" / "python"
        proc = run_cli(*args, env=env, check=False)
    expected = {"bad name": ("img2gray==",), "closed port": ("127.0.0.1",),
                "wrong password": ("401",), "no pip": ("no pip", "--installer uv"),
                "no torch": ("no torch", "--python"), "no python": ("--python",)}[case]
    one_line_error(proc, *expected, status=2 if case in ("bad name", "no python") else 1)
    assert not marker.exists(), f"{case}: torch was imported before the cheap check failed"
    assert "wrong" not in proc.stderr


def test_install_installer_uv_without_uv_is_said_before_importing_torch(index_url: str,
                                                                        tmp_path: Path) -> None:
    """A machine without uv, made with a fault: a stand-in ``uv`` package that fails to
    import shadows the real one (which this venv has), and PATH holds no uv."""
    marker = tmp_path / "torch-imported"
    python = _venv_with_torch_stand_in(tmp_path / "venv")
    shadow = tmp_path / "shadow" / "uv"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no uv on this machine (test fault)")\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {**pip_env(), "KW_TEST_TORCH_IMPORTED": str(marker), "PATH": str(bin_dir),
           "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("install", "img2gray", "-i", index_url, "--python", python, "--installer", "uv",
                   env=env, check=False)
    one_line_error(proc, "--installer uv", "uv is not installed", status=2)
    assert not marker.exists()


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("torch-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


def _installed(python: Path) -> set[str]:
    proc = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"],
                          capture_output=True, text=True, check=True, env=pip_env())
    return {row["name"].lower() for row in json.loads(proc.stdout)}


def test_install_several_names_no_deps_upgrade_and_a_requirements_file(
        index_url: str, torch_venv: Path, tmp_path: Path) -> None:
    # kw-hub needs einops, which the index does not have: pip cannot install it ...
    failed = run_cli("install", "img2gray", "kw-hub", "-i", index_url, "--python", torch_venv,
                     env=pip_env(), check=False)
    one_line_error(failed, "einops")
    assert not {"img2gray", "kw-hub"} & _installed(torch_venv)  # nothing half-installed
    # ... and with --no-deps both go in, in one run
    proc = run_cli("install", "-U", "img2gray", "kw-hub", "--no-deps", "-i", index_url,
                   "--python", torch_venv, env=pip_env())
    assert "chose img2gray-1.1.2+" in proc.stdout and "chose kw_hub-1.0.0+" in proc.stdout
    assert {"img2gray", "kw-hub"} <= _installed(torch_venv)
    assert "einops" not in _installed(torch_venv)
    # a requirements file of kernels, as pip reads one (comments, blank lines)
    requirements = tmp_path / "kernels.txt"
    requirements.write_text("# the kernels this service loads\nimg2gray==1.1.2  # pinned\n\n"
                            "kw-hub>=1\n")
    again = run_cli("install", "-r", requirements, "--no-deps", "-i", index_url,
                    "--python", torch_venv, env=pip_env(), check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("chose ") == 2
    # what pip would do with it and install cannot is refused, by line
    requirements.write_text("--index-url http://elsewhere/simple/\nimg2gray\n")
    refused = run_cli("install", "-r", requirements, "-i", index_url, "--python", torch_venv,
                      env=pip_env(), check=False)
    one_line_error(refused, f"{requirements}:1", status=2)


def test_install_backend_cpu_on_a_cuda_torch(index_url: str) -> None:
    cuda_python = cuda_venv_python()  # fails (not skips) without the CUDA torch venv
    refused = run_cli("install", "kw-hub", "-i", index_url, "--python", cuda_python,
                      "--dry-run", env=pip_env(), check=False)
    line = one_line_error(refused, "no wheel of kw-hub fits", "--backend cpu")
    assert "cu130" in line
    chosen = run_cli("install", "kw-hub", "-i", index_url, "--python", cuda_python,
                     "--dry-run", "--backend", "cpu", "--json", env=pip_env())
    document = json.loads(chosen.stdout)
    assert document["chosen"]["wheel"].startswith("kw_hub-1.0.0+")
    assert document["environment"]["target"].endswith("-cpu")


# --- 7. mirror: a server without listings, an s3:// destination checked first ---------------


def test_mirror_org_against_a_server_without_listings_says_so(tmp_path: Path) -> None:
    with HostileIndex() as hub:
        # A Hub mirror that answers every path with its HTML front page.
        for kind in ("kernels", "models"):
            hub.routes[f"/api/{kind}"] = answer(200, b"<html><body>a mirror</body></html>")
        proc = run_cli("mirror", "--org", "acme", "--to", tmp_path / "site",
                       env={"HF_ENDPOINT": hub.base.rstrip("/"), "HF_HOME": str(tmp_path / "hf")},
                       check=False)
    line = one_line_error(proc, "--org acme", "listing", status=1)
    assert "Expecting value" not in line and "char 0" not in line, line
    assert "name the repositories" in line


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.mark.parametrize("case", ["no credentials", "no bucket"])
def test_mirror_to_s3_checks_destination_and_credentials_before_listing(
        case: str, s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.bucket(f"ux-{case.replace(' ', '-')}") if case == "no credentials" else "ux-missing"
    env = {**s3.env(), "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_CONFIG_FILE": os.devnull,
           "AWS_EC2_METADATA_DISABLED": "true", "HF_HOME": str(tmp_path / "hf")}
    if case == "no credentials":
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env[name] = ""
    with HostileIndex() as hub:
        env["HF_ENDPOINT"] = hub.base.rstrip("/")
        proc = run_cli("mirror", "acme/img2gray", "--to", f"s3://{bucket}/kernels", env=env,
                       check=False)
        assert not hub.seen, "the Hub was asked before the destination was checked"
    if case == "no credentials":
        one_line_error(proc, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", status=2)
    else:
        one_line_error(proc, "ux-missing", "no such bucket", status=1)


# --- 7. usage errors that docs/cli-conformance.md promises --------------------------------


def test_to_wheel_output_that_is_a_file_is_a_usage_error(kernel_folder: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    proc = run_cli("to-wheel", kernel_folder, "1.1.2", "-o", tmp_path / "afile", check=False)
    one_line_error(proc, "afile is a file, not a folder", status=2)


@pytest.mark.parametrize("command", [["install", "img2gray", "--no-index", "-f", "."],
                                     ["local-kernels"]])
def test_python_that_does_not_exist_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    proc = run_cli(*command, "--python", tmp_path / "nonexistent", check=False)
    one_line_error(proc, "--python", "no Python interpreter", status=2)


# --- 7. plurals ------------------------------------------------------------------------------


def test_counts_of_one_are_singular(kernel_folder: Path, tmp_path: Path) -> None:
    converted = run_cli("to-wheel", kernel_folder, "1.1.2", "-o", tmp_path / "wheels")
    assert "done: 1 wheel of " in converted.stderr, converted.stderr
    proc = run_cli("index", tmp_path / "wheels", "-o", tmp_path / "site")
    assert "1 wheel, 1 project, 1 target index;" in proc.stderr, proc.stderr
    with HostileIndex() as gone:
        closed = gone.base.rstrip("/")
    failed = run_cli("versions", "acme/img2gray", "--retries", "0",
                     env={"HF_ENDPOINT": closed, "HF_HOME": str(tmp_path / "hf")}, check=False)
    line = one_line_error(failed, "after 1 try ")
    assert "1 tries" not in line


# --- 7. serve on a terminal says where to point pip -----------------------------------------


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


# --- 7. publish says when the credentials went unused ---------------------------------------


def test_publish_with_everything_there_says_the_credentials_were_not_checked(
        kernel_folder: Path, pypi: IndexServer, tmp_path: Path) -> None:
    run_cli("to-wheel", kernel_folder, "1.1.0", "-o", tmp_path)
    run_cli("publish", tmp_path, "--repository-url", pypi.upload_url, env=_publish_env(pypi))
    wrong = {**_publish_env(pypi), "TWINE_PASSWORD": "not-the-password"}
    again = run_cli("publish", tmp_path, "--repository-url", pypi.upload_url, "--non-interactive",
                    env=wrong)
    assert "already there: img2gray-1.1.0+" in again.stdout
    assert "nothing to upload: the credentials were not used, nor checked" in again.stderr
    assert "not-the-password" not in again.stdout + again.stderr


# --- 6. the README's local Hub recipe works as written --------------------------------------


def test_readme_local_hub_recipe_works_as_written(kernel_repo: Path, tmp_path: Path) -> None:
    """The README's olah recipe, run as a stranger would paste it (its port changed to a
    free one; the last line, a server that runs until stopped, left out)."""
    import signal as signals

    from support.helpers import free_port

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Trying the Hub commands without the Hub", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.replace("8090", str(free_port())).splitlines()
             if not line.startswith("kernel-wheels serve")]
    shutil.copytree(kernel_repo, tmp_path / "out" / "img2gray")  # what the demo leaves
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HOME": str(tmp_path / "hf"), "KERNEL_WHEELS_CACHE": str(tmp_path / "kw")}
    env.pop("HF_ENDPOINT", None)
    log = tmp_path / "recipe.log"
    with log.open("w") as out:  # a file: the background olah keeps its output open
        shell = subprocess.Popen(["bash", "-e", "-c", "\n".join(lines)], cwd=tmp_path, env=env,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        shell.wait(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signals.SIGTERM)  # the olah it started in the background
    output = log.read_text()
    assert shell.returncode == 0, output
    assert "1.1.2    release  v1.1.2" in output, output
    assert len(list((tmp_path / "wheels").glob("img2gray-1.1.2+*.whl"))) == 2, output


# --- 3. the README's install lines work on a fresh clone -------------------------------------


def test_readme_install_lines_name_only_refs_that_exist() -> None:
    """A release tag in an install line must exist; without tags, the lines use main or a
    commit, and the README says how releases are made."""
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    block = install.split("```bash\n", 1)[1].split("```", 1)[0]
    tags = set(subprocess.run(["git", "-C", str(ROOT), "tag"], capture_output=True, text=True,
                              check=True).stdout.split())
    refs = [line.split("git+<repository URL>@", 1)[1].split('"', 1)[0]
            for line in block.splitlines() if "git+<repository URL>@" in line]
    assert refs, block
    for ref in refs:
        assert ref in ("main", "<commit>") or ref in tags, f"@{ref} does not exist (tags: {tags})"
    assert "kernel_wheels-0.1.0" not in block  # no released wheel that was never made
    assert "docs/release.md" in install and "vX.Y.Z" in install

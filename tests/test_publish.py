"""Publishing to real index servers on 127.0.0.1 — pypiserver with htpasswd and
devpi-server with its own user and index — by `kernel-wheels publish`, `twine upload`
and `uv publish`, then `kernel-wheels install` from each into a fresh torch 2.13.0
venv, the op compared with the reference and torch untouched. The failure cases
(bad credentials, a server that is down, a duplicate upload, a corrupt wheel) are one
line, exit non-zero, leave the index unchanged and never show a password. Before uploading,
publish refuses variant wheels, and says when everything was there already that the
credentials went unused. Its twine-like options are in tests/test_publish_options.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import tally
from support.helpers import UV, make_venv, one_line_error, run_cli, torch_wheel
from support.servers_index import (
    BIN,
    IndexServer,
    corrupt_copy,
    devpi,
    make_noarch_wheels,
    pip_env,
    pypiserver,
    run_op,
    sha256,
    torch_fingerprint,
    uninstall,
)

CPU_WHEEL = "img2gray-{}+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def releases(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample kernel's CPU and CUDA wheels of three revisions: one per upload tool."""
    out = {}
    for tool, version in (("kernel-wheels", "1.1.2"), ("twine", "1.1.1"), ("uv", "1")):
        folder = tmp_path_factory.mktemp(f"release-{tool}")
        run_cli("to-wheel", kernel_repo, version, "-o", folder)
        assert len(list(folder.glob("*.whl"))) == 2
        out[tool] = folder
    return out


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, IndexServer]]:
    with pypiserver(tmp_path_factory.mktemp("pypiserver")) as pypi, \
            devpi(tmp_path_factory.mktemp("devpi")) as dev:
        yield {"pypiserver": pypi, "devpi": dev}


def credentials(server: IndexServer) -> dict[str, str]:
    return {**pip_env(), "TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}


def assert_secret_free(proc: subprocess.CompletedProcess[str], *secrets: str) -> None:
    for secret in secrets:
        assert secret not in proc.stdout and secret not in proc.stderr


@pytest.fixture(scope="module")
def published(servers: dict[str, IndexServer], releases: dict[str, Path]) -> dict[str, set[str]]:
    """Every release on both servers, each uploaded by its own tool."""
    for server in servers.values():
        proc = run_cli("publish", releases["kernel-wheels"], "--repository-url", server.upload_url,
                       env=credentials(server))
        assert proc.stdout.count("uploaded: ") == 2, proc.stderr
        assert_secret_free(proc, server.password)
        twine = subprocess.run(
            [str(BIN / "twine"), "upload", "--non-interactive", "--disable-progress-bar",
             "--repository-url", server.upload_url, "-u", server.username, "-p", server.password,
             *map(str, sorted(releases["twine"].glob("*.whl")))],
            capture_output=True, text=True, env=pip_env())
        assert twine.returncode == 0, twine.stdout + twine.stderr
        uv = subprocess.run(
            [UV, "publish", "--publish-url", server.upload_url, "--username", server.username,
             "--password", server.password, "--trusted-publishing", "never",
             *map(str, sorted(releases["uv"].glob("*.whl")))],
            capture_output=True, text=True, env=pip_env())
        assert uv.returncode == 0, uv.stdout + uv.stderr
    return {tool: {p.name for p in folder.glob("*.whl")} for tool, folder in releases.items()}


def test_every_tool_uploads_to_both_servers(servers: dict[str, IndexServer],
                                            releases: dict[str, Path],
                                            published: dict[str, set[str]]) -> None:
    expected = {p.name: sha256(p) for folder in releases.values() for p in folder.glob("*.whl")}
    for server in servers.values():
        assert server.listing() == expected, server.kind


def test_publishing_again_skips_identical_files(servers: dict[str, IndexServer],
                                                releases: dict[str, Path],
                                                published: dict[str, set[str]]) -> None:
    for server in servers.values():
        before = server.listing()
        proc = run_cli("publish", releases["kernel-wheels"], releases["twine"],
                       "--repository-url", server.upload_url, env=credentials(server))
        assert proc.stdout.count("already there: ") == 4 and "uploaded" not in proc.stdout
        assert server.listing() == before


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("publish-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


def test_install_from_the_servers_runs_the_op(servers: dict[str, IndexServer],
                                             published: dict[str, set[str]], venv: Path) -> None:
    """The files of each upload tool, from both servers: `kernel-wheels install` (with pip
    and with uv) picks the CPU build for this torch, the op equals the reference, and
    torch is untouched. Each install replaces the previous img2gray in the same venv."""
    torch_before = torch_fingerprint(venv)
    branch_version = next(n for n in published["uv"] if "cpucxx11" in n).split("-")[1]
    cases = [("pypiserver", "img2gray==1.1.2", "pip", "1.1.2+torch213cpucxx11", ()),  # kernel-wheels publish
             ("pypiserver", "img2gray==1.1.1", "uv", "1.1.1+torch213cpucxx11", ()),  # twine upload
             # the newest, with --pre (a snapshot of branch v1 is a pre-release), by uv publish
             ("devpi", "img2gray", "pip", branch_version, ("--pre",))]
    for server_kind, requirement, installer, version, extra in cases:
        proc = run_cli("install", requirement, "--index-url", servers[server_kind].simple_url,
                       "--python", venv, "--installer", installer, *extra, env=pip_env())
        assert f"chose {CPU_WHEEL.format(version.split('+')[0])}" in proc.stdout, proc.stderr
        result = run_op(venv)
        assert result == {"equal": True, "version": version, "file": result["file"]}
        assert torch_fingerprint(venv) == torch_before
    uninstall(venv)


def test_bad_credentials_are_one_line_and_change_nothing(
        servers: dict[str, IndexServer], published: dict[str, set[str]], tmp_path: Path) -> None:
    wheel = make_noarch_wheels(tmp_path / "w", 1, 1, name="never")[0]
    for server in servers.values():
        before = server.listing("never-00000")
        wrong = "wrong-password-5512"
        env = {**credentials(server), "TWINE_PASSWORD": wrong}
        proc = run_cli("publish", wheel, "--repository-url", server.upload_url, env=env, check=False)
        one_line_error(proc, starts=f"{server.upload_url} refused the upload of {wheel.name} (HTTP 40")
        assert_secret_free(proc, wrong, server.password)
        # the same, with the password in the URL
        host = server.upload_url.replace("http://", f"http://{server.username}:{wrong}@")
        proc = run_cli("publish", wheel, "--repository-url", host, env=pip_env(), check=False)
        one_line_error(proc, starts=f"{server.upload_url} refused the upload")
        assert_secret_free(proc, wrong)
        assert server.listing("never-00000") == before == {}


def test_a_server_that_is_down(tmp_path: Path, venv: Path) -> None:
    from support.helpers import free_port

    wheel = make_noarch_wheels(tmp_path / "w", 1, 1, name="down")[0]
    url = f"http://127.0.0.1:{free_port()}/"
    proc = run_cli("publish", wheel, "--repository-url", url,
                   env={**pip_env(), "TWINE_USERNAME": "u", "TWINE_PASSWORD": "down-secret-99"},
                   check=False)
    one_line_error(proc, starts=f"cannot reach {url}simple/: connection refused")
    assert_secret_free(proc, "down-secret-99")
    proc = run_cli("install", "img2gray", "--index-url", f"{url}simple/", "--python", venv,
                   env=pip_env(), check=False)
    one_line_error(proc, starts=f"cannot reach {url}simple/img2gray/: connection refused")


def test_a_duplicate_upload_is_refused(servers: dict[str, IndexServer], kernel_repo: Path,
                                       published: dict[str, set[str]], tmp_path: Path) -> None:
    """The same file name with other bytes (built at another SOURCE_DATE_EPOCH)."""
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path, "--variant", "torch213-*",
            env={"SOURCE_DATE_EPOCH": "1700000000"})
    rebuilt = tmp_path / CPU_WHEEL.format("1.1.2")
    for server in servers.values():
        before = server.listing()
        assert before[rebuilt.name] != sha256(rebuilt)
        proc = run_cli("publish", rebuilt, "--repository-url", server.upload_url,
                       env=credentials(server), check=False)
        one_line_error(proc, starts=f"{server.simple_url} already has a different {rebuilt.name}")
        assert server.listing() == before


def test_a_corrupt_wheel_is_refused_before_anything_is_uploaded(
        servers: dict[str, IndexServer], published: dict[str, set[str]], tmp_path: Path) -> None:
    good = make_noarch_wheels(tmp_path / "good", 1, 1, name="goodone")[0]
    bad = corrupt_copy(make_noarch_wheels(tmp_path / "src", 1, 1, name="badone")[0], tmp_path / "bad")
    server = servers["pypiserver"]
    proc = run_cli("publish", good, bad, "--repository-url", server.upload_url,
                   env=credentials(server), check=False)
    one_line_error(proc, starts=f"{bad.name} refused: [record]")
    assert server.listing("goodone-00000") == {} and server.listing("badone-00000") == {}


KEYRING_BACKEND = '''
import json, os
import keyring.backend


class FileKeyring(keyring.backend.KeyringBackend):
    """A real keyring backend over a JSON file (the tests' stand-in for a desktop one)."""

    priority = 1

    def _load(self):
        with open(os.environ["KW_TEST_KEYRING"]) as stream:
            return json.load(stream)

    def get_password(self, service, username):
        return self._load().get(service, {}).get(username)

    def set_password(self, service, username, password):
        raise NotImplementedError

    def delete_password(self, service, username):
        raise NotImplementedError
'''


def test_credentials_from_pypirc_and_from_a_keyring(servers: dict[str, IndexServer],
                                                    published: dict[str, set[str]],
                                                    tmp_path: Path) -> None:
    server = servers["devpi"]
    first, second = (make_noarch_wheels(tmp_path / name, 1, 1, name=name)[0]
                     for name in ("fromrc", "fromkeyring"))
    pypirc = tmp_path / "pypirc"
    pypirc.write_text(textwrap.dedent(f"""\
        [distutils]
        index-servers = team

        [team]
        repository = {server.upload_url}
        username = {server.username}
        password = {server.password}
        """))
    proc = run_cli("publish", first, "--repository", "team", "--config-file", pypirc, env=pip_env())
    assert proc.stdout.strip() == f"uploaded: {first.name}"
    assert_secret_free(proc, server.password)
    (tmp_path / "kwtest_keyring.py").write_text(KEYRING_BACKEND)
    store = tmp_path / "keyring.json"
    store.write_text(f'{{"{server.upload_url}": {{"{server.username}": "{server.password}"}}}}')
    env = {**pip_env(), "PYTHON_KEYRING_BACKEND": "kwtest_keyring.FileKeyring",
           "PYTHONPATH": str(tmp_path), "KW_TEST_KEYRING": str(store),
           "TWINE_USERNAME": server.username, "TWINE_REPOSITORY_URL": server.upload_url}
    proc = run_cli("publish", second, env=env)
    assert proc.stdout.strip() == f"uploaded: {second.name}"
    assert_secret_free(proc, server.password)
    assert server.listing("fromkeyring-00000") == {second.name: sha256(second)}


def test_publish_help_has_examples() -> None:
    for command in ("publish", "install", "index"):
        proc = subprocess.run([sys.executable, "-m", "kernel_wheels", command, "--help"],
                              capture_output=True, text=True, env=os.environ)
        assert proc.returncode == 0 and "examples:" in proc.stdout


def test_index_password_never_printed(tmp_path: Path, kernel_repo: Path) -> None:
    """TWINE_PASSWORD and a password in the upload URL, with --json, to a server that is
    down (tests/test_publish.py scans the real servers' answers)."""
    from support.helpers import free_port

    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path / "w", "--variant", CPU)
    secret = "kwFakeIndexPassword-0987"
    port = free_port()
    for url, extra in ((f"http://127.0.0.1:{port}/", {"TWINE_USERNAME": "ci", "TWINE_PASSWORD": secret}),
                       (f"http://ci:{secret}@127.0.0.1:{port}/", {})):
        proc = run_cli("publish", tmp_path / "w", "--repository-url", url, "--json", "--no-keyring",
                       env=extra, check=False)
        assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["exit_code"] == 1
        assert secret not in proc.stdout + proc.stderr
    tally("cli", inputs=2)


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

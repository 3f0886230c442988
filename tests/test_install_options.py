"""`kernel-wheels install` as pip and uv users expect it (issue #22): the index from -i,
PIP_INDEX_URL, UV_* variables or pip.conf; --extra-index-url, --find-links and --no-index;
--pre; credentials from .netrc and a keyring; --cert and --client-cert; one JSON document on
failure; index URLs that are not a Simple API. Real servers on 127.0.0.1 (a static site, a
pypiserver that asks for a password) and a real venv with torch 2.13.0 (CPU)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import free_port, make_venv, run_cli, stop, torch_wheel, wait_for
from support.servers_index import pip_env, static_server, uninstall

CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    with static_server(site) as base:
        yield base


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("conv-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("conv-torch")))


def installer_env(**extra: str) -> dict[str, str]:
    """pip's and uv's settings from this test only (none from the machine)."""
    return {**pip_env(), **extra}


def test_install_takes_pip_index_url_and_is_an_index_install(base_url: str, venv: Path) -> None:
    """No --index-url: PIP_INDEX_URL says where. pip freeze then shows name==version,
    as for any install from an index (no direct URL)."""
    proc = run_cli("install", "img2gray", "--python", venv, "-v",
                   env=installer_env(PIP_INDEX_URL=f"{base_url}simple/"))
    assert proc.stdout.splitlines()[0] == f"chose {CPU_WHEEL}"
    assert "index from PIP_INDEX_URL" in proc.stderr.splitlines()  # -v: where the index came from
    freeze = subprocess.run([str(venv), "-m", "pip", "freeze"], capture_output=True, text=True,
                            env=pip_env()).stdout.splitlines()
    assert "img2gray==1.1.2+torch213cpucxx11" in freeze, freeze
    assert not any(line.startswith("img2gray @") for line in freeze)
    uninstall(venv)


@pytest.mark.parametrize("how", ["UV_INDEX_URL", "UV_DEFAULT_INDEX", "pip.conf [global]",
                                 "pip.conf [install]", "PIP_CONFIG_FILE over the flag? no: flag wins"])
def test_install_reads_uv_variables_and_pip_conf(how: str, base_url: str, venv: Path,
                                                 tmp_path: Path) -> None:
    index = f"{base_url}simple/"
    env = installer_env()
    args = ["install", "img2gray", "--python", venv, "--dry-run", "--json"]
    if how.startswith("UV_"):
        env[how] = index
    elif how.startswith("pip.conf"):
        section = how.split("[")[1].rstrip("]")
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[{section}]\nindex-url = {index}\n")
        env["PIP_CONFIG_FILE"] = str(conf)
    else:  # a flag beats the variables and pip.conf
        conf = tmp_path / "pip.conf"
        conf.write_text("[global]\nindex-url = http://127.0.0.1:9/nowhere/simple/\n")
        env.update(PIP_CONFIG_FILE=str(conf), PIP_INDEX_URL="http://127.0.0.1:9/simple/")
        args += ["-i", index]
    decision = json.loads(run_cli(*args, env=env).stdout)
    assert decision["chosen"]["wheel"] == CPU_WHEEL and decision["installed"] is False


def test_extra_index_url_find_links_and_no_index(base_url: str, wheels: Path, venv: Path) -> None:
    empty = f"{base_url}torch299-cxx11-cpu/simple/"  # no such target: no project there
    extra = json.loads(run_cli("install", "img2gray", "--python", venv, "--dry-run", "--json",
                               "-i", empty, "--extra-index-url", f"{base_url}simple/",
                               env=installer_env()).stdout)
    assert extra["chosen"]["url"].startswith(f"{base_url}") and extra["chosen"]["wheel"] == CPU_WHEEL
    local = json.loads(run_cli("install", "img2gray", "--python", venv, "--dry-run", "--json",
                               "--no-index", "-f", wheels, env=installer_env()).stdout)
    assert local["chosen"]["url"] == (wheels / CPU_WHEEL).resolve().as_uri()
    variable = json.loads(run_cli("install", "img2gray", "--python", venv, "--dry-run", "--json",
                                  "--no-index", env=installer_env(PIP_FIND_LINKS=str(wheels))).stdout)
    assert variable["chosen"]["wheel"] == CPU_WHEEL
    nowhere = run_cli("install", "img2gray", "--python", venv, "--no-index", env=installer_env(),
                      check=False)
    assert (nowhere.returncode, one_error_line(nowhere)) == (
        2, "kernel-wheels: error: --no-index and no --find-links: nowhere to look for the kernel")


def test_pre_releases_only_when_asked_or_pinned(base_url: str, snapshot: Path, venv: Path) -> None:
    snapshot_version = snapshot.name.split("-")[1]
    assert ".dev" in snapshot_version

    def chosen(*extra: str) -> str:
        proc = run_cli("install", *extra, "--python", venv, "--dry-run", "--json", "-i",
                       f"{base_url}simple/", env=installer_env())
        return str(json.loads(proc.stdout)["chosen"]["wheel"])

    assert chosen("img2gray") == CPU_WHEEL
    assert chosen("img2gray", "--pre") == snapshot.name
    assert chosen(f"img2gray=={snapshot_version}") == snapshot.name
    files = json.loads(run_cli("install", "img2gray", "--python", venv, "--dry-run", "--json", "-i",
                               f"{base_url}simple/", env=installer_env()).stdout)["files"]
    reason = next(f["reason"] for f in files if f["wheel"] == snapshot.name)
    assert reason == f"{snapshot_version.split('+')[0]} is a pre-release (--pre installs pre-releases)"


KEYRING_BACKEND = '''
import json, os
from keyring.backend import KeyringBackend
from keyring.credentials import SimpleCredential


class Backend(KeyringBackend):
    """A keyring backend reading {service: [user, password]} from $KW_TEST_KEYRING."""
    priority = 1

    def _store(self):
        with open(os.environ["KW_TEST_KEYRING"]) as f:
            return json.load(f)

    def get_password(self, service, username):
        found = self._store().get(service)
        return found[1] if found and found[0] == username else None

    def get_credential(self, service, username):
        found = self._store().get(service)
        return SimpleCredential(found[0], found[1]) if found else None

    def set_password(self, service, username, password):
        raise NotImplementedError

    def delete_password(self, service, username):
        raise NotImplementedError
'''


@pytest.fixture(scope="module")
def private_index(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """pypiserver that asks for a password to list and download, serving the wheels."""
    import warnings

    root = tmp_path_factory.mktemp("private-index")
    packages = root / "packages"
    shutil.copytree(wheels, packages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

        htpasswd = HtpasswdFile(str(root / "htpasswd"), new=True)
        htpasswd.set_password("reader", "netrc-secret-5521")
        htpasswd.save()
    port = free_port()
    log = root / "pypiserver.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "pypi-server"), "run", "-p", str(port),
                                    "-i", "127.0.0.1", "-P", str(root / "htpasswd"),
                                    "-a", "download,list,update", "--disable-fallback", str(packages)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_for(base + "health", process, log)
        yield base + "simple/"
    finally:
        stop(process)


def test_install_credentials_from_netrc_and_keyring(private_index: str, venv: Path,
                                                    tmp_path: Path) -> None:
    args = ("install", "img2gray", "--python", venv, "-i", private_index)
    refused = run_cli(*args, "--dry-run", env=installer_env(HOME=str(tmp_path)), check=False)
    assert refused.returncode == 1 and "refused access (HTTP 401)" in one_error_line(refused)

    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login reader password netrc-secret-5521\n")
    netrc.chmod(0o600)
    installed = run_cli(*args, env=installer_env(NETRC=str(netrc)))
    assert installed.stdout.splitlines()[0] == f"chose {CPU_WHEEL}"
    assert "netrc-secret-5521" not in installed.stdout + installed.stderr
    uninstall(venv)

    (tmp_path / "kwtest_keyring.py").write_text(KEYRING_BACKEND)
    store = tmp_path / "keyring.json"
    store.write_text(json.dumps({private_index: ["reader", "netrc-secret-5521"]}))
    keyring_env = installer_env(HOME=str(tmp_path), PYTHONPATH=str(tmp_path),
                                PYTHON_KEYRING_BACKEND="kwtest_keyring.Backend",
                                KW_TEST_KEYRING=str(store))
    from_keyring = run_cli(*args, "--dry-run", "--json", env=keyring_env)
    assert json.loads(from_keyring.stdout)["chosen"]["wheel"] == CPU_WHEEL
    assert "netrc-secret-5521" not in from_keyring.stdout + from_keyring.stderr
    disabled = run_cli(*args, "--dry-run", "--keyring-provider", "disabled", env=keyring_env, check=False)
    assert disabled.returncode == 1 and "HTTP 401" in one_error_line(disabled)


def test_install_json_failure_is_one_document(base_url: str, venv: Path) -> None:
    proc = run_cli("install", "img2gray>=9", "-i", f"{base_url}simple/", "--python", venv, "--json",
                   env=installer_env(), check=False)
    assert proc.returncode == 1
    document = json.loads(proc.stdout)  # exactly one: json.loads refuses "extra data"
    assert document["error"]["type"] == "NoMatchingWheelError" and document["chosen"] is None
    assert {f["wheel"] for f in document["files"]} >= {CPU_WHEEL}


def test_install_certificates_are_passed_on_and_checked(base_url: str, venv: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", bundle)
    decision = json.loads(run_cli("install", "img2gray", "-i", f"{base_url}simple/", "--python", venv,
                                  "--dry-run", "--json", "--cert", bundle, env=installer_env()).stdout)
    assert f"PIP_CERT={bundle}" in decision["index_env"]
    missing = run_cli("install", "img2gray", "-i", "https://127.0.0.1:9/simple/", "--python", venv,
                      "--client-cert", tmp_path / "none.pem", env=installer_env(), check=False)
    assert missing.returncode == 2
    assert one_error_line(missing) == (
        f"kernel-wheels: error: --client-cert {tmp_path / 'none.pem'}: cannot use it (one PEM file with the key "
        "and the certificate): No such file or directory")


def test_index_urls_that_are_not_a_simple_api_say_so(base_url: str, site: Path, venv: Path) -> None:
    root = run_cli("install", "img2gray", "-i", base_url, "--python", venv, "--dry-run",
                   env=installer_env(), check=False)
    assert root.returncode == 1
    assert one_error_line(root) == (
        f"kernel-wheels: error: {base_url} has no project img2gray: {base_url} is not a Simple API; "
        f"{base_url}simple/ is (index URLs end in /simple/)")
    as_file = run_cli("install", "img2gray", "-i", site.as_uri(), "--python", venv, "--dry-run",
                      env=installer_env(), check=False)
    assert as_file.returncode == 1
    assert one_error_line(as_file).endswith(f"{site.as_uri()}/simple/ is (index URLs end in /simple/)")
    fine = run_cli("install", "img2gray", "-i", (site / "simple").as_uri(), "--python", venv, "--dry-run",
                   env=installer_env())
    assert fine.stdout.splitlines()[0] == f"chose {CPU_WHEEL}"

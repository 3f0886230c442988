"""`kernel-wheels serve` end to end: olah on 127.0.0.1 as the Hub, the real command as a
subprocess in front of it, then pip, uv and `kernel-wheels install` into a fresh torch
2.13.0 venv -> import -> the op equals the reference, torch untouched. Also: pages and
content negotiation, concurrent first requests (one conversion, across two worker
processes), a graceful stop during a conversion, the Hub going away and a tag added on
it (an olah of our own), a failing conversion, HF_HUB_OFFLINE, basic authentication,
eviction, and one-line errors."""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from support.helpers import UV, Olah, make_venv, run_cli, torch_wheel
from support.servers_index import anchors, pip_env, run_op, torch_fingerprint, uninstall
from support.servers_serve import JSON_TYPE, Serve, add_tag, get, own_olah, serve

CPU = "torch213-cxx11-cpu-x86_64-linux"
CPU_112 = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CPU_111 = "img2gray-1.1.1+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CUDA_112 = "img2gray-1.1.2+torch214cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CUDA_111 = "img2gray-1.1.1+torch214cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
PIP_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_url(base: str, wheel: str) -> str:
    return f"{base}files/{quote(wheel, safe='')}"


def hub_env_for(olah: Olah, folder: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": olah.endpoint, "HF_HOME": str(folder / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(folder / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("serve-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


@pytest.fixture(scope="module")
def served(olah: Olah, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One server in front of the session's olah (drbh/img2gray: v1.1.1, v1.1.2)."""
    folder = tmp_path_factory.mktemp("serve")
    with serve("drbh/img2gray", folder / "cache", hub_env_for(olah, folder)) as server:
        yield server


def pip_install(venv: Path, index: str, requirement: str = "img2gray", check: bool = True,
                *extra: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(venv), "-m", "pip", "install", "-q", "--no-cache-dir", *extra,
                           requirement, "--index-url", index], capture_output=True, text=True,
                          env=pip_env())
    assert not check or proc.returncode == 0, proc.stderr
    return proc


# --- installs ------------------------------------------------------------------------------


def test_pip_uv_and_kernel_wheels_install_from_serve(served: Serve, venv: Path, olah: Olah,
                                                     tmp_path: Path) -> None:
    status, _, body = get(f"{served.base}torch213-cxx11-cpu/simple/img2gray/")
    assert status == 200
    before = {a["href"]: a for a in anchors(body.decode())}
    listed = next(a for href, a in before.items() if quote(CPU_112, safe="") in href)
    # Not converted yet: no hash, metadata announced without one (PEP 714).
    assert "#sha256=" not in (listed["href"] or "") and listed["data-core-metadata"] == "true"
    assert served.conversions(CPU_112) == 0

    torch_before = torch_fingerprint(venv)
    target = f"{served.base}torch213-cxx11-cpu/simple"
    installs = {
        "pip install (target index)": [str(venv), "-m", "pip", "install", "-q", "--no-cache-dir",
                                       "img2gray", "--index-url", target],
        "uv pip install (target index)": [UV, "pip", "install", "-q", "--no-cache", "--python",
                                          str(venv), "img2gray", "--index-url", target],
        "kernel-wheels install (root index)": None,
    }
    for what, command in installs.items():
        if command is None:
            proc = run_cli("install", "img2gray", "--index-url", f"{served.base}simple/",
                           "--python", venv, env=pip_env())
            assert proc.stdout.splitlines()[0] == f"chose {CPU_112}", proc.stdout
        else:
            proc = subprocess.run(command, capture_output=True, text=True, env=pip_env())
            assert proc.returncode == 0, (what, proc.stderr)
        result = run_op(venv)
        assert result["equal"] is True and result["version"] == "1.1.2+torch213cpucxx11", what
        assert torch_fingerprint(venv) == torch_before, what
        uninstall(venv)

    # Converted once for all three installers, and the same bytes `to-wheel` gives.
    assert served.conversions(CPU_112) == 1
    status, headers, wheel = get(file_url(served.base, CPU_112))
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    assert headers["etag"] == f'"{sha256(wheel)}"' and "immutable" in headers["cache-control"]
    out = tmp_path / "to-wheel"
    run_cli("to-wheel", "drbh/img2gray", "1.1.2", "--variant", CPU, "-o", out,
            env=hub_env_for(olah, tmp_path))
    assert (out / CPU_112).read_bytes() == wheel

    # Now the pages carry both hashes, and they are right.
    _, _, metadata = get(file_url(served.base, CPU_112) + ".metadata")
    assert metadata.startswith(b"Metadata-Version: 2.4\nName: img2gray\nVersion: 1.1.2+torch213cpucxx11\n")
    _, _, body = get(f"{served.base}torch213-cxx11-cpu/simple/img2gray/")
    listed = next(a for a in anchors(body.decode()) if quote(CPU_112, safe="") in (a["href"] or ""))
    assert (listed["href"] or "").endswith(f"#sha256={sha256(wheel)}")
    assert listed["data-core-metadata"] == listed["data-dist-info-metadata"] == \
        f"sha256={sha256(metadata)}"
    assert listed["data-requires-python"] == ">=3.9"


# --- pages ---------------------------------------------------------------------------------


def test_pages_targets_and_content_negotiation(served: Serve) -> None:
    base = served.base
    # PEP 691: pip's Accept gets JSON; browsers, curl and old clients HTML.
    forms = {
        PIP_ACCEPT: JSON_TYPE,
        "application/vnd.pypi.simple.latest+json": JSON_TYPE,
        "text/html": "text/html; charset=utf-8",
        "*/*": "text/html; charset=utf-8",
        "application/vnd.pypi.simple.v1+html": "application/vnd.pypi.simple.v1+html",
        "text/html;q=0.5, application/vnd.pypi.simple.v1+json;q=0.9": JSON_TYPE,
    }
    for accept, content_type in forms.items():
        status, headers, _ = get(f"{base}simple/img2gray/", accept)
        assert (status, headers["content-type"]) == (200, content_type), accept
        assert headers["vary"] == "Accept"
    status, _, body = get(f"{base}simple/img2gray/", "image/png")
    assert status == 406 and body.decode().count("\n") == 1
    status, headers, _ = get(f"{base}simple/img2gray/?format={quote(JSON_TYPE)}")
    assert headers["content-type"] == JSON_TYPE

    _, _, root = get(f"{base}simple/", JSON_TYPE)
    assert json.loads(root)["projects"] == [{"name": "img2gray"}]
    _, _, page = get(f"{base}simple/img2gray/", JSON_TYPE)
    files = json.loads(page)["files"]
    assert sorted(f["filename"] for f in files) == sorted([CPU_111, CPU_112, CUDA_111, CUDA_112])
    assert all(f["requires-python"] == ">=3.9" and f["url"].startswith("../../files/")
               for f in files)

    # Target indexes: the scheme and the selection of the static site.
    expected = {"torch213-cxx11-cpu": [CPU_111, CPU_112],
                "torch214-cxx11-cu130": [CUDA_111, CUDA_112]}
    for key, wheels in expected.items():
        _, _, page = get(f"{base}{key}/simple/img2gray/", JSON_TYPE)
        files = json.loads(page)["files"]
        assert [f["filename"] for f in files] == wheels, key
        assert all(f["url"].startswith("../../../files/") for f in files)
    status, _, root = get(f"{base}torch27-cxx11-cu128/simple/", JSON_TYPE)
    assert status == 200 and json.loads(root)["projects"] == []
    status, _, body = get(f"{base}torch27-cxx11-cu128/simple/img2gray/")
    assert (status, body) == (404, b"no wheel of img2gray for torch27-cxx11-cu128\n")
    status, _, body = get(f"{base}not-a-target/simple/")
    assert status == 404 and body.startswith(b"'not-a-target' is not a target key")
    _, _, landing = get(base)
    assert b'href="torch213-cxx11-cpu/simple/"' in landing and b'href="torch214-cxx11-cu130/simple/"' in landing

    # PEP 503 names, unknown projects and files.
    status, headers, _ = get(f"{base}simple/Img2Gray/")
    assert status == 200  # urllib follows the redirect to the normalised name
    assert get(f"{base}simple/other/")[0] == 404
    assert get(file_url(base, "other-1.0-py3-none-any.whl"))[0] == 404
    assert get(f"{base}files/not-a-wheel")[0] == 404

    # A cached wheel: HEAD and a conditional GET.
    _, headers, wheel = get(file_url(base, CPU_112))
    status, head_headers, body = get(file_url(base, CPU_112), method="HEAD")
    assert (status, body, head_headers["content-length"]) == (200, b"", str(len(wheel)))

    status, headers, body = get(f"{base}healthz")
    health = json.loads(body)
    assert status == 200 and health["status"] == "ok" and health["kernels"] == 1
    assert health["cache"]["writable"] is True and health["cache"]["wheels"] >= 1

    # The access log: one JSON line per request, no headers.
    access = served.events("access")
    assert {"method", "path", "status", "bytes", "ms", "client"} <= set(access[-1])
    assert any(e["path"] == "/simple/img2gray/" and e["status"] == 406 for e in access)


# --- concurrency and shutdown ------------------------------------------------------------


def test_concurrent_first_requests_convert_once_across_workers(olah: Olah, tmp_path: Path) -> None:
    with serve("drbh/img2gray", tmp_path / "cache", hub_env_for(olah, tmp_path),
               "--workers", "2") as server:
        get(f"{server.base}simple/img2gray/")  # the listing is not what is measured
        url = file_url(server.base, CUDA_111)
        barrier = threading.Barrier(4)
        answers: list[tuple[int, bytes]] = []

        def client(suffix: str) -> None:
            barrier.wait()
            status, _, body = get(url + suffix)
            answers.append((status, body))

        threads = [threading.Thread(target=client, args=(s,)) for s in ("", "", ".metadata", "")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wheels = [body for status, body in answers if body.startswith(b"PK")]
        assert [status for status, _ in answers] == [200] * 4 and len(wheels) == 3
        assert len(set(wheels)) == 1
        assert server.conversions(CUDA_111) == 1
        assert len({e["pid"] for e in server.events("ready")}) == 2  # two worker processes

        # SIGTERM while a conversion runs: it finishes, the client gets its wheel, the
        # server stops cleanly and leaves no staging folder behind.
        answer: list[tuple[int, bytes]] = []
        fetch = threading.Thread(target=lambda: answer.append(get(file_url(server.base, CPU_111))[::2]))
        fetch.start()
        while server.conversions(CPU_111) == 0:  # the conversion has begun
            assert fetch.is_alive(), "the request was answered before its conversion began"
            time.sleep(0.01)
        server.process.send_signal(signal.SIGTERM)
        fetch.join()
        assert server.process.wait(timeout=60) == 0
        assert answer[0][0] == 200 and answer[0][1].startswith(b"PK")
        assert server.events("converted")[-1]["wheel"] == CPU_111
        assert not [p for p in (tmp_path / "cache" / "staging").iterdir()]


# --- the Hub: outage, new tags, failures, offline -----------------------------------------


def _break_release(repo: Path, tag: str) -> None:
    """A release whose CPU build has a corrupt extension module (its digest check fails)."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)

    git("checkout", "-q", "-b", "broken", "v1")
    so = next((repo / "build" / CPU).glob("*.so"))
    so.write_bytes(b"not an extension module\n" * 100)
    git("commit", "-qam", "broken build")
    git("tag", "-a", tag, "-m", tag)
    git("checkout", "-q", "main")


def test_hub_outage_new_tags_failures_and_offline(kernel_repo: Path, venv: Path,
                                                  tmp_path: Path) -> None:
    cpu_113 = CPU_112.replace("1.1.2", "1.1.3")
    cpu_120 = CPU_112.replace("1.1.2", "1.2.0")
    ttl = 2.0
    with own_olah(tmp_path / "olah", kernel_repo) as (hub, repo):
        env = hub_env_for(hub, tmp_path)
        cache = tmp_path / "cache"
        with serve("drbh/img2gray", cache, env, "--ttl", str(ttl), "--retries", "0") as server:
            target = f"{server.base}torch213-cxx11-cpu/simple"

            def listed() -> list[str]:
                _, _, page = get(f"{target}/img2gray/", JSON_TYPE)
                return [f["filename"] for f in json.loads(page)["files"]]

            asked = time.monotonic()  # the listing is at most this old
            assert listed() == [CPU_111, CPU_112]
            add_tag(repo, "v1.1.3")  # on the v1 branch's later commit
            if time.monotonic() - asked < ttl / 2:
                assert listed() == [CPU_111, CPU_112]  # the listing is trusted for --ttl
            time.sleep(ttl + 0.2)
            assert listed() == [CPU_111, CPU_112, cpu_113]

            # A conversion that fails its checks is an HTTP error with one line, never
            # a wheel; it is not tried again at once.
            _break_release(repo, "v1.2.0")
            time.sleep(ttl + 0.2)
            assert listed()[-1] == cpu_120
            for _ in range(2):
                status, _, body = get(file_url(server.base, cpu_120))
                assert status == 500 and body.count(b"\n") == 1, body
                assert body.startswith(f"cannot make {cpu_120}: ".encode()) and b"failed its checks" in body
            assert server.conversions(cpu_120) == 1
            assert not list(cache.glob(f"wheels/*/{cpu_120}*"))

            # Warm up 1.1.3, then the Hub goes away.
            pip_install(venv, target, "img2gray==1.1.3")
            uninstall(venv)
            hub.process.terminate()
            hub.process.wait(timeout=30)
            time.sleep(ttl + 0.2)

            # The stale listing and the cached wheel are still served...
            assert listed() == [CPU_111, CPU_112, cpu_113, cpu_120]
            pip_install(venv, target, "img2gray==1.1.3")
            result = run_op(venv)
            assert result["equal"] is True and result["version"] == "1.1.3+torch213cpucxx11"
            uninstall(venv)
            assert server.events("hub-unavailable")
            health = json.loads(get(f"{server.base}healthz")[2])
            assert (health["status"], health["stale"]) == ("ok", 1)
            # ...and what was never converted fails with a clear message.
            status, _, body = get(file_url(server.base, CPU_111) + ".metadata")
            assert status == 502 and body.count(b"\n") == 1
            assert body.startswith(f"cannot make {CPU_111}: ".encode())
            assert f"no usable answer from {hub.endpoint}".encode() in body
            proc = pip_install(venv, target, "img2gray==1.1.1", False, "--retries", "0")
            assert proc.returncode != 0 and "502" in proc.stderr
            cached = get(file_url(server.base, cpu_113))[2]

        # Restarted while the Hub is down: the listing saved on disk is served.
        with serve("drbh/img2gray", cache, env, "--retries", "0") as server:
            _, _, page = get(f"{server.base}torch213-cxx11-cpu/simple/img2gray/", JSON_TYPE)
            assert [f["filename"] for f in json.loads(page)["files"]][-2:] == [cpu_113, cpu_120]
            assert get(file_url(server.base, cpu_113))[2] == cached

        # HF_HUB_OFFLINE=1 with an empty wheel cache: what the HF cache holds converts
        # again, offline, to the same bytes.
        offline = {**env, "HF_HUB_OFFLINE": "1"}
        with serve("drbh/img2gray", tmp_path / "offline-cache", offline) as server:
            status, _, wheel = get(file_url(server.base, cpu_113))
            assert status == 200 and wheel == cached
            assert server.conversions(cpu_113) == 1


# --- authentication ----------------------------------------------------------------------


def test_basic_authentication(olah: Olah, venv: Path, tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    password = "serve-secret-5521"
    htpasswd = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
    htpasswd.set_password("ci", password)
    htpasswd.save()
    with serve("drbh/img2gray", tmp_path / "cache", hub_env_for(olah, tmp_path), "--auth-file",
               str(tmp_path / "htpasswd")) as server:
        status, headers, body = get(f"{server.base}simple/")
        assert (status, body) == (401, b"authentication required\n")
        assert headers["www-authenticate"].startswith('Basic realm="kernel-wheels"')
        assert get(f"{server.base}simple/", auth=("ci", "wrong"))[0] == 401
        assert get(f"{server.base}simple/", auth=("ci", password))[0] == 200
        assert get(f"{server.base}healthz")[0] == 200  # load balancers probe it

        proc = pip_install(venv, f"{server.base}torch213-cxx11-cpu/simple", check=False)
        assert proc.returncode != 0 and "No matching distribution found" in proc.stderr
        index = server.base.replace("http://", f"http://ci:{password}@")
        pip_install(venv, f"{index}torch213-cxx11-cpu/simple")
        assert run_op(venv)["equal"] is True
        uninstall(venv)

        log = server.log.read_text()
        assert password not in log and "Authorization" not in log and "authorization" not in log
        users = {e.get("user") for e in server.events("access") if e["status"] == 200}
        assert "ci" in users

    # The same users from the environment (no file to mount in a container), and a Hub
    # token that is used (olah ignores it) but never shown.
    token = "hf_serveTokenNeverShown4410"
    env = {**hub_env_for(olah, tmp_path), "KERNEL_WHEELS_SERVE_HTPASSWD": htpasswd.to_string().decode(),
           "HF_TOKEN": token}
    with serve("drbh/img2gray", tmp_path / "cache", env) as server:
        assert get(f"{server.base}simple/")[0] == 401
        answers = [get(url, JSON_TYPE, auth=("ci", password)) for url in (
            f"{server.base}simple/img2gray/", file_url(server.base, CPU_111), f"{server.base}healthz")]
        assert [status for status, _, _ in answers] == [200, 200, 200]
        assert server.conversions(CPU_111) == 1
        shown = server.log.read_text() + "".join(str(h) + body.decode("latin-1") for _, h, body in answers)
        assert token not in shown and password not in shown


# --- the disk cache ------------------------------------------------------------------------


def test_least_recently_used_wheels_are_evicted(served: Serve, olah: Olah, tmp_path: Path) -> None:
    def entry_size(wheel: str) -> int:
        get(file_url(served.base, wheel))  # converted (and so measured) by the module's server
        return sum(p.stat().st_size for p in served.cache.glob(f"wheels/*/{wheel}*"))

    limit = entry_size(CPU_111) + entry_size(CUDA_111) + 200
    with serve("drbh/img2gray", tmp_path / "cache", hub_env_for(olah, tmp_path), "--cache-size",
               str(limit)) as server:
        first = {}
        for wheel in (CPU_111, CUDA_111, CPU_111, CUDA_112):  # CPU_111 used again before CUDA_112
            first.setdefault(wheel, get(file_url(server.base, wheel))[2])
        assert [e["wheel"] for e in server.events("evicted")] == [CUDA_111]
        cached = sorted(p.name for p in (tmp_path / "cache").glob("wheels/*/*.whl"))
        assert cached == sorted([CPU_111, CUDA_112])
        # An evicted wheel converts again, to the same bytes.
        assert get(file_url(server.base, CUDA_111))[2] == first[CUDA_111]
        assert server.conversions(CUDA_111) == 2
        health = json.loads(get(f"{server.base}healthz")[2])
        assert health["cache"]["bytes"] <= limit == health["cache"]["limit"]


# --- the command line ----------------------------------------------------------------------


def test_help_and_one_line_errors(tmp_path: Path) -> None:
    proc = run_cli("serve", "--help")
    assert "kernel-wheels serve --kernels drbh/img2gray" in proc.stdout
    assert "pip install img2gray --index-url http://127.0.0.1:8000/torch213-cxx11-cpu/simple" in proc.stdout

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        (tmp_path / "kernels.txt").write_text("# kernels\ndrbh/img2gray\nnot a repo\n")
        cases = [
            ([], 2, "give the kernels to serve: --kernels org/name[,org/name...] or --kernels-file FILE"),
            (["--kernels", "img2gray"], 2, "'img2gray' is not a Hub repository id (org/name)"),
            (["--kernels", "a/img2gray,b/img2gray"], 2,
             "a/img2gray and b/img2gray would both be the project 'img2gray' on the index: serve them separately"),
            (["--kernels-file", str(tmp_path / "kernels.txt")], 2,
             "'not a repo' is not a Hub repository id (org/name)"),
            (["--kernels-file", str(tmp_path / "missing.txt")], 2,
             f"--kernels-file {tmp_path / 'missing.txt'}: No such file or directory"),
            (["--kernels", "drbh/img2gray", "--cache-size", "lots"], 2,
             "--cache-size 'lots' is not a size like 500M or 10G"),
            (["--kernels", "drbh/img2gray", "--workers", "0"], 2, "--workers 0: give 1 or more"),
            (["--kernels", "drbh/img2gray", "--auth-file", str(tmp_path / "nope")], 1,
             f"cannot read {tmp_path / 'nope'}: No such file or directory"),
            (["--kernels", "drbh/img2gray", "--port", port, "--cache", str(tmp_path / "c")], 1,
             f"port {port} is in use on 127.0.0.1: choose another with --port"),
        ]
        for args, code, message in cases:
            proc = run_cli("serve", *args, check=False, env={"KERNEL_WHEELS_CACHE": str(tmp_path)})
            assert proc.returncode == code, (args, proc.stderr)
            assert proc.stderr.strip().splitlines()[-1] == f"kernel-wheels: error: {message}", args
            assert "Traceback" not in proc.stderr
            if "--port" in args:  # said before anything else is logged: the one line
                assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

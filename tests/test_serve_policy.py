"""`kernel-wheels serve` under a provenance policy (docs/provenance.md): it never lists a
file the policy would refuse. What the Hub's listing tells (a variant folder without
``metadata.json.sigstore``, a publisher the Hub does not trust) keeps a wheel off every
page before any conversion; a wheel found in the cache is judged by the one verdict under
the server's policy before it is listed or sent; a conversion the policy refused is not
listed afterwards. The server is the real command, in front of a Hub of our own
(tests/support/serve_hub.py), with releases signed by the test Sigstore deployment
(scripts/make_test_signature.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin

from test_provenance import make_signature, verified_record

from kernel_wheels.kernel.digest import sha256_b64
from support.serve_hub import HostileHub, HubRepo, commit_of, hostile_hub
from support.servers_serve import JSON_TYPE, Serve, get, serve

VARIANT = "build/torch-universal"


def kernel_files(name: str, folder: Path | None = None, **provenance: object) -> dict[str, bytes]:
    """A pure-Python kernel whose metadata.json digests its files (``provenance``: its
    build provenance); signed with the test deployment kept in ``folder`` when given."""
    init = f'"""{name}."""\nVALUE = 1\n'.encode()
    meta: dict[str, object] = {
        "name": name, "id": f"_{name}_universal", "version": 1, "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256",
                                               "files": {"__init__.py": sha256_b64([init])}}}
    if provenance:
        meta["provenance"] = provenance
    files = {f"{VARIANT}/__init__.py": init, f"{VARIANT}/metadata.json": json.dumps(meta).encode()}
    if folder is not None:
        (folder / f"{name}.json").write_bytes(files[f"{VARIANT}/metadata.json"])
        make_signature(folder / f"{name}.json", folder / f"{name}.sigstore", folder / "root.json",
                       "--deployment", folder / "keys")
        files[f"{VARIANT}/metadata.json.sigstore"] = (folder / f"{name}.sigstore").read_bytes()
    return files


def wheel_of(name: str) -> str:
    return f"{name}-1.0.0-py3-none-any.whl"


@contextmanager
def serving(hub: HostileHub, kernels: str, folder: Path, cache: str, *args: str) -> Iterator[Serve]:
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(folder / "hf-home"), "HF_TOKEN": "",
           "KERNEL_WHEELS_CACHE": str(folder / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    with serve(kernels, folder / cache, env, "--retries", "0", *args) as server:
        yield server


def listed(server: Serve, project: str) -> list[str]:
    """The file names the project's page lists (none: the page says there is none)."""
    status, _, body = get(f"{server.base}simple/{project}/", accept=JSON_TYPE)
    if status == 404:
        assert body.decode().startswith(f"no wheel of {project}"), body
        return []
    assert status == 200, body
    return [f["filename"] for f in json.loads(body)["files"]]


def projects(server: Serve) -> list[str]:
    status, _, body = get(f"{server.base}simple/", accept=JSON_TYPE)
    assert status == 200, body
    return sorted(p["name"] for p in json.loads(body)["projects"])


def fetch(server: Serve, name: str) -> tuple[int, bytes]:
    status, _, body = get(urljoin(server.base, f"files/{wheel_of(name)}"))
    return status, body


def test_require_signature_lists_only_signed_builds(tmp_path: Path) -> None:
    """The unsigned release is on no page and never converted; its file is refused
    with the reason. The signed one is listed, converted and served, signed."""
    signed, unsigned = kernel_files("signedk", tmp_path), kernel_files("plaink")
    with hostile_hub(**{"acme/signedk": HubRepo({"v1.0.0": commit_of("signed")}, signed),
                        "acme/plaink": HubRepo({"v1.0.0": commit_of("plain")}, unsigned)}) as hub, \
            serving(hub, "acme/signedk,acme/plaink", tmp_path, "cache", "--require-signature",
                    "--trusted-root", str(tmp_path / "root.json")) as server:
        assert projects(server) == ["signedk"]
        assert listed(server, "signedk") == [wheel_of("signedk")]
        assert listed(server, "plaink") == []
        status, body = fetch(server, "signedk")
        assert status == 200, body
        (tmp_path / "served.whl").write_bytes(body)
        assert verified_record(tmp_path / "served.whl")["status"] == "signed"
        status, body = fetch(server, "plaink")
        assert status == 500 and body == (b"acme/plaink build/torch-universal: unsigned (no "
                                          b"metadata.json.sigstore) and the policy requires a "
                                          b"signature\n"), body
        assert server.conversions(wheel_of("plaink")) == 0


def test_require_trusted_publisher_lists_only_trusted_publishers(tmp_path: Path) -> None:
    """The Hub's flag, asked when the kernels are listed: an untrusted publisher's
    kernel is on no page and never converted."""
    with hostile_hub(**{"good/trustedk": HubRepo({"v1.0.0": commit_of("t")}, kernel_files("trustedk")),
                        "evil/untrustedk": HubRepo({"v1.0.0": commit_of("u")},
                                                   kernel_files("untrustedk"))}) as hub:
        hub.trusted = {"good"}
        with serving(hub, "good/trustedk,evil/untrustedk", tmp_path, "cache",
                     "--require-trusted-publisher") as server:
            assert projects(server) == ["trustedk"]
            assert listed(server, "untrustedk") == []
            assert fetch(server, "trustedk")[0] == 200
            status, body = fetch(server, "untrustedk")
            assert status == 500 and b"publisher 'evil' is not a trusted publisher on the Hub" in body
            assert server.conversions(wheel_of("untrustedk")) == 0


def test_a_cached_wheel_the_policy_refuses_is_neither_listed_nor_sent(tmp_path: Path) -> None:
    """A dirty build converted by a server without --require-clean stays in the cache; a
    server restarted on that cache with --require-clean judges it before listing it:
    refused, no page lists it, its file is refused without a conversion, and a clean
    kernel's cached wheel is still served."""
    dirty = kernel_files("dirtyk", kernel={"commit": "b" * 40, "dirty": True},
                         **{"kernel-builder": {"version": "0.12.3"}})
    with hostile_hub(**{"acme/dirtyk": HubRepo({"v1.0.0": commit_of("dirty")}, dirty),
                        "acme/cleank": HubRepo({"v1.0.0": commit_of("clean")},
                                               kernel_files("cleank"))}) as hub:
        with serving(hub, "acme/dirtyk,acme/cleank", tmp_path, "cache") as loose:
            assert fetch(loose, "dirtyk")[0] == 200 and fetch(loose, "cleank")[0] == 200
        with serving(hub, "acme/dirtyk,acme/cleank", tmp_path, "cache", "--require-clean") as strict:
            assert listed(strict, "dirtyk") == []
            assert listed(strict, "cleank") == [wheel_of("cleank")]
            status, body = fetch(strict, "dirtyk")
            assert status == 500 and b"built from a dirty git tree" in body, body
            assert fetch(strict, "cleank")[0] == 200
            assert strict.conversions(wheel_of("dirtyk")) == 0
            assert [e["wheel"] for e in strict.events("cached-refused")] == [wheel_of("dirtyk")]


def test_a_conversion_the_policy_refuses_is_not_listed_afterwards(tmp_path: Path) -> None:
    """A bundle the catalog sees but that does not verify under the server's root (the
    production root, for the test deployment's signature): the file is refused at its
    conversion, and from then on no page lists it, in this server or the next one on the
    same cache, and it is not converted again."""
    files = kernel_files("badsigk", tmp_path)
    with hostile_hub(**{"acme/badsigk": HubRepo({"v1.0.0": commit_of("bad")}, files)}) as hub:
        with serving(hub, "acme/badsigk", tmp_path, "cache", "--require-signature") as server:
            assert listed(server, "badsigk") == [wheel_of("badsigk")]  # what the Hub's listing tells
            status, body = fetch(server, "badsigk")
            assert status == 500 and b"the signature does not verify" in body, body
            assert listed(server, "badsigk") == []
        with serving(hub, "acme/badsigk", tmp_path, "cache", "--require-signature") as again:
            assert listed(again, "badsigk") == []
            assert fetch(again, "badsigk")[0] == 500
            assert again.conversions(wheel_of("badsigk")) == 0

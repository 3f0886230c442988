"""Issue #9, fuzzing with hypothesis: the parsers and the wheel reader take arbitrary
input and either succeed or raise one of the tool's typed errors
(``kernel_wheels.errors.KernelWheelsError``); ``check_wheel`` never raises at all, it
returns a failing report. Example counts are modest (CI time); every example is real
input to the real function, nothing is mocked."""

from __future__ import annotations

import io
import json
import random
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kernel_wheels import data
from kernel_wheels.checks import CheckReport
from kernel_wheels.checks import judge_wheel as check_wheel
from kernel_wheels.errors import KernelWheelsError
from kernel_wheels.kernel.metadata import python_requirements, read_kernel_metadata
from kernel_wheels.kernel.revision import Revision
from kernel_wheels.kernel.variants import Variant, parse_variant
from kernel_wheels.kernel.versions import RequestKind, parse_request, pick_tag, wheel_version
from kernel_wheels.wheel.plan import TagOptions, plan_wheel
from support.faults import tally
from support.helpers import run_cli

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=120, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow])
WHEEL = "img2gray-1.0.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
COUNT: dict[str, int] = {}


def counted(name: str) -> None:
    COUNT[name] = COUNT.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    yield
    tally("fuzz", inputs=sum(COUNT.values()))
    print(f"fuzz examples: {COUNT}")


# -- variant names ----------------------------------------------------------------------
_TABLE = data.load("variants")
_PIECES = ["torch", "torch27", "torch213", "torch-stable-abi210", "tvm-ffi01", "cxx11", "cxx98", "cu128", "cu",
           "rocm71", "xpu20260", "cpu", "metal", "x86_64", "aarch64", "linux", "darwin", "windows", "universal",
           "cuda", "-", "--", "_", "", "0", "99999999999999999999", "é", "\x00", "..", "/"]


def near_variant_names() -> st.SearchStrategy[str]:
    """Names built from the grammar's own pieces, joined and mangled: most are almost right."""
    return st.lists(st.sampled_from(_PIECES), min_size=1, max_size=7).map("-".join)


def valid_variant_names() -> st.SearchStrategy[str]:
    backends = [(k, spec) for k, spec in _TABLE["backends"].items()]
    framework = st.one_of(
        st.tuples(st.integers(2, 9), st.integers(0, 99), st.sampled_from(["", "-cxx11", "-cxx98"]))
        .map(lambda t: f"torch{t[0]}{t[1]}{t[2]}"),
        st.tuples(st.integers(2, 9), st.integers(0, 99)).map(lambda t: f"torch-stable-abi{t[0]}{t[1]}"),
        st.tuples(st.integers(0, 9), st.integers(0, 99)).map(lambda t: f"tvm-ffi{t[0]}{t[1]}"))
    backend = st.sampled_from(backends).flatmap(
        lambda item: st.just(item[0]) if "version_digits" not in item[1]
        else st.integers(10, 99999).map(lambda n: f"{item[0]}{n}"))
    arch = st.tuples(framework, backend, st.sampled_from(_TABLE["cpu_archs"]),
                     st.sampled_from(_TABLE["operating_systems"])).map("-".join)
    noarch = st.sampled_from(["torch-universal", *(f"torch-{b}" for b in _TABLE["noarch_backends"])])
    return st.one_of(arch, noarch)


@FUZZ
@given(st.one_of(st.text(max_size=60), near_variant_names()))
def test_parse_variant_raises_only_typed_errors(name: str) -> None:
    counted("variant names")
    try:
        variant = parse_variant(name)
    except KernelWheelsError:
        return
    assert isinstance(variant, Variant) and variant.name == name
    plan_wheel(variant, "img2gray", "1.0.0", TagOptions())  # every parsed variant can be planned


@FEW
@given(st.sets(valid_variant_names(), min_size=2, max_size=12))
def test_variant_names_give_distinct_wheel_names(names: set[str]) -> None:
    """Why two variants of one conversion can never write one wheel (docs/reliability.md):
    distinct names under the grammar give distinct wheel file names."""
    counted("variant name sets")
    files: dict[str, str] = {}
    for name in names:
        try:
            variant = parse_variant(name)
        except KernelWheelsError:
            continue  # e.g. a backend version too short: not a variant at all
        filename = plan_wheel(variant, "img2gray", "1.0.0", TagOptions()).filename
        assert files.setdefault(filename, name) == name, (filename, files[filename], name)


# -- versions and ranges ----------------------------------------------------------------
_VERSIONY = st.text(alphabet="0123456789.v<>=!~*, +-abcrdevpost_é١\n", max_size=24)
_TAGS = st.lists(st.one_of(st.from_regex(r"v[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True),
                           st.text(max_size=12)), max_size=8)


@FUZZ
@given(st.one_of(_VERSIONY, st.text(max_size=30)), st.one_of(st.none(), st.text(max_size=20)), _TAGS)
def test_version_requests_raise_only_typed_errors(version: str, revision: str | None, tags: list[str]) -> None:
    counted("version requests")
    try:
        request = parse_request(version, revision)
    except KernelWheelsError:
        return
    if request.kind in (RequestKind.EXACT, RequestKind.RANGE):
        try:
            tag = pick_tag(request, tags, ["main", "v1"])
        except KernelWheelsError:
            return
        assert tag in tags


@FUZZ
@given(_VERSIONY, _TAGS)
def test_ranges_pick_the_newest_matching_release_or_say_none(spec: str, tags: list[str]) -> None:
    """SpecifierSet-based ranges: whatever the text, a typed error or a tag that matches."""
    counted("ranges")
    try:
        request = parse_request(spec)
    except KernelWheelsError:
        return
    assume(request.kind is RequestKind.RANGE)
    try:
        tag = pick_tag(request, tags)
    except KernelWheelsError:
        return
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    assert SpecifierSet(request.text).contains(Version(tag[1:]), prereleases=True)


@FUZZ
@given(st.one_of(st.none(), _VERSIONY), st.one_of(st.none(), st.integers(0, 10**6)),  # as metadata.json gives
       st.one_of(st.none(), st.integers(-(2**40), 2**40)), st.one_of(st.none(), st.text(max_size=12)),
       st.lists(st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){1,3}", fullmatch=True), max_size=4))  # as tags give them
def test_wheel_versions_raise_only_typed_errors(given_version: str | None, major: int | None,
                                                commit_time: int | None, ref: str | None,
                                                earlier: list[str]) -> None:
    counted("wheel versions")
    revision = Revision("x", ref, "0" * 40, commit_time, None, None, tuple(earlier))
    try:
        version = wheel_version(revision, major, given_version)
    except KernelWheelsError:
        return
    from packaging.version import Version

    assert str(Version(version)) == version


# -- metadata.json ----------------------------------------------------------------------
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20)
_KEYS = ["name", "id", "version", "license", "upstream", "source", "python-depends", "backend", "digest"]
_METADATA = st.fixed_dictionaries({}, optional={key: _JSON for key in _KEYS}) | st.fixed_dictionaries(
    {"backend": st.fixed_dictionaries({}, optional={"type": _JSON, "archs": _JSON}),
     "python-depends": st.lists(st.sampled_from(["einops", "numpy", "nvidia-cutlass-dsl", "left-pad", ""]),
                                max_size=3)})


@FUZZ
@given(st.one_of(_JSON.map(json.dumps), _METADATA.map(json.dumps), st.binary(max_size=200)))
def test_metadata_json_raises_only_typed_errors(content: str | bytes) -> None:
    counted("metadata.json")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "torch213-cxx11-cpu-x86_64-linux" / "metadata.json"
        path.parent.mkdir()
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        try:
            meta = read_kernel_metadata(path)
            python_requirements(meta.python_depends, meta.backend or "cpu")
        except KernelWheelsError:
            return


# -- the wheel reader -------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_wheel(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("fuzz-source") / "img2gray"
    shutil.copytree(cpu_build, root / "build" / cpu_build.name)
    out = tmp_path_factory.mktemp("fuzz-wheel")
    run_cli("to-wheel", root, "1.0.0", "-o", out)
    return (out / WHEEL).read_bytes()


def _check(data_: bytes) -> CheckReport:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / WHEEL
        path.write_bytes(data_)
        report = check_wheel(path)  # must not raise, whatever the bytes
    assert isinstance(report, CheckReport)
    return report


@FEW
@given(st.binary(max_size=4096))
def test_check_on_random_bytes_fails_without_raising(blob: bytes) -> None:
    counted("random wheels")
    assert not _check(blob).passed


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32), st.sampled_from(["flip", "truncate", "splice", "zero"]))
def test_check_on_mutated_wheels_never_raises(real_wheel: bytes, seed: int, how: str) -> None:
    counted("mutated wheels")
    rng = random.Random(seed)
    blob = bytearray(real_wheel)
    if how == "flip":
        for _ in range(rng.randint(1, 16)):
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        del blob[rng.randrange(len(blob)):]
    elif how == "splice":
        at = rng.randrange(len(blob))
        blob[at:at + rng.randint(1, 64)] = rng.randbytes(rng.randint(0, 64))
    else:
        at = rng.randrange(len(blob))
        blob[at:at + rng.randint(1, 256)] = bytes(min(256, len(blob) - at))
    report = _check(bytes(blob))
    if how == "truncate":
        assert not report.passed  # a wheel cut short never passes


_MEMBER_TEXT = st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1")))


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["METADATA", "WHEEL", "RECORD", "kernel_wheels.json", "so", "init"]),
                       st.one_of(_MEMBER_TEXT, _JSON.map(json.dumps), _METADATA.map(
                           lambda m: json.dumps({"metadata_json": m, "module": "img2gray", "layout": "flat",
                                                 "added_by_kernel_wheels": {"modified": {"img2gray/__init__.py": m}}}))),
                       min_size=1, max_size=3),
       st.booleans())
def test_check_on_wheels_with_hostile_members_never_raises(real_wheel: bytes, replace: dict[str, str],
                                                           directory_entries: bool) -> None:
    """A well-formed zip whose METADATA, WHEEL, RECORD, provenance record, binary or
    __init__.py is arbitrary text: `check` reports, it never raises."""
    counted("hostile members")
    dist_info = "img2gray-1.0.0+torch213cpucxx11.dist-info/"
    targets = {"METADATA": dist_info + "METADATA", "WHEEL": dist_info + "WHEEL", "RECORD": dist_info + "RECORD",
               "kernel_wheels.json": dist_info + "kernel_wheels.json", "init": "img2gray/__init__.py"}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(real_wheel)) as src, zipfile.ZipFile(out, "w") as dst:
        if directory_entries:
            dst.writestr("img2gray/", b"")
        for info in src.infolist():
            key = next((k for k, v in targets.items() if v == info.filename), None)
            if key is None and info.filename.endswith(".so") and "so" in replace:
                key = "so"
            content = replace[key].encode("utf-8", "surrogatepass") if key in replace else src.read(info)
            dst.writestr(info, content)
    report = _check(out.getvalue())
    if "RECORD" in replace:
        assert not report.passed  # RECORD no longer lists the members with their hashes

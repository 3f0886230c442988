"""Issue #39: the rules as mechanisms, and the check that keeps them.

- ``kernel_wheels.reading``: the one reader of files, records and answers from outside
  (a regular file, a size cap, JSON and TOML nesting checked before the parser recurses);
- ``kernel_wheels.terminal``: the one escaping of text on its way to a terminal or a log;
- ``kernel_wheels.redaction.quoted``: the one redaction of a quoted requirement, URL or
  command line;
- ``kernel_wheels.paging``: every paginated listing bounded in pages, items and time;
- the source check (tests/support/source_rules.py), like the import contract of
  tests/test_architecture.py: a call that reads a file, parses JSON or TOML, prints, logs or
  loops over a remote listing outside the mechanisms fails the build, but for the
  exceptions listed here with their reasons; and it fails on planted code.

Real files throughout: FIFOs made with mkfifo, /dev/zero, sparse files.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import kernel_wheels
from kernel_wheels.paging import Bounds, Step, at_most, follow
from kernel_wheels.reading import (
    MAX_DEPTH,
    NestingError,
    not_a_file,
    open_regular,
    parse_json,
    parse_toml,
    read_json,
    read_regular,
    read_toml,
)
from kernel_wheels.redaction import quoted
from kernel_wheels.terminal import shown, shown_lines
from support.source_rules import Violation, violations, violations_in

PACKAGE = Path(kernel_wheels.__file__).parent

#: The calls the rules allow outside the mechanisms, each with its reason. A new entry is
#: a decision: say why the file is not outside data, or is already bounded.
ALLOWED: dict[tuple[str, str, str], str] = {
    # --- the funnels themselves: everything printed goes through them
    ("cli/common.py", "out", "print"): "the funnel of stdout: escapes every line (terminal.shown_lines)",
    ("cli/common.py", "stderr", "print"): "the funnel of stderr: masks and escapes every line",
    ("cli/progress.py", "TerminalProgress._write", "print"): "progress lines, masked and escaped just before",
    ("cli/completion.py", "run", "print"): "argcomplete's fixed shell script, no outside text",
    ("__main__.py", "<module>", "print"): "a fixed line ('interrupted')",
    ("remote/credentials.py", "_prompt", "print"): "an empty line that ends the password prompt's line",
    ("install/probe.py", "<module>", "sys.stdout.write"):
        "runs in the target Python: its JSON answer, read back through reading.parse_json",
    ("install/probe.py", "_cache_file", ".read_text"):
        "runs in the target Python (standard library only): torch's RECORD there, hashed as a cache key",
    ("install/probe.py", "_installed", ".read_text"): "runs in the target Python: whether a distribution's "
                                                       "dist-info holds kernel_wheels.json (only its presence)",
    ("install/probe.py", "_torch", "open"): "runs in the target Python: its own build-facts cache file",
    ("install/probe.py", "_torch", "json.load"): "runs in the target Python: its own cache file, any "
        "error or odd shape read as no cache",
    ("install/probe.py", "_remember", "open"): "runs in the target Python: writes its own cache file",
    # --- the package's own data, not outside data
    ("install/environment.py", "TargetProbe.__init__", ".read_text"):
        "the source of kernel_wheels/install/probe.py, sent to the target Python",
    ("data.py", "load", ".read_text"): "kernel_wheels/data/*.json, shipped with the package",
    ("data.py", "load", "json.loads"): "kernel_wheels/data/*.json, shipped with the package",
    ("checks/manylinux.py", "_policies", ".read_text"): "auditwheel's own policy table (package data)",
    ("checks/manylinux.py", "_policies", "json.loads"): "auditwheel's own policy table (package data)",
    ("provenance/signature.py", "_root_bytes", ".read_bytes"): "sigstore's production trust root (package data)",
    ("install/environment.py", "read_environment", ".read_text"): "the source of kernel_wheels' own probe module",
    ("building/toolchain.py", "_version_module_at", ".read_text"):
        "torch's version.py in the Python the user builds with (the trusted toolchain)",
    # --- files the one folder walk found (confine.regular_files: regular, inside the root)
    ("wheel/members.py", "Member.read_bytes", ".read_bytes"): "a variant folder's file, found by the one walk",
    ("wheel/writer.py", "_hashed", ".open"): "a variant folder's file, found by the one walk",
    ("convert/produce.py", "_honest_plan", ".open"): "a variant folder's file, found by the one walk",
    ("kernel/digest.py", "file_sha256", ".open"): "a variant folder's file, found by the one walk",
    ("kernel/digest.py", "file_chunks", ".open"): "a variant folder's file, found by the one walk",
    ("kernel/layout.py", "is_lfs_pointer", ".open"): "a variant folder's file, found by the one walk (4 bytes read)",
    ("elf/reader.py", "_mapped", ".open"):
        "a binary the walk found or check extracted; mapped, every read bounds-checked (ElfError)",
    ("building/pipeline.py", "source_hash", ".read_bytes"): "a source tree's file, found by the one walk",
    ("building/object_cache.py", "_file_hash", ".read_bytes"): "a source tree's file, found by the one walk",
    # --- files this run wrote or extracted itself
    ("building/object_cache.py", "store", ".read_bytes"): "the object the compiler just wrote in the work folder",
    ("building/object_cache.py", "store", ".read_text"): "the depfile the compiler just wrote in the work folder",
    ("building/scheduler.py", "compiler_failure", ".read_text"): "the compiler's log, written by this build",
    ("building/source_archive.py", "_NarHash.file", ".open"):
        "a file this build unpacked from a digest-checked archive",
    ("checks/binaries.py", "check_binaries", ".open"): "a member check extracted itself (bounded by the zip checks)",
    ("checks/facts.py", "written_wheel_contents", ".read_bytes"): "a member of the wheel this run wrote",
    ("checks/foreign.py", "check_pe", ".open"): "a member check extracted itself (4 KiB read)",
    ("wheel/gpu_record.py", "binaries_code", ".open"): "a binary extracted or walked before (4 bytes read)",
    ("kernel/arrival.py", "Arrival.chunks", ".open"): "a file huggingface_hub is downloading for this run",
    ("kernel/arrival.py", "Arrival._finished_file", ".open"): "a file huggingface_hub downloaded for this run",
    ("mirror/store.py", "FolderDestination.put_file", ".open"): "a wheel this run converted",
    ("mirror/store.py", "S3Destination.put_file", ".open"): "a wheel this run converted",
    ("remote/publish.py", "_upload", ".open"): "a wheel publish read before through index.wheelfacts (reading)",
    ("serve/conversions.py", "Conversions._open", ".open"): "a wheel serve's own cache wrote",
    ("site/build.py", "_write_state", ".read_bytes"): "the site's own file compared with what is written (is_file first)",
    ("site/pages.py", "PageWriter.page", ".read_bytes"): "the site's own page compared with what is written",
    ("site/pages.py", "write_landing_page", ".read_text"): "the site's own page compared with what is written",
    ("site/variants.py", "write_variants_files", ".read_bytes"):
        "the site's own file compared with what is written (is_file first)",
}


# --- the source check -------------------------------------------------------------------------

def test_every_outside_read_print_and_listing_goes_through_the_mechanisms() -> None:
    found = {v.key: v for v in violations(PACKAGE)}
    new = sorted(v for key, v in found.items() if key not in ALLOWED)
    assert not new, "calls that bypass kernel_wheels.reading / terminal / paging (use them, or list " \
                    "the call in ALLOWED with its reason):\n" + "\n".join(
                        f"  {v.path}:{v.line} in {v.function}: {v.call}" for v in new)
    stale = sorted(key for key in ALLOWED if key not in found)
    assert not stale, f"exceptions no longer needed (remove them): {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


PLANTED = {
    "a user-named file read whole": ("def load(user_named):\n    return Path(user_named).read_text()\n",
                                     ".read_text"),
    "bytes of it": ("def load(p):\n    return p.read_bytes()\n", ".read_bytes"),
    "open()": ("def load(p):\n    with open(p) as f:\n        return f.read()\n", "open"),
    "Path.open()": ("def load(p):\n    with p.open() as f:\n        return f.read()\n", ".open"),
    "json.loads": ("import json\ndef load(t):\n    return json.loads(t)\n", "json.loads"),
    "from json import loads": ("from json import loads\ndef load(t):\n    return loads(t)\n", "loads"),
    "tomllib.loads": ("import tomllib\ndef load(t):\n    return tomllib.loads(t)\n", "tomllib.loads"),
    "print": ("def show(name):\n    print(name)\n", "print"),
    "sys.stderr.write": ("import sys\ndef show(name):\n    sys.stderr.write(name)\n", "sys.stderr.write"),
    "a logger": ("def show(log, name):\n    log.warning(name)\n", "logging: log.warning"),
    "an S3 listing loop": ("def keys(client):\n    token = None\n    while True:\n"
                           "        page = client.list_objects_v2(Bucket='b', ContinuationToken=token)\n"
                           "        token = page.get('NextContinuationToken')\n",
                           "a loop over a remote listing"),
    "a Link: next loop": ("def pages(session, url):\n    for _ in range(10**9):\n"
                          "        response = session.get(url)\n        url = response.links['next']['url']\n",
                          "a loop over a remote listing"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_the_source_check_fails_on_planted_code(case: str) -> None:
    """Planted in a module of the package (its real path, so no exception covers it), each
    bypass is found, named by file, function and call."""
    source, call = PLANTED[case]
    found = violations_in(source, "sources/planted.py")
    assert [v.call for v in found] == [call], found
    assert all(v.path == "sources/planted.py" and v.key not in ALLOWED for v in found)


def test_the_planted_read_fails_the_whole_check(tmp_path: Path) -> None:
    """The planted ``Path(user_named).read_text()`` in a copy of the package: the check that
    passes on the package fails on the copy, naming the planted line."""
    copy = tmp_path / "kernel_wheels"
    for module in PACKAGE.rglob("*.py"):
        target = copy / module.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(module.read_bytes())
    planted = copy / "provenance" / "policy.py"
    planted.write_text(planted.read_text() + "\n\ndef _planted(user_named: str) -> str:\n"
                       "    return Path(user_named).read_text()\n")
    found = [v for v in violations(copy) if v.key not in ALLOWED]
    assert found == [Violation("provenance/policy.py", "_planted", ".read_text", found[0].line)], found


def test_reading_listings_and_forbidden_writes_are_told_apart() -> None:
    """What is not a read of outside data is not flagged: a write, a zip member, a loop that
    asks no listing, a listing whose pages go through follow()."""
    quiet = ("def w(p):\n    with p.open('wb') as f:\n        f.write(b'')\n"
             "def z(zf, info):\n    with zf.open(info) as m:\n        return m.read()\n"
             "def loop(xs):\n    for x in xs:\n        pass\n"
             "def keys(client):\n    def fetch(t):\n        return client.list_objects_v2(Bucket='b')\n"
             "    for page in follow(None, fetch, B, 'x', E):\n        yield page\n")
    assert violations_in(quiet, "sources/quiet.py") == []


# --- the one reader -------------------------------------------------------------------------

@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _in_thread(call: Any) -> BaseException | None:
    """``call()`` in a thread; what it raised. Still running after a generous guard is a
    hang (the very defect): fails the test instead of hanging the suite."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    if thread.is_alive():
        pytest.fail("the read still waits: a FIFO was opened for reading")
    return outcome[0]


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "folder"])
def test_a_file_that_is_not_regular_is_refused_before_a_byte_is_read(fifo: Path, tmp_path: Path,
                                                                       what: str) -> None:
    path = {"fifo": fifo, "/dev/zero": Path("/dev/zero"), "folder": tmp_path}[what]
    for read in (read_regular, read_json, read_toml, lambda *a: open_regular(*a).close()):
        error = _in_thread(lambda read=read: read(path, "the policy file", ValueError))
        assert isinstance(error, ValueError), error
        assert str(error) == f"the policy file {path} is not a regular file (a FIFO, a device, " \
                             "a socket or a folder); refusing to read it"
    assert not_a_file(path) == {"fifo": "a FIFO, not a regular file", "/dev/zero": "a device, not a "
                                "regular file", "folder": "a folder, not a regular file"}[what]


def test_a_file_above_its_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    sparse = tmp_path / "big.toml"
    with sparse.open("wb") as out:
        out.truncate(300 << 20)
    with pytest.raises(ValueError, match=rf"is {300 << 20} bytes, more than the {16 << 20} bytes"):
        read_toml(sparse, "the policy file", ValueError)
    assert read_regular(tmp_path / "big.toml", "x", ValueError, 400 << 20)[:4] == bytes(4)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_json_and_toml_nested_too_deeply_are_refused_before_the_parser_recurses(depth: int) -> None:
    documents = {
        parse_json: ["[" * depth + "]" * depth, '{"a": ' * depth + "1" + "}" * depth, "[" * depth],
        parse_toml: ["x = " + "[" * depth + "]" * depth, "x = " + "{a = " * depth + "1" + "}" * depth,
                     "x" + ".x" * depth + " = 1", "[" + ".".join(["t"] * (depth + 1)) + "]\n"],
    }
    limit = sys.getrecursionlimit()
    for parse, texts in documents.items():
        for text in texts:
            # the pre-scan refuses it with the recursion limit lowered below where either
            # parser would fail: proof that the refusal comes before any recursion
            sys.setrecursionlimit(200)
            try:
                with pytest.raises(NestingError, match=rf"nested too deeply \(more than {MAX_DEPTH} levels\)"):
                    parse(text)  # type: ignore[operator]
            finally:
                sys.setrecursionlimit(limit)


def test_brackets_inside_strings_and_comments_are_not_nesting() -> None:
    brackets = "[" * 5_000
    assert parse_json(f'{{"a": "{brackets}", "b": "\\"{brackets}", "c": "\\\\"}}')["a"] == brackets
    toml = (f'a = "{brackets}" # {brackets}\nb = \'{brackets}\'\nc = """\n{brackets}\n"""\n'
            f"d = '''{brackets}'''\n[[t]]\ne = [[1], [2]]\n")
    assert parse_toml(toml)["d"] == brackets and parse_toml(toml)["t"] == [{"e": [[1], [2]]}]
    deep_but_allowed = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(deep_but_allowed) is not None


def test_reads_of_real_shapes_are_unchanged(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('signers = ["a=b"]\n[x.y]\nz = {w = [1, {v = 2}]}\n')
    assert read_toml(tmp_path / "p.toml", "the policy file", ValueError) == \
        {"signers": ["a=b"], "x": {"y": {"z": {"w": [1, {"v": 2}]}}}}
    (tmp_path / "l.json").write_bytes('[{"é": [1, 2.5, null, true]}]'.encode("utf-16"))
    assert read_json(tmp_path / "l.json", "the lock", ValueError) == [{"é": [1, 2.5, None, True]}]
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match=r"^the lock .*bad.json is not valid JSON: Expecting"):
        read_json(tmp_path / "bad.json", "the lock", ValueError)


# --- the one escaping -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),       # OSC: the window's title, BEL
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),               # clear the screen
    ("ok\rFAKE", "ok\\x0dFAKE"),                          # CR rewrites the line
    ("a\nb", "a\\x0ab"),
    ("\x9b31m", "\\x9b31m"),                              # C1 CSI
    ("abc\u202edcba", "abc\\u202edcba"),                  # bidi override
    ("\u2066x\u2069", "\\u2066x\\u2069"),                 # isolates
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),  # format characters
    ("line\u2028sep", "line\\u2028sep"),
    ("\U000e0041tag", "\\U000e0041tag"),                   # tag characters (format)
    ("plain ünïcødé — ok", "plain ünïcødé — ok"),
])
def test_shown_escapes_everything_a_terminal_acts_on(text: str, expected: str) -> None:
    assert shown(text, 1000) == expected
    assert shown_lines(f"first\n{text}") == f"first\n{expected.replace(chr(92) + 'x0a', chr(10))}"


def test_shown_cuts_long_text() -> None:
    assert shown("x" * 200, 10) == "x" * 10 + "..."


# --- the one redaction of quoted lines ----------------------------------------------------------

@pytest.mark.parametrize("line", [
    "img2gray @ http://u:PASSWORD@host/x.whl",
    "img2gray --index-url http://u:PASSWORD@host/simple",
    "--extra-index-url=https://PASSWORD@host/simple",
    "twine upload --password PASSWORD dist/*",
    "x --token=PASSWORD",
])
def test_quoted_lines_never_show_the_password(line: str) -> None:
    shown_line = quoted(line)
    assert "PASSWORD" not in shown_line and ("***@" in shown_line or "********" in shown_line), shown_line


# --- every listing bounded ----------------------------------------------------------------

def _endless(items: int) -> Any:
    def fetch(cursor: int) -> Step[list[int], int]:
        return Step(list(range(items)), items, cursor + 1)  # always a next page, a new cursor
    return fetch


def test_a_listing_that_never_ends_is_cut_at_its_page_bound() -> None:
    asked: list[int] = []
    fetch = _endless(1)

    def counting(cursor: int) -> Step[list[int], int]:
        asked.append(cursor)
        return fetch(cursor)

    with pytest.raises(ValueError, match=r"^listing x goes on for more than 50 pages; refusing"):
        for _page in follow(0, counting, Bounds(pages=50, items=10**9), "listing x", ValueError):
            pass
    assert len(asked) == 50


def test_a_listing_of_too_many_items_is_cut_at_its_item_bound() -> None:
    pages = []
    with pytest.raises(ValueError, match=r"holds more than 2500 items \(in 3 pages\)"):
        pages.extend(follow(0, _endless(1000), Bounds(pages=10**6, items=2500), "listing x", ValueError))
    assert len(pages) == 2  # the third page, past the bound, is not handed on


def test_a_listing_that_takes_too_long_is_cut_at_its_time_bound() -> None:
    """A bound of a nanosecond: any real listing passes it after its first page (the clock
    is the real one; nothing here depends on how fast the machine is)."""
    pages = []
    with pytest.raises(ValueError, match=r"has taken more than 1e-09 s \(1 pages so far\)"):
        pages.extend(follow(0, _endless(1), Bounds(pages=10**6, items=10**9, seconds=1e-9), "listing x",
                            ValueError))
    assert len(pages) == 1


def test_a_finite_listing_is_read_whole() -> None:
    def fetch(cursor: int) -> Step[str, int]:
        return Step(f"page {cursor}", 1, cursor + 1 if cursor < 4 else None)

    assert list(follow(0, fetch, Bounds(pages=5, items=5), "x", ValueError)) == [f"page {i}" for i in range(5)]
    assert at_most([1, 2], 2, "the page", ValueError) == [1, 2]
    with pytest.raises(ValueError, match="the page holds more than 1 items"):
        at_most([1, 2], 1, "the page", ValueError)


# --- point 5: fat binaries with hundreds of MiB of zero padding ---------------------------------

@pytest.fixture
def padded_fatbin(tmp_path: Path) -> Iterator[mmap.mmap]:
    """Two real fat binary containers with 300 MiB of zero padding between them, as a
    sparse file mapped as the ELF reader maps a binary."""
    from support.gpu_stub import fatbin

    first, second = fatbin(("sm_80",)), fatbin(("sm_90", "compute_90"))
    path = tmp_path / "section"
    with path.open("wb") as out:
        out.write(first)
        out.seek(len(first) + (300 << 20))
        out.write(second)
    with path.open("rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        yield mapped


def test_zero_padding_between_fat_binary_containers_costs_steps_per_mib_not_per_8_bytes(
        padded_fatbin: mmap.mmap) -> None:
    """Counted in Python steps of the reader, not in seconds: the padding was walked 8 bytes
    a step (39 million steps for 300 MiB, ~30 s); now a MiB a step. The count stops the
    old walk early instead of waiting for it."""
    from kernel_wheels.elf import fatbin as module
    from kernel_wheels.elf.fatbin import read_fatbin

    limit, steps = 20_000, [0]
    source = module.__file__

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename != source:
            return None

        def lines(frame: FrameType, event: str, arg: object) -> Any:
            if event == "line":
                steps[0] += 1
                if steps[0] > limit:
                    raise RuntimeError(f"more than {limit} steps in elf/fatbin.py")
            return lines
        return lines

    sys.settrace(tracer)
    try:
        entries = read_fatbin(padded_fatbin, "padded.so")
    finally:
        sys.settrace(None)
    assert [e.name for e in entries] == ["sm_80", "sm_90", "compute_90"]
    assert steps[0] < 5_000, steps[0]  # ~300 chunks of a MiB, a few steps each

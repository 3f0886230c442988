"""`kernel-wheels to-wheel` on hostile and odd inputs (issue #9): every input tree,
metadata.json and version row of docs/reliability.md. Each case asserts the exact outcome:
the right wheel, or one ``kernel-wheels: error:`` line, its exit code, and an output
folder left empty."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from kernel_wheels.kernel.digest import digest_folder
from support.faults import one_error_line, tally
from support.helpers import read_member, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
CPU_WHEEL_1 = "img2gray-1.0.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


def kernel(tmp_path: Path, cpu_build: Path, *, name: str = CPU, metadata: bool = True,
           folder: str = "img2gray") -> tuple[Path, Path]:
    """``tmp_path/<folder>/build/<name>/``: a copy of the sample's CPU variant. Returns
    (the kernel folder, the variant folder)."""
    root = tmp_path / folder
    variant = root / "build" / name
    shutil.copytree(cpu_build, variant)
    if not metadata:
        (variant / "metadata.json").unlink()
    return root, variant


def redigest(variant: Path, **changes: object) -> None:
    """Rewrite metadata.json with the digest of the folder as it is now (and ``changes``)."""
    meta = json.loads((variant / "metadata.json").read_text())
    meta["digest"] = {"algorithm": "sha256", "files": digest_folder(variant)}
    meta.update(changes)
    (variant / "metadata.json").write_text(json.dumps(meta))


def convert(source: Path | str, *args: str | Path, out: Path,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("to-wheel", source, *args, "-o", out, env=env, check=False)


def refused(source: Path | str, *args: str | Path, out: Path, code: int = 1) -> str:
    """The conversion fails with one error line and ``code``, writing nothing."""
    message = one_error_line(convert(source, *args, out=out), code)
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())
    tally("inputs", inputs=1, inspected=1)
    return message


def members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "1767225600 +0000",
           "GIT_COMMITTER_DATE": "1767225600 +0000"}
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True,
                          check=True, env=env).stdout.decode().strip()


def git_repo(root: Path, tag: str = "v1.0.0") -> Path:
    """Commit ``root`` (a kernel folder) as a git repository tagged ``tag``."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "kernel")
    git(root, "tag", tag)
    return root


# -- input trees ------------------------------------------------------------------------
def test_missing_path(tmp_path: Path) -> None:
    assert refused(tmp_path / "nowhere", "1.0.0", out=tmp_path / "out", code=2) == (
        f"'{tmp_path / 'nowhere'}' is not an existing folder, a git URL or a Hub repository id (org/name)")


def test_empty_build_folder(tmp_path: Path) -> None:
    (tmp_path / "img2gray" / "build").mkdir(parents=True)
    assert refused(tmp_path / "img2gray", "1.0.0", out=tmp_path / "out") == (
        f"{tmp_path / 'img2gray'}/build is empty: no variant folders")
    (tmp_path / "bare").mkdir()
    assert refused(tmp_path / "bare", "1.0.0", out=tmp_path / "out") == (
        f"{tmp_path / 'bare'} has no build/ folder and no variant folders")


def test_single_variant_folder_as_source(cpu_build: Path, tmp_path: Path) -> None:
    """build/<variant> given as SOURCE converts that variant alone, to the same bytes as
    the whole kernel folder with --variant."""
    root, variant = kernel(tmp_path, cpu_build)
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\n# img2gray\n\nCard.\n")
    shutil.copytree(cpu_build, root / "build" / CUDA.replace("cu130", "cu128"))  # not converted
    alone = run_cli("to-wheel", variant, "1.0.0", "-o", tmp_path / "alone")
    assert "converting 1 of 1 variants" in alone.stderr
    whole = run_cli("to-wheel", root, "1.0.0", "-o", tmp_path / "whole", "--variant", CPU)
    assert "converting 1 of 2 variants" in whole.stderr
    assert [p.name for p in (tmp_path / "alone").iterdir()] == [CPU_WHEEL_1]
    assert (tmp_path / "alone" / CPU_WHEEL_1).read_bytes() == (tmp_path / "whole" / CPU_WHEEL_1).read_bytes()
    assert "Card." in read_member(tmp_path / "alone" / CPU_WHEEL_1, "METADATA")
    listed = run_cli("variants", variant, "--json")
    assert [v["name"] for v in json.loads(listed.stdout)["variants"]] == [CPU]
    tally("inputs", inputs=2)


def test_variant_without_a_package(tmp_path: Path) -> None:
    variant = tmp_path / "img2gray" / "build" / CPU
    (variant / "kernel").mkdir(parents=True)
    (variant / "kernel" / "__init__.py").write_text("")
    (variant / "notes.txt").write_text("no package here\n")
    assert refused(tmp_path / "img2gray", "1.0.0", out=tmp_path / "out") == (
        f"{CPU}: no Python package: neither __init__.py nor img2gray/__init__.py (found package kernel)")


@pytest.mark.parametrize("folder, reason", [
    ("torch213-cxx11-fortran-x86_64-linux", "'torch213-cxx11-fortran-x86_64-linux' is not a build variant name"),
    ("torch27-cxx11-cu1-x86_64-linux", "'torch27-cxx11-cu1-x86_64-linux': backend 'cu1' has a malformed version"),
    ("torch213-cxx11-cpu-x86_64-beos", "'torch213-cxx11-cpu-x86_64-beos' is not a build variant name"),
    ("torch-", "'torch-' is not a build variant name"),
])
def test_unknown_or_malformed_variant_name(cpu_build: Path, tmp_path: Path, folder: str, reason: str) -> None:
    root, _ = kernel(tmp_path, cpu_build, name=folder)
    assert refused(root, "1.0.0", out=tmp_path / "out") == (
        f"no build variants in {root}; variants that exist: none ({reason})")
    # next to a real variant, it is skipped, said so, and the real one converts
    shutil.copytree(cpu_build, root / "build" / CPU)
    proc = run_cli("to-wheel", root, "1.0.0", "-o", tmp_path / "out")
    assert f"skipping build/{folder}: {reason}" in proc.stderr.splitlines()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [CPU_WHEEL_1]


def test_two_variants_giving_one_wheel_name_are_refused_before_writing(cpu_build: Path,
                                                                       tmp_path: Path) -> None:
    """The grammar maps distinct variant names to distinct wheel names (see
    test_fuzz.py::test_variant_names_give_distinct_wheel_names and docs/reliability.md),
    so this guard cannot be reached from a folder; it is exercised here through the
    converter's own planning step with two variants that claim the same fields."""
    from kernel_wheels.convert.pipeline import ConvertOptions, _Conversion
    from kernel_wheels.errors import VariantError
    from kernel_wheels.kernel.variants import parse_variant
    from kernel_wheels.kernel.versions import parse_request
    from kernel_wheels.sources import FetchedVariant
    from kernel_wheels.sources.folder import FolderSource

    root, variant = kernel(tmp_path, cpu_build)
    twin = root / "build" / f"{CPU}-twin"
    shutil.copytree(variant, twin)
    source = FolderSource(root)
    request = parse_request("1.0.0")
    revision = source.resolve(request)
    staging = tmp_path / "staging"
    staging.mkdir()
    run = _Conversion(source, request, revision, ConvertOptions(output_dir=tmp_path), staging, None,
                      lambda _: None, threading.Event())
    real = parse_variant(CPU)
    run.arrive(real, FetchedVariant(variant, root))
    with pytest.raises(VariantError) as raised:
        run.arrive(dataclasses.replace(real, name=twin.name), FetchedVariant(twin, root))
    assert raised.value.message == (
        f"build/{CPU} and build/{twin.name} would both be {CPU_WHEEL_1}; convert them separately "
        "(--variant)")
    assert [p.name for p in staging.iterdir()] == [CPU_WHEEL_1]  # the twin never wrote a byte
    tally("inputs", inputs=1)


@pytest.mark.parametrize("name, shown, why", [
    ("a\\b.py", "a\\b.py", "has a backslash in its name, which a wheel cannot carry portably; rename it"),
    ("bad\xff.py", "bad\\xff.py", "has a name that is not UTF-8; rename it"),
    ("two\nlines.py", "two\\x0alines.py", "has a control character in its name, which a wheel cannot carry portably; rename it"),
])
def test_names_a_wheel_cannot_carry(cpu_build: Path, tmp_path: Path, name: str, shown: str, why: str) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    raw = os.fsencode(variant) + b"/" + (name.encode("latin-1") if "\xff" in name else name.encode())
    with open(raw, "wb") as handle:
        handle.write(b"x = 1\n")
    assert refused(root, "1.0.0", out=tmp_path / "out") == f"{CPU}/{shown} {why}"


def test_dot_dot_and_absolute_names(cpu_build: Path, tmp_path: Path) -> None:
    """A folder cannot hold a file named '..' or '/x'; a git tree can be made to (git
    mktree), and a wheel can (any zip). The git source refuses such a tree naming the
    path, and `check` fails such a wheel."""
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    git_repo(root)
    blob = git(root, "hash-object", "-w", "--stdin", stdin=b"evil\n")
    escape = git(root, "mktree", stdin=f"100644 blob {blob}\tx.py\n".encode())
    listing = git(root, "ls-tree", f"HEAD:build/{CPU}") + f"\n040000 tree {escape}\t..\n"
    tree = git(root, "mktree", stdin=listing.encode())
    build = git(root, "mktree", stdin=f"040000 tree {tree}\t{CPU}\n".encode())
    top = git(root, "mktree", stdin=f"040000 tree {build}\tbuild\n".encode())
    commit = git(root, "commit-tree", top, "-m", "a tree with ..")
    git(root, "tag", "v1.0.1", commit)
    assert refused(root, "1.0.1", out=tmp_path / "out") == (
        f"{root} holds a file named 'build/{CPU}/../x.py' at {commit[:12]}, which is not a valid "
        "path (an empty, '.' or '..' part); refusing to convert it")
    # the same wheel names in a zip: `check` fails them
    good = tmp_path / "good"
    run_cli("to-wheel", root, "1.0.0", "-o", good)
    wheel = next(good.glob("*.whl"))
    for bad_name in ("../evil.py", "/etc/evil.py", "img2gray\\evil.py"):
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp_path / wheel.name, "w") as dst:
            for info in src.infolist():
                dst.writestr(info, src.read(info))
            dst.writestr(bad_name, b"evil")
        proc = run_cli("check", tmp_path / wheel.name, check=False)
        assert proc.returncode == 1
        assert f"  fail: [wheel] member {bad_name!r} has an unsafe path" in proc.stdout.splitlines()
        tally("inputs", inputs=1)


@pytest.mark.parametrize("as_git", [False, True])
def test_symlink_out_of_the_source_is_refused(cpu_build: Path, tmp_path: Path, as_git: bool) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("not the kernel's\n")
    for link, target in (("abs.txt", str(secret)), ("rel.txt", "../../../outside.txt")):
        root, variant = kernel(tmp_path / link, cpu_build, metadata=False)
        shutil.copy(secret, tmp_path / link / "outside.txt")
        (variant / link).symlink_to(target)
        if as_git:
            git_repo(root)
        assert refused(root, "1.0.0", out=tmp_path / link / "out") == (
            f"{CPU}/{link} is a symbolic link that leads outside the source; refusing to pack it")


@pytest.mark.parametrize("as_git", [False, True])
def test_symlink_inside_the_source_is_packed(cpu_build: Path, tmp_path: Path, as_git: bool) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    (root / "LICENSE").write_text("Apache-2.0 text\n")
    (variant / "ops_alias.py").symlink_to("_ops.py")
    (variant / "LICENSE").symlink_to("../../LICENSE")  # outside the variant, inside the kernel
    if as_git:
        git_repo(root)
    out = tmp_path / "out"
    run_cli("to-wheel", root, "1.0.0", "-o", out)
    with zipfile.ZipFile(out / CPU_WHEEL_1) as zf:
        assert zf.read(f"img2gray/{CPU}/ops_alias.py") == (cpu_build / "_ops.py").read_bytes()
        assert zf.read(f"img2gray/{CPU}/LICENSE") == b"Apache-2.0 text\n"
    tally("inputs", inputs=1)


def test_git_attributes_neither_drop_nor_change_files(cpu_build: Path, tmp_path: Path) -> None:
    """`git archive` would leave out export-ignore files and rewrite export-subst ones; the
    git source packs every file exactly as committed."""
    root, variant = kernel(tmp_path, cpu_build)
    (variant / "version.txt").write_text("$Format:%H$\n")
    (variant / "text.txt").write_bytes(b"line\n")
    (root / ".gitattributes").write_text("*.so export-ignore\nversion.txt export-subst\ntext.txt eol=crlf\n")
    redigest(variant)
    git_repo(root)
    out = tmp_path / "out"
    run_cli("to-wheel", root, "1.0.0", "-o", out)
    with zipfile.ZipFile(out / CPU_WHEEL_1) as zf:
        so = next(cpu_build.glob("*.so"))
        assert zf.read(f"img2gray/{CPU}/{so.name}") == so.read_bytes()
        assert zf.read(f"img2gray/{CPU}/version.txt") == b"$Format:%H$\n"
        assert zf.read(f"img2gray/{CPU}/text.txt") == b"line\n"
    tally("inputs", inputs=1)


def test_a_git_submodule_is_refused_by_name(cpu_build: Path, tmp_path: Path) -> None:
    """A submodule's files are not in the repository: converting without them would drop
    them silently."""
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    git_repo(root)
    listing = git(root, "ls-tree", f"HEAD:build/{CPU}") + f"\n160000 commit {'1' * 40}\tthird_party\n"
    tree = git(root, "mktree", stdin=listing.encode())
    build = git(root, "mktree", stdin=f"040000 tree {tree}\t{CPU}\n".encode())
    top = git(root, "mktree", stdin=f"040000 tree {build}\tbuild\n".encode())
    git(root, "tag", "v1.0.1", git(root, "commit-tree", top, "-m", "a submodule"))
    commit = git(root, "rev-parse", "v1.0.1")
    assert refused(root, "1.0.1", out=tmp_path / "out") == (
        f"build/{CPU}/third_party is a git submodule: its files are not in {root} at {commit[:12]}; "
        "refusing to convert without them")


def test_hard_links_are_packed_as_files(cpu_build: Path, tmp_path: Path) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    os.link(variant / "_ops.py", variant / "_ops_again.py")
    run_cli("to-wheel", root, "1.0.0", "-o", tmp_path / "out")
    with zipfile.ZipFile(tmp_path / "out" / CPU_WHEEL_1) as zf:
        assert zf.read(f"img2gray/{CPU}/_ops_again.py") == zf.read(f"img2gray/{CPU}/_ops.py") == \
            (cpu_build / "_ops.py").read_bytes()
    tally("inputs", inputs=1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["FIFO", "device file", "socket"])
def test_fifo_device_and_socket_are_refused_by_name(cpu_build: Path, tmp_path: Path, kind: str) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    special = variant / "special"
    if kind == "FIFO":
        os.mkfifo(special)  # opening it for reading would block: the run must not try
    elif kind == "device file":
        os.mknod(special, 0o644 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers (root)
    else:
        # bound from inside the folder: a socket's path is limited to 108 bytes
        subprocess.run([sys.executable, "-c", "import socket; socket.socket(socket.AF_UNIX).bind('special')"],
                       cwd=variant, check=True)
    assert refused(root, "1.0.0", out=tmp_path / "out") == (
        f"{CPU}/special is a {kind}, not a file; refusing to pack it")


def test_fifty_thousand_tiny_files(cpu_build: Path, tmp_path: Path) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    for folder in range(100):
        (variant / "tables" / f"t{folder:02d}").mkdir(parents=True)
        for i in range(500):
            (variant / "tables" / f"t{folder:02d}" / f"{i:03d}.txt").write_bytes(b"%d\n" % (folder * 500 + i))
    out = tmp_path / "out"
    run_cli("to-wheel", root, "1.0.0", "-o", out)
    names = members(out / CPU_WHEEL_1)
    assert sum(n.startswith(f"img2gray/{CPU}/tables/") for n in names) == 50_000
    with zipfile.ZipFile(out / CPU_WHEEL_1) as zf:
        assert zf.read(f"img2gray/{CPU}/tables/t42/123.txt") == b"%d\n" % (42 * 500 + 123)
    assert run_cli("check", out / CPU_WHEEL_1).returncode == 0
    tally("inputs", inputs=1)


def test_a_4_gib_sparse_file_is_streamed_into_a_zip64_wheel(cpu_build: Path, tmp_path: Path) -> None:
    """4 GiB + 1 MiB of zeros (a sparse file: no disk used): streamed in constant memory
    into a zip64 wheel that `check` and Info-ZIP's unzip read back."""
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    size = 4 * 1024 ** 3 + 1024 ** 2
    with open(variant / "weights.bin", "wb") as handle:
        handle.truncate(size)
    out = tmp_path / "out"
    peak_kib = tmp_path / "peak"
    # The CLI's own high-water mark (VmHWM), written as it exits. Not wait4's ru_maxrss:
    # Linux carries the forking process's peak across exec into it, so a pytest that has
    # grown to hundreds of MB would be counted as the converter's.
    wrapper = ("import atexit, runpy, sys\n"
               "def record():\n"
               "    status = open('/proc/self/status').read()\n"
               "    line = next(l for l in status.splitlines() if l.startswith('VmHWM:'))\n"
               f"    open({str(peak_kib)!r}, 'w').write(line.split()[1])\n"
               "atexit.register(record)\n"
               "sys.argv[0] = 'kernel-wheels'\n"
               "runpy.run_module('kernel_wheels', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", wrapper, "to-wheel", str(root), "1.0.0", "-o", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    peak = int(peak_kib.read_text())
    assert 10 * 1024 < peak < 300 * 1024, f"peak memory {peak} KiB"  # streamed, not held
    wheel = out / CPU_WHEEL_1
    with zipfile.ZipFile(wheel) as zf:
        assert zf.getinfo(f"img2gray/{CPU}/weights.bin").file_size == size
    check = run_cli("check", wheel)
    assert check.stdout.startswith(f"PASS {CPU_WHEEL_1}")
    listing = subprocess.run(["unzip", "-l", str(wheel)], capture_output=True, text=True, check=True)
    assert f"{size}  " in listing.stdout and f"img2gray/{CPU}/weights.bin" in listing.stdout
    tested = subprocess.run(["unzip", "-tq", str(wheel), f"img2gray/{CPU}/weights.bin"], capture_output=True, text=True)
    assert tested.returncode == 0 and "No errors detected" in tested.stdout
    tally("inputs", inputs=1)


@pytest.mark.parametrize("damage, finding", [
    ("truncated", "[elf] img2gray/{variant}/{so} is truncated (a header lies past the end of the file)"),
    ("wrong magic", "[binary] img2gray/{variant}/{so} is not an ELF, Mach-O or PE binary"),
    ("empty", "[binary] img2gray/{variant}/{so} is not an ELF, Mach-O or PE binary"),
])
def test_a_so_that_is_not_a_valid_elf(cpu_build: Path, tmp_path: Path, damage: str, finding: str) -> None:
    root, variant = kernel(tmp_path, cpu_build, metadata=False)
    so = next(variant.glob("*.so"))
    finding = finding.format(variant=CPU, so=so.name)  # the name carries the sample source's hash
    data = so.read_bytes()
    so.write_bytes({"truncated": data[:2000], "wrong magic": b"\x7fELG" + data[4:], "empty": b""}[damage])
    out = tmp_path / "out"
    assert refused(root, "1.0.0", out=out) == f"{CPU_WHEEL_1} failed its checks and was not written: {finding}"
    # written anyway with --no-check, `check` fails it with the same finding
    run_cli("to-wheel", root, "1.0.0", "-o", out, "--no-check")
    proc = run_cli("check", out / CPU_WHEEL_1, check=False)
    assert proc.returncode == 1
    assert f"  fail: {finding}" in proc.stdout.splitlines()


def test_every_file_is_packed_or_left_out_by_name(cpu_build: Path, tmp_path: Path) -> None:
    """Every file of a variant ends up in the wheel's copy of the variant folder, or in the
    "left out" line (byte-code caches only): nothing else goes missing."""
    root, variant = kernel(tmp_path, cpu_build)
    (variant / "data" / "deep" / "deeper").mkdir(parents=True)
    files = {
        "data/deep/deeper/table.bin": os.urandom(3000),
        "data/empty.txt": b"",
        ".hidden": b"dotfile\n",
        "data/.hidden_dir_file": b"x",
        "données/ünïcode.txt": "é".encode(),
        "with space.txt": b"space\n",
        "__pycache__/_ops.cpython-311.pyc": b"cache",
        "stale.pyc": b"cache",
        # the compatibility sub-package builds had before kernel-builder #736
        "img2gray/__init__.py": b"from .. import *\n",
    }
    for name, data in files.items():
        (variant / name).parent.mkdir(parents=True, exist_ok=True)
        (variant / name).write_bytes(data)
    redigest(variant)
    proc = run_cli("to-wheel", root, "1.0.0", "-o", tmp_path / "out", "-v")  # said with -v only (#22)
    left_out = sorted(["__pycache__/_ops.cpython-311.pyc", "stale.pyc"])
    assert (f"build/{CPU}: 2 byte-code cache file(s) left out by design: {', '.join(left_out)}"
            in proc.stderr.splitlines())
    on_disk = sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file())
    packed = sorted(n.removeprefix(f"img2gray/{CPU}/") for n in members(tmp_path / "out" / CPU_WHEEL_1)
                    if n.startswith(f"img2gray/{CPU}/"))
    assert packed == sorted(set(on_disk) - set(left_out))  # the compatibility package too
    with zipfile.ZipFile(tmp_path / "out" / CPU_WHEEL_1) as zf:
        for name, data in files.items():
            if name not in left_out:
                assert zf.read(f"img2gray/{CPU}/{name}") == data, name
    tally("inputs", inputs=1)


def test_the_kernel_name_is_the_same_for_all_variants(cpu_build: Path, tmp_path: Path) -> None:
    root, _ = kernel(tmp_path, cpu_build)
    other = root / "build" / "torch213-cxx11-cpu-aarch64-linux"
    shutil.copytree(cpu_build, other)
    redigest(other, name="img2grey")
    for jobs in ("1", "2"):
        assert refused(root, "1.0.0", "-j", jobs, out=tmp_path / "out") == (
            f"the variants disagree on the kernel's name: 'img2gray' (build/{CPU}), 'img2grey' "
            "(build/torch213-cxx11-cpu-aarch64-linux); convert them separately (--variant)")


# -- metadata.json ----------------------------------------------------------------------
@pytest.mark.parametrize("content, message", [
    (b"{bad", "is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    (b"\xff\xfe{}", "is not valid JSON: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    ("[1, 2]", "is not a JSON object"),
    ("[" * 100_000, "is nested too deeply"),
    ('{"name": 5}', ": 'name' must be a string, not int"),
    ('{"name": "../evil"}', ": 'name' '../evil' is not a valid kernel name (kernels: lowercase letters, "
                            "digits and '-', starting with a letter, at least 2 characters)"),
    ('{"version": "1"}', ": 'version' must be an integer (the major version), not str"),
    ('{"version": true}', ": 'version' must be an integer (the major version), not bool"),
    ('{"version": -1}', ": 'version' -1 is not a major version (0 or more)"),
    ('{"license": ["MIT"]}', ": 'license' must be a string, not list"),
    ('{"python-depends": "einops"}', ": 'python-depends' must be a list of names, not str"),
    ('{"python-depends": [1]}', ": 'python-depends' must be a list of names"),
    ('{"backend": "cpu"}', ": 'backend' must be an object, not str"),
    ('{"backend": {"type": 1}}', ": 'backend.type' must be a string"),
    ('{"backend": {"type": "cpu", "archs": "x86"}}', ": 'backend.archs' must be a list of strings"),
    ('{"digest": "sha256"}', ": 'digest' must be an object, not str"),
    ('{"digest": {"algorithm": 256, "files": {}}}', ": 'digest.algorithm' must be a string"),
    ('{"digest": {"algorithm": "sha256", "files": ["_ops.py"]}}', ": 'digest.files' must be an object of file: sha256 strings"),
    ('{"digest": {"algorithm": "sha256", "files": {"_ops.py": 1}}}', ": 'digest.files' must be an object of file: sha256 strings"),
])
def test_malformed_metadata_json(cpu_build: Path, tmp_path: Path, content: str | bytes,
                                 message: str) -> None:
    root, variant = kernel(tmp_path, cpu_build)
    (variant / "metadata.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    separator = "" if message.startswith(":") else " "
    assert refused(root, "1.0.0", out=tmp_path / "out") == f"{CPU}/metadata.json{separator}{message}"


def test_unknown_licence_is_the_license_field(cpu_build: Path, tmp_path: Path) -> None:
    root, variant = kernel(tmp_path, cpu_build)
    redigest(variant, license="my-own-licence")
    run_cli("to-wheel", root, "1.0.0", "-o", tmp_path / "out")
    metadata = read_member(tmp_path / "out" / CPU_WHEEL_1, "METADATA")
    assert "License: my-own-licence" in metadata.splitlines() and "License-Expression" not in metadata
    tally("inputs", inputs=1)


def test_unknown_python_depends_is_an_error(cpu_build: Path, tmp_path: Path) -> None:
    root, variant = kernel(tmp_path, cpu_build)
    redigest(variant, **{"python-depends": ["left-pad"]})
    message = refused(root, "1.0.0", out=tmp_path / "out")
    assert message.startswith("unknown python-depends 'left-pad' for backend cpu (known: ")
    assert message.endswith("); add it to kernel_wheels/data/python_depends.json")


@pytest.mark.parametrize("tamper, finding", [
    ("mismatch", f"[digest] img2gray/{CPU}/_ops.py differs from its metadata.json digest"),
    ("entry for a missing file", "[digest] gone.py is in metadata.json's digest but not in the wheel"),
    ("file with no entry", f"[digest] img2gray/{CPU}/extra.py is not covered by metadata.json's digest"),
])
def test_metadata_digest_problems(cpu_build: Path, tmp_path: Path, tamper: str, finding: str) -> None:
    """to-wheel writes nothing; a wheel made anyway (--no-check) fails `check`."""
    root, variant = kernel(tmp_path, cpu_build)
    meta = json.loads((variant / "metadata.json").read_text())
    if tamper == "mismatch":
        (variant / "_ops.py").write_text((variant / "_ops.py").read_text() + "# changed after the build\n")
    elif tamper == "entry for a missing file":
        meta["digest"]["files"]["gone.py"] = meta["digest"]["files"]["_ops.py"]
        (variant / "metadata.json").write_text(json.dumps(meta))
    else:
        (variant / "extra.py").write_text("added after the build\n")
    out = tmp_path / "out"
    assert refused(root, "1.0.0", out=out) == f"{CPU_WHEEL_1} failed its checks and was not written: {finding}"
    run_cli("to-wheel", root, "1.0.0", "-o", out, "--no-check")
    proc = run_cli("check", out, check=False)
    assert proc.returncode == 1 and proc.stdout.startswith(f"FAIL {CPU_WHEEL_1}")
    assert f"  fail: {finding}" in proc.stdout.splitlines()


# -- versions ---------------------------------------------------------------------------
@pytest.mark.parametrize("version, message", [
    ("1.1.2.", "'1.1.2.' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    ("v", "'v' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    ("latest", "'latest' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    ("1.x", "'1.x' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    ("١.٢", "'١.٢' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    ("1.1.2\n3", "VERSION '1.1.2\\n3' has a control character"),
    (">=1.1,<", "'>=1.1,<' is not a valid version range"),
    ("~=1", "'~=1' is not a valid version range"),
    (">=abc", "'>=abc' is not a valid version range"),
    ("=1.1", "'=1.1' is not a valid version range"),
    ("", "give a VERSION (e.g. 1.1.2, '>=1.1,<2' or 1) or --revision"),
])
def test_malformed_versions_and_ranges(kernel_repo: Path, tmp_path: Path, version: str, message: str) -> None:
    assert refused(kernel_repo, version, out=tmp_path / "out", code=2) == message


def test_malformed_wheel_version_with_revision(kernel_repo: Path, tmp_path: Path) -> None:
    assert refused(kernel_repo, "1.x", "--revision", "v1", out=tmp_path / "out", code=2) == (
        "'1.x' is not a valid version (PEP 440)")
    assert refused(kernel_repo, "--revision", " ", out=tmp_path / "out", code=2) == "--revision is empty"


def test_no_such_tag(kernel_repo: Path, cpu_build: Path, tmp_path: Path) -> None:
    assert refused(kernel_repo, "3.0.0", out=tmp_path / "out") == (
        "version 3.0.0 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)")
    assert refused(kernel_repo, ">=2", out=tmp_path / "out") == (
        "version >=2 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)")
    root, _ = kernel(tmp_path, cpu_build)
    git_repo(root, tag="nightly")  # no release tag at all
    assert refused(root, "1.0.0", out=tmp_path / "out") == (
        "version 1.0.0 not found; versions that exist: none (no vX.Y.Z tags or vN branches)")


def test_a_tag_moved_between_two_runs_is_caught_by_its_commit(kernel_repo: Path, tmp_path: Path) -> None:
    repo = tmp_path / "img2gray"
    subprocess.run(["git", "clone", "-q", str(kernel_repo), str(repo)], check=True)
    for branch in ("v1",):
        git(repo, "branch", branch, f"origin/{branch}")
    out = tmp_path / "wheels"
    run_cli("to-wheel", repo, "1.1.2", "-o", out, "--variant", CPU)
    wheel = out / "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    before = wheel.read_bytes()
    old, new = git(repo, "rev-parse", "v1.1.2^{commit}"), git(repo, "rev-parse", "v1^{commit}")
    git(repo, "tag", "-f", "-a", "v1.1.2", "-m", "moved", "v1")
    proc = convert(repo, "1.1.2", "--variant", CPU, out=out)
    assert one_error_line(proc) == (
        f"{wheel} was made from commit {old[:12]}, but the source now gives commit {new[:12]} for "
        "this version (was the tag moved?); use --force to replace it")
    assert wheel.read_bytes() == before and sorted(p.name for p in out.iterdir()) == [wheel.name]
    tally("inputs", inputs=2, inspected=1)



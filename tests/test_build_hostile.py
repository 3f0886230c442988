"""`kernel-wheels build` of an untrusted source tree (issue #30, classes 3 and 4): links
and build.toml paths that lead out of the tree, compiler options that run programs or
write elsewhere, and credentials in the environment of the compilers.

Every case runs the real CLI on a real tree with real g++ (kernel-wheels' own test
kernels, tests/kernels/), as a user would; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from kernel_wheels.building.environment import tool_environment
from kernel_wheels.building.flags import refused_flag
from support.helpers import cuda_python, one_line_error

KERNELS = Path(__file__).parent / "kernels"

#: Secrets a user's shell commonly holds while building; MY_DEPLOY_KEY is no name the
#: tool could know, so only an allow-list keeps it out of the compilers.
CANARIES = {"HF_TOKEN": "hf_canary_0a1b2c3d", "TWINE_PASSWORD": "twine-canary-pw",
            "AWS_SECRET_ACCESS_KEY": "aws/canary+secret", "MY_DEPLOY_KEY": "deploy-canary-key"}


def build(tree: Path, out: Path, cache: Path, *args: str,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kernel_wheels", "build", str(tree), "-o", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KERNEL_WHEELS_CACHE": str(cache), **(env or {})})


def copy_kernel(name: str, tmp_path: Path) -> Path:
    target = tmp_path / "tree" / name
    shutil.copytree(KERNELS / name, target)
    return target


def nothing_built(out: Path) -> None:
    assert not (out / "build").exists() or list((out / "build").iterdir()) == []


def edit_toml(tree: Path, old: str, new: str) -> None:
    toml = (tree / "build.toml").read_text()
    assert old in toml
    (tree / "build.toml").write_text(toml.replace(old, new, 1))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder of the build machine beside (not inside) the tree, holding a secret."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "secret.py").write_text('SECRET = "the build machine private file"\n')
    (folder / "__init__.py").write_text("from .secret import SECRET\n")
    (folder / "inc").mkdir()
    (folder / "inc" / "kw_outside.h").write_text("#define KW_OUTSIDE 1\n")
    (folder / "outside.cpp").write_text("int kw_outside() { return 1; }\n")
    return folder


# --- class 3: links and paths that lead out of the tree ----------------------------------


def test_file_link_in_the_package_leading_out_is_refused(tmp_path: Path, outside: Path) -> None:
    tree = copy_kernel("kw-noarch", tmp_path)
    (tree / "torch-ext" / "kw_noarch" / "stolen.py").symlink_to(outside / "secret.py")
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "torch-ext/kw_noarch/stolen.py", "symbolic link", "outside", status=1)
    nothing_built(tmp_path / "out")


def test_package_folder_that_is_a_link_leading_out_is_refused(tmp_path: Path, outside: Path) -> None:
    tree = copy_kernel("kw-noarch", tmp_path)
    package = tree / "torch-ext" / "kw_noarch"
    shutil.rmtree(package)
    package.symlink_to(outside, target_is_directory=True)
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "torch-ext/kw_noarch", "symbolic link", "outside", status=1)
    nothing_built(tmp_path / "out")


def test_folder_link_inside_the_package_leading_out_is_refused(tmp_path: Path, outside: Path) -> None:
    tree = copy_kernel("kw-noarch", tmp_path)
    (tree / "torch-ext" / "kw_noarch" / "vendored").symlink_to(outside, target_is_directory=True)
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "torch-ext/kw_noarch/vendored", "symbolic link", "outside", status=1)
    nothing_built(tmp_path / "out")


def test_a_fifo_in_the_package_is_one_line_not_a_hang(tmp_path: Path) -> None:
    tree = copy_kernel("kw-noarch", tmp_path)
    os.mkfifo(tree / "torch-ext" / "kw_noarch" / "waits.py")
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "torch-ext/kw_noarch/waits.py is a FIFO", status=1)
    nothing_built(tmp_path / "out")


def test_a_csrc_folder_linked_out_of_the_tree_is_refused(tmp_path: Path, outside: Path) -> None:
    """csrc/ is on every include path without build.toml naming it."""
    tree = copy_kernel("kw-stable", tmp_path)
    (tree / "csrc").symlink_to(outside / "inc", target_is_directory=True)
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "csrc is a symbolic link that leads outside the source tree", status=1)
    nothing_built(tmp_path / "out")


def test_links_that_stay_inside_the_tree_still_build(tmp_path: Path) -> None:
    """Trees share files by links (a header kept once): those are the tree's own."""
    tree = copy_kernel("kw-noarch", tmp_path)
    (tree / "shared").mkdir()
    (tree / "shared" / "helpers.py").write_text("HELPER = 1\n")
    (tree / "torch-ext" / "kw_noarch" / "helpers.py").symlink_to(Path("../../shared/helpers.py"))
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    for variant in (tmp_path / "out" / "build").iterdir():
        copied = variant / "helpers.py"
        assert copied.read_text() == "HELPER = 1\n" and not copied.is_symlink()


@pytest.mark.parametrize("entry, named", [
    ("{outside}/outside.cpp", "{outside}/outside.cpp"),
    ("../../elsewhere/outside.cpp", "../../elsewhere/outside.cpp"),
    ("scale_cpu/linked.cpp", "scale_cpu/linked.cpp"),
], ids=["absolute", "dot-dot", "link"])
def test_src_entries_outside_the_tree_are_refused(tmp_path: Path, outside: Path, entry: str,
                                                  named: str) -> None:
    tree = copy_kernel("kw-stable", tmp_path)
    (tree / "scale_cpu" / "linked.cpp").symlink_to(outside / "outside.cpp")
    entry, named = entry.format(outside=outside), named.format(outside=outside)
    edit_toml(tree, 'src = ["scale_cpu/scale.cpp", ', f'src = ["{entry}", "scale_cpu/scale.cpp", ')
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "[kernel.scale_cpu] src", named, status=1)
    nothing_built(tmp_path / "out")


@pytest.mark.parametrize("entry", ["{outside}/inc", "../../elsewhere/inc", "scale_cpu/linked-inc"],
                         ids=["absolute", "dot-dot", "link"])
def test_include_entries_outside_the_tree_are_refused(tmp_path: Path, outside: Path,
                                                      entry: str) -> None:
    tree = copy_kernel("kw-stable", tmp_path)
    (tree / "scale_cpu" / "linked-inc").symlink_to(outside / "inc", target_is_directory=True)
    entry = entry.format(outside=outside)
    edit_toml(tree, 'include = ["scale_cpu/include"]', f'include = ["scale_cpu/include", "{entry}"]')
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    one_line_error(proc, "[kernel.scale_cpu] include", entry, status=1)
    nothing_built(tmp_path / "out")


# --- class 4: options that run programs or write elsewhere ----------------------------------


def toml_strings(values: Iterable[str]) -> str:
    """TOML literal strings (no escapes: the shell's quotes stay as they are)."""
    return ", ".join(f"'{v}'" for v in values)


def shell_wrapper(marker: Path) -> str:
    # gcc's -wrapper: "prog,arg,..." runs prog with the wrapped command appended
    return f'/bin/sh,-c,echo ran > {marker}; exec "$0" "$@"'


@pytest.mark.parametrize("flags, option", [
    (['-wrapper', '{wrapper}'], "-wrapper"),
    (['-fplugin={marker}.so'], "-fplugin"),
    (['-B{outside}'], "-B"),
    (['-specs={outside}/evil.specs'], "-specs"),
    (['-dumpdir', '{outside}/', '-save-temps'], "-dumpdir"),
    (['-o', '{marker}'], "-o"),
    (['@{outside}/options.txt'], "@"),
    (['-Wp,-MD,{marker}'], "-MD"),
    (['-MF{marker}'], "-MF"),
    (['--output={marker}'], "--output"),
    (['--plugin={marker}.so'], "--plugin"),
    (['-Wl,-plugin={marker}.so'], "-Wl,"),
    (['-Xlinker', '--dynamic-linker={marker}'], "-Xlinker"),
], ids=["wrapper", "fplugin", "B", "specs", "dumpdir", "o", "response-file", "Wp-MD", "MF",
        "long-output", "long-plugin", "Wl-plugin", "Xlinker"])
def test_compiler_options_that_run_programs_or_write_elsewhere_are_refused(
        tmp_path: Path, outside: Path, flags: list[str], option: str) -> None:
    tree = copy_kernel("kw-stable", tmp_path)
    marker = tmp_path / "ran"
    (outside / "options.txt").write_text(f"-wrapper {shell_wrapper(marker)}\n")
    (outside / "evil.specs").write_text(f"*cc1plus:\n+ %:print-file-name({marker})\n")
    text = toml_strings(f.format(wrapper=shell_wrapper(marker), marker=marker, outside=outside)
                        for f in flags)
    edit_toml(tree, 'cxx-flags = ["-DKW_COMPONENT_ONLY"]', f'cxx-flags = ["-DKW_COMPONENT_ONLY", {text}]')
    before = sorted(p.name for p in outside.iterdir())
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    assert not marker.exists()
    assert sorted(p.name for p in outside.iterdir()) == before
    line = one_line_error(proc, "[kernel.scale_cpu] cxx-flags", status=1)
    assert option in line.split("cxx-flags", 1)[1], line
    nothing_built(tmp_path / "out")
    assert not (tmp_path / "cache" / "build-objects").exists() or not any(
        (tmp_path / "cache" / "build-objects").rglob("*.o"))


@pytest.mark.parametrize("flags, option", [
    (['-ccbin', '/bin/sh'], "-ccbin"),
    (['--compiler-bindir=/tmp'], "--compiler-bindir"),
    (['-Xcompiler', '-O2,-wrapper,/bin/sh'], "-wrapper"),
    (['-Xcompiler=-fplugin=x.so'], "-fplugin"),
    (['--compiler-options=-B/tmp'], "-B"),
    (['--keep-dir=/tmp'], "--keep-dir"),
    (['--options-file', '/tmp/x'], "--options-file"),
    (['-run'], "-run"),
    (['-forward-unknown-to-host-compiler'], "-forward-unknown-to-host-compiler"),
], ids=["ccbin", "compiler-bindir", "Xcompiler-wrapper", "Xcompiler-fplugin", "compiler-options-B",
        "keep-dir", "options-file", "run", "forward-unknown"])
def test_nvcc_options_that_run_programs_or_write_elsewhere_are_refused_before_any_work(
        tmp_path: Path, flags: list[str], option: str) -> None:
    """Refused when build.toml is read: also on a machine without nvcc (this CPU torch)."""
    tree = copy_kernel("kw-stable", tmp_path)
    edit_toml(tree, 'backends = ["cpu"]', 'backends = ["cpu", "cuda"]')
    (tree / "build.toml").write_text((tree / "build.toml").read_text() + (
        '\n[kernel.scale_cuda]\nbackend = "cuda"\ndepends = ["torch"]\n'
        f'src = ["scale_cpu/scale.cpp"]\ncuda-flags = [{toml_strings(flags)}]\n'))
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    line = one_line_error(proc, "[kernel.scale_cuda] cuda-flags", status=1)
    assert option in line.split("cuda-flags", 1)[1], line
    nothing_built(tmp_path / "out")


@pytest.mark.parametrize("where", ["cuda-flags", "src"])
def test_nothing_nvcc_gets_from_the_tree_reaches_its_shell(tmp_path: Path, where: str) -> None:
    """nvcc runs its steps through /bin/sh, with options in double quotes (where $(...)
    runs) or, after -Xcompiler, in none: a flag or a file name holding shell syntax ran
    commands. Built in the CUDA venv, so that nvcc really is what would run."""
    marker = tmp_path / "ran"
    tree = copy_kernel("kw-stable", tmp_path)
    edit_toml(tree, 'backends = ["cpu"]', 'backends = ["cpu", "cuda"]')
    # (a file name holds no slash: the marker is written in $HOME, which is tmp_path)
    source = "scale_cuda/kw.cu" if where == "cuda-flags" else "scale_cuda/kw$(cd;touch ran).cu"
    (tree / "scale_cuda").mkdir()
    (tree / source).write_text("__global__ void kw_noop() {}\n")
    flags = toml_strings([f"-DKW=$(touch {marker})"] if where == "cuda-flags" else ["-O3"])
    (tree / "build.toml").write_text((tree / "build.toml").read_text() + (
        '\n[kernel.scale_cuda]\nbackend = "cuda"\ndepends = ["torch"]\n'
        f"src = ['{source}']\ncuda-flags = [{flags}]\n"))
    command = [str(cuda_python()), "-m", "kernel_wheels", "build", str(tree), "-o", str(tmp_path / "out"),
               "--backend", "cuda", "--arch", "9.0"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KERNEL_WHEELS_CACHE": str(tmp_path / "cache"),
                               "HOME": str(tmp_path)})
    assert not marker.exists()
    one_line_error(proc, f"[kernel.scale_cuda] {where}", "'$'", status=1)
    nothing_built(tmp_path / "out")


def test_ordinary_compiler_options_still_build(tmp_path: Path) -> None:
    """What real kernels pass (optimisation, warnings, defines, -Wa,--noexecstack) is kept."""
    tree = copy_kernel("kw-stable", tmp_path)
    edit_toml(tree, 'cxx-flags = ["-DKW_COMPONENT_ONLY"]',
              'cxx-flags = ["-DKW_COMPONENT_ONLY", "-O2", "-Wall", "-ffast-math", "-march=x86-64-v2", '
              '"-Wa,--noexecstack", "-DKW_PATH=\\"a/b\\"", "-std=c++17", "-fopenmp-simd"]')
    proc = build(tree, tmp_path / "out", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr


# The policy itself, spelling by spelling (the table in data/build_flags.json): what the
# builds above show for a few options, here for every spelling a driver accepts.

REFUSED_FOR_GCC = [
    ["-wrapper", "x"], ["-B/tmp"], ["-B", "/tmp"], ["-specs=x"], ["--specs=x"], ["-fplugin=x.so"],
    ["-fplugin-arg-x-y=z"], ["--plugin=x.so"], ["@opts"], ["-o"], ["-o/tmp/x"], ["--output=/x"],
    ["--out=/x"], ["--prefix=/x"], ["--pre=/x"], ["-MD"], ["-MF/x"], ["-MMD"], ["-dumpdir", "/x"],
    ["-dumpbase", "x"], ["-save-temps=cwd"], ["--save-temps"], ["-fdump-tree-all=/x"],
    ["--dump-tree-all"], ["-fopt-info-vec=/x"], ["-aux-info", "/x"], ["-Wp,-MD,/x"],
    ["-Wp,-fplugin=x.so"], ["-Wa,-adhln=/x"], ["-Wa,-o,/x"], ["-Xassembler", "-o/x"],
    ["-Wl,-plugin=x"], ["-Xlinker", "-plugin=x"], ["--for-linker=x"], ["-Xclang", "-load"],
    ["-mllvm", "-load=x.so"], ["-fpass-plugin=x.so"], ["--config=x.cfg"], ["-fmodule-mapper=|sh"],
    ["-ftime-trace=/x"], ["-fuse-ld=lld"], ["--ld-path=/x"], ["-iplugindir=/x"],
    ["-fdiagnostics-add-output=sarif:file=/x"], ["-ccc-gcc-name", "x"], ["--gcc-toolchain=/x"],
    ["--serialize-diagnostics", "/x"], ["-Xanalyzer", "x"],
]
ACCEPTED_FOR_GCC = [
    "-O3", "-O2", "-Wall", "-Wextra", "-Werror=return-type", "-ffast-math", "-fopenmp",
    "-march=native", "-mavx2", "-DFOO=1", "-UFOO", "-std=c++17", "--std=c++17",
    "-fno-strict-aliasing", "-ffp-contract=off", "-Wa,--noexecstack", "-fvisibility=hidden", "-g",
    "-fopt-info-vec", "-ftime-trace", "--param=max-inline-insns-single=1000", "-include", "x.h",
    "-fdiagnostics-color=always", "-pipe", "-Wno-unused-parameter", "-mllvm", "-inline-threshold=500",
]
REFUSED_FOR_NVCC = [
    ["-ccbin=/x"], ["-ccbin", "/x"], ["--compiler-bindir=/x"], ["--compiler_bindir=/x"],
    ["-Xcompiler=-wrapper,x"], ["-Xcompiler", "-O2,-fplugin=x"], ["--compiler-options", "-B/x"],
    ["-Xptxas=-o,/x"], ["-optf=x"], ["--options-file=x"], ["-odir=/x"], ["-o=/x"], ["--keep"],
    ["--keep-dir=/x"], ["-save-temps"], ["-run"], ["--run-args=x"], ["-time=/x"],
    ["--fdevice-time-trace=/x"], ["-MD"], ["-MF=/x"], ["--generate-dependencies-with-compile"],
    ["-Xlinker=-plugin"], ["-Xnvlink=x"], ["-forward-unknown-to-host-compiler"], ["@x"],
    ["-arbin=/x"], ["-DX=$(id)"], ["-DX=`id`"], ["-Xcompiler", "-O2 -wrapper /bin/sh"],
    ["-Xcompiler=-O2;sh"], ['-DNAME="x"'],
]
ACCEPTED_FOR_NVCC = [
    "-O3", "--use_fast_math", "-lineinfo", "--expt-relaxed-constexpr", "-DFOO", "-Xcompiler=-fopenmp,-O3",
    "-Xcompiler", "-Wall", "-Xptxas=-v", "-Xcudafe", "--diag_suppress=177", "--diag-suppress=20012",
    "-gencode", "arch=compute_80,code=sm_80", "--threads=4", "-std=c++17", "--ptxas-options=-v",
    "-static-global-template-stub=false",
]


@pytest.mark.parametrize("flags", REFUSED_FOR_GCC, ids=lambda f: " ".join(f))
def test_every_spelling_gcc_and_clang_take_is_refused(flags: list[str]) -> None:
    assert refused_flag(flags, "compiler") is not None
    assert refused_flag(["-O2", *flags, "-Wall"], "compiler") is not None


@pytest.mark.parametrize("flags", REFUSED_FOR_NVCC, ids=lambda f: " ".join(f))
def test_every_spelling_nvcc_takes_is_refused(flags: list[str]) -> None:
    assert refused_flag(flags, "nvcc") is not None


def test_options_real_kernels_pass_are_kept() -> None:
    assert refused_flag(ACCEPTED_FOR_GCC, "compiler") is None
    assert refused_flag(ACCEPTED_FOR_NVCC, "nvcc") is None


def test_the_environment_of_the_build_s_programs_is_an_allow_list() -> None:
    user = {**CANARIES, "PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda",
            "PIP_INDEX_URL": "https://pypi.example/simple", "HTTPS_PROXY": "http://proxy:3128",
            "GITHUB_TOKEN": "ghp_canary", "LD_PRELOAD": "/tmp/evil.so"}
    tools = tool_environment(environ=user)
    assert tools == {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda"}
    pip = tool_environment(network=True, environ=user)
    assert pip == {**tools, "PIP_INDEX_URL": "https://pypi.example/simple",
                   "HTTPS_PROXY": "http://proxy:3128"}


# --- class 4: credentials in the compilers' environment ---------------------------------------


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_compilers_run_without_the_users_credentials(tmp_path: Path, backend: str) -> None:
    """Each compiler of the build is caught while it runs (its source includes a FIFO that
    nobody writes yet) and its environment is read from /proc: no secret is in it, and
    what the compiler needs (PATH) is. cuda: nvcc and all it starts (sh, gcc, cc1plus),
    in the CUDA venv."""
    tree = copy_kernel("kw-stable", tmp_path)
    os.mkfifo(tree / "scale_cpu" / "include" / "kw" / "hold.h")
    python, args = Path(sys.executable), ["-j", "1"]
    if backend == "cpu":
        source = tree / "scale_cpu" / "scale.cpp"
        source.write_text('#include "kw/hold.h"\n' + source.read_text())
    else:
        python, args = cuda_python(), ["--backend", "cuda", "--arch", "9.0"]
        source = tree / "scale_cpu" / "kw.cu"
        source.write_text('#include "kw/hold.h"\n__global__ void kw_noop() {}\n')
        edit_toml(tree, 'backends = ["cpu"]', 'backends = ["cpu", "cuda"]')
        (tree / "build.toml").write_text((tree / "build.toml").read_text() + (
            '\n[kernel.scale_cuda]\nbackend = "cuda"\ndepends = ["torch"]\n'
            'src = ["scale_cpu/kw.cu"]\ninclude = ["scale_cpu/include"]\n'))
    canaries = {**CANARIES, "PATH": os.environ["PATH"]}
    process = subprocess.Popen(
        [str(python), "-m", "kernel_wheels", "build", str(tree), "-o", str(tmp_path / "out"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KERNEL_WHEELS_CACHE": str(tmp_path / "cache"), **canaries})
    try:
        compilers: list[int] = []
        while not compilers:  # cc1plus blocks on the FIFO: it waits there for the test
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
            compilers = [p for p in processes_with(str(source)) if p != process.pid]
        # the preprocessor that opens the FIFO is the last to start: wait for it too
        while not any(b"cc1plus" in Path(f"/proc/{p}/cmdline").read_bytes()
                      for p in processes_with(str(source))):
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        environments = {}
        for pid in processes_with(str(source)):
            if pid != process.pid:
                try:
                    environments[Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]] = \
                        Path(f"/proc/{pid}/environ").read_bytes()
                except OSError:
                    continue
        programs = {Path(name.decode()).name for name in environments}
        assert "cc1plus" in programs and ("nvcc" in programs if backend == "cuda" else True), programs
        for program, environ in environments.items():
            for name, value in CANARIES.items():
                assert value.encode() not in environ, f"{name} reached {program.decode()}"
            # (nvcc puts its own folders first for what it starts)
            paths = [v for v in environ.split(b"\0") if v.startswith(b"PATH=")]
            assert len(paths) == 1 and paths[0].endswith(os.environ["PATH"].encode()), program
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)

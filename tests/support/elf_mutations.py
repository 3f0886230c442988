"""Hostile ELF files for the ELF reader's tests and benchmark: a tiny shared library
compiled here, mutations of real shared objects, wheels that carry them, and the system
loader as the judge.

Mutations stay on the *frame* of a shared object, the part the reader answers for: the
ELF header, the program and section header tables, the dynamic entries, the version
records, and the dynamic symbols' links to other tables (their name offsets and section
indexes); plus truncations and extensions of the file. Field overwrites use boundary
values (0, 1, all ones, the sign bit, the file size +-1, the old value +-1, ...); byte
flips land inside those tables. What lies beyond the frame (machine code, relocation
records, symbol values, hash buckets, string bytes) is the program itself: only running
it can judge it, so it is not mutated here.

The fields are found with pyelftools, not with the reader under test.

The judge: every mutated file that ``kernel-wheels check`` accepts must load with the
system loader. ``load_all`` runs ``ctypes.CDLL`` in a worker process that forks once per
file (a constructor or a crash kills a child, never the worker or the test) and
restarts the worker should it die anyway.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from elftools.elf.elffile import ELFFile

from kernel_wheels.elf.reader import ElfError, read_elf_bytes

T = TypeVar("T")

TINY_SOURCE = r"""
#include <string.h>
static volatile int started;
static char buffer[64];
static __thread int calls = 1;  /* thread-local data: a PT_TLS segment to attack */
static __thread char scratch[32];
/* A constructor that only sets flags (one thread-local): loading runs it, it harms nothing. */
__attribute__((constructor)) static void start(void) { started = calls++; scratch[0] = 1; }
int tiny_answer(void) { return 42 + started + calls + scratch[0]; }
const char *tiny_copy(const char *text) { strncpy(buffer, text, sizeof buffer - 1); return buffer; }
void *PyInit__tiny(void) { return 0; }
"""
TINY_VERSIONS = "TINY_1.0 { global: tiny_answer; tiny_copy; PyInit__tiny; local: *; };\n"


def build_tiny_library(folder: Path) -> Path:
    """``_tiny.abi3.so``: an extension module by name (PyInit__tiny), no dependency but
    libc (and the loader, for thread-local data), with version definitions and needs (a
    version script, strncpy@GLIBC_2.2.5) and a PT_TLS segment its constructor touches."""
    (folder / "tiny.c").write_text(TINY_SOURCE)
    (folder / "tiny.map").write_text(TINY_VERSIONS)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", "_tiny.abi3.so", "tiny.c",
                    "-Wl,--version-script=tiny.map"], cwd=folder, check=True, capture_output=True)
    return folder / "_tiny.abi3.so"


# -- the frame of a shared object, as pyelftools sees it ---------------------------------
@dataclass(frozen=True)
class Field:
    name: str  # "e_phoff", "phdr[3].p_filesz", "dyn[12](0x5).d_val", ...
    offset: int
    size: int  # bytes: 1, 2, 4 or 8
    value: int
    kind: str  # what boundary values suit it (see _candidates)


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Frame:
    """The fields and regions of one shared object that mutations may touch."""

    data: bytes
    fields: tuple[Field, ...]
    regions: tuple[Region, ...]
    dynstr_size: int
    section_count: int
    highest_version: int  # the highest version index the version records define


_EHDR = [("e_ident[EI_CLASS]", 4, 1), ("e_ident[EI_DATA]", 5, 1), ("e_ident[EI_VERSION]", 6, 1),
         ("e_ident[EI_OSABI]", 7, 1), ("e_ident[EI_ABIVERSION]", 8, 1), ("e_ident[EI_PAD]", 9, 1),
         ("e_ident[15]", 15, 1), ("e_type", 16, 2), ("e_machine", 18, 2), ("e_version", 20, 4),
         ("e_entry", 24, 8), ("e_phoff", 32, 8), ("e_shoff", 40, 8), ("e_flags", 48, 4),
         ("e_ehsize", 52, 2), ("e_phentsize", 54, 2), ("e_phnum", 56, 2), ("e_shentsize", 58, 2),
         ("e_shnum", 60, 2), ("e_shstrndx", 62, 2)]
_PHDR = [("p_type", 0, 4), ("p_flags", 4, 4), ("p_offset", 8, 8), ("p_vaddr", 16, 8),
         ("p_paddr", 24, 8), ("p_filesz", 32, 8), ("p_memsz", 40, 8), ("p_align", 48, 8)]
_SHDR = [("sh_name", 0, 4), ("sh_type", 4, 4), ("sh_flags", 8, 8), ("sh_addr", 16, 8),
         ("sh_offset", 24, 8), ("sh_size", 32, 8), ("sh_link", 40, 4), ("sh_info", 44, 4),
         ("sh_addralign", 48, 8), ("sh_entsize", 56, 8)]
_VERNEED = [("vn_version", 0, 2), ("vn_cnt", 2, 2), ("vn_file", 4, 4), ("vn_aux", 8, 4), ("vn_next", 12, 4)]
_VERNAUX = [("vna_hash", 0, 4), ("vna_flags", 4, 2), ("vna_other", 6, 2), ("vna_name", 8, 4),
            ("vna_next", 12, 4)]
_VERDEF = [("vd_version", 0, 2), ("vd_flags", 2, 2), ("vd_ndx", 4, 2), ("vd_cnt", 6, 2),
           ("vd_hash", 8, 4), ("vd_aux", 12, 4), ("vd_next", 16, 4)]
_VERDAUX = [("vda_name", 0, 4), ("vda_next", 4, 4)]


def _read(data: bytes, offset: int, size: int) -> int:
    return int.from_bytes(data[offset:offset + size], "little")


def _fields(data: bytes, base: int, layout: list[tuple[str, int, int]], prefix: str,
            kind: str) -> list[Field]:
    return [Field(f"{prefix}{name}", base + at, size, _read(data, base + at, size), kind)
            for name, at, size in layout]


def _version_fields(data: bytes, offset: int, kind: str) -> list[Field]:
    """The records of .gnu.version_r (kind "verneed") or .gnu.version_d ("verdef"),
    walked along their links as the format defines them."""
    head, aux_layout = (_VERNEED, _VERNAUX) if kind == "verneed" else (_VERDEF, _VERDAUX)
    count_at, aux_at, next_at = (2, 8, 12) if kind == "verneed" else (6, 12, 16)
    aux_next_at = 12 if kind == "verneed" else 4
    fields = []
    entry = offset
    for number in range(64):
        fields += _fields(data, entry, head, f"{kind}[{number}].", "version")
        aux = entry + _read(data, entry + aux_at, 4)
        for aux_number in range(_read(data, entry + count_at, 2)):
            fields += _fields(data, aux, aux_layout, f"{kind}[{number}].aux[{aux_number}].", "version")
            aux += _read(data, aux + aux_next_at, 4)
        step = _read(data, entry + next_at, 4)
        if not step:
            break
        entry += step
    return fields


def frame_of(data: bytes) -> Frame:
    """Every field and region of a 64-bit little-endian shared object that the
    mutations touch."""
    elf = ELFFile(io.BytesIO(data))
    assert elf.elfclass == 64 and elf.little_endian, "the mutations are written for ELF64 LE"
    fields = _fields(data, 0, _EHDR, "", "header")
    phoff, shoff = elf["e_phoff"], elf["e_shoff"]
    for index in range(elf["e_phnum"]):
        fields += _fields(data, phoff + 56 * index, _PHDR, f"phdr[{index}].", "phdr")
    for index in range(elf["e_shnum"]):
        fields += _fields(data, shoff + 64 * index, _SHDR, f"shdr[{index}].", "shdr")
    regions = [Region("ELF header", 0, 64), Region("program headers", phoff, 56 * elf["e_phnum"]),
               Region("section headers", shoff, 64 * elf["e_shnum"])]
    dynamic = elf.get_section_by_name(".dynamic")
    used = 1 + next(i for i, tag in enumerate(dynamic.iter_tags()) if tag.entry.d_tag == "DT_NULL")
    for index in range(used):
        at = dynamic["sh_offset"] + 16 * index
        tag = _read(data, at, 8)
        fields.append(Field(f"dyn[{index}]({tag:#x}).d_tag", at, 8, tag, "d_tag"))
        fields.append(Field(f"dyn[{index}]({tag:#x}).d_val", at + 8, 8, _read(data, at + 8, 8), "d_val"))
    regions.append(Region("dynamic entries", dynamic["sh_offset"], 16 * used))
    for name, kind in ((".gnu.version_r", "verneed"), (".gnu.version_d", "verdef")):
        section = elf.get_section_by_name(name)
        if section is not None:
            fields += _version_fields(data, section["sh_offset"], kind)
            regions.append(Region(name, section["sh_offset"], section["sh_size"]))
    highest = max([1] + [f.value & 0x7FFF for f in fields if f.name.endswith(("vna_other", "vd_ndx"))])
    versym = elf.get_section_by_name(".gnu.version")
    for index in range(versym["sh_size"] // 2):
        at = versym["sh_offset"] + 2 * index
        fields.append(Field(f"versym[{index}]", at, 2, _read(data, at, 2), "versym"))
    dynsym = elf.get_section_by_name(".dynsym")
    for index in range(1, dynsym["sh_size"] // 24):
        at = dynsym["sh_offset"] + 24 * index
        fields.append(Field(f"dynsym[{index}].st_name", at, 4, _read(data, at, 4), "st_name"))
        fields.append(Field(f"dynsym[{index}].st_shndx", at + 6, 2, _read(data, at + 6, 2), "st_shndx"))
    dynstr = elf.get_section_by_name(".dynstr")
    return Frame(data, tuple(fields), tuple(regions), dynstr["sh_size"], elf["e_shnum"], highest)


# -- boundary values ---------------------------------------------------------------------
_PT = [0, 1, 2, 3, 4, 5, 6, 7, 0x6474E550, 0x6474E551, 0x6474E552, 0x6474E553, 0x70000001]
_SHT = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 14, 15, 16, 19, 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF]
_DT = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 17, 20, 23, 25, 27, 29, 30, 32, 0x6FFFFEF5,
       0x6FFFFFF0, 0x6FFFFFF9, 0x6FFFFFFB, 0x6FFFFFFC, 0x6FFFFFFE, 0x6FFFFFFF, 0x7FFFFFFD, 0x7FFFFFFF]
_DF_1 = [0x1, 0x8, 0x40, 0x08000000]


def _candidates(field: Field, frame: Frame) -> list[int]:
    """Boundary values for one field, each different from its value."""
    top = (1 << 8 * field.size) - 1
    value = field.value
    if field.kind == "st_name":
        values = {0, frame.dynstr_size - 1, frame.dynstr_size, top}
    elif field.kind == "st_shndx":
        values = {frame.section_count, 0xFEFF, 0xFF00, 0xFFF3, 0xFFFF}
    elif field.kind == "versym":
        values = {0x7FFF, 0xFFFF, frame.highest_version + 1}
    else:
        size = len(frame.data)
        values = {0, 1, 2, 3, 4, 8, 16, 0x1000, 0x10000, top, top >> 1, (top >> 1) + 1, value + 1,
                  value - 1, value ^ (1 << (8 * field.size - 1)), value * 2, value // 2,
                  size - 1, size, size + 1, size - 8, 0x7FFF, 0x8000, 0xFFFF}
        values |= {"p_type": set(_PT), "sh_type": set(_SHT)}.get(field.name.rsplit(".", 1)[-1], set())
        if field.kind == "d_tag":
            values |= set(_DT)
        if field.kind == "d_val":
            values |= {value | flag for flag in _DF_1}
        if field.name.endswith("p_flags"):
            values |= set(range(8))
    return sorted({v & top for v in values if v >= 0} - {value})


# -- mutations ---------------------------------------------------------------------------
class Chooser(Protocol):
    """Where a mutation's choices come from: hypothesis (tests) or a seeded random
    generator (the benchmark)."""

    def integer(self, low: int, high: int) -> int: ...

    def choice(self, items: Sequence[T]) -> T: ...


@dataclass(frozen=True)
class Mutation:
    description: str
    data: bytes


_KINDS = ["field"] * 8 + ["fields"] * 2 + ["flip"] * 6 + ["truncate"] * 2 + ["extend"] * 2


def mutate(frame: Frame, chooser: Chooser) -> Mutation:
    kind = chooser.choice(_KINDS)
    data = bytearray(frame.data)
    if kind in ("field", "fields"):
        steps = []
        for _ in range(1 if kind == "field" else chooser.integer(2, 3)):
            field = chooser.choice(frame.fields)
            value = chooser.choice(_candidates(field, frame))
            data[field.offset:field.offset + field.size] = value.to_bytes(field.size, "little")
            steps.append(f"{field.name}={value:#x} (was {field.value:#x})")
        return Mutation("; ".join(steps), bytes(data))
    if kind == "flip":
        region = chooser.choice(frame.regions)
        steps = []
        for _ in range(chooser.integer(1, 4)):
            at = region.offset + chooser.integer(0, region.size - 1)
            bit = chooser.integer(0, 7)
            data[at] ^= 1 << bit
            steps.append(f"{at:#x}^{1 << bit:#x}")
        return Mutation(f"flip in {region.name}: {', '.join(steps)}", bytes(data))
    if kind == "truncate":
        cut = chooser.integer(0, len(data) - 1)
        return Mutation(f"truncated to {cut} bytes", bytes(data[:cut]))
    length = chooser.integer(1, 4096)
    fill = chooser.choice([b"\0", b"\xff", b"\x7fELF"])
    return Mutation(f"extended by {length} bytes of {fill!r}", bytes(data) + (fill * length)[:length])


def with_fields(frame: Frame, changes: dict[str, int | Callable[[Field], int]]) -> bytes:
    """The frame's file with fields set by name (``{"phdr[0].p_filesz": 0x10}``; a
    callable gets the field and gives its new value): hand-written hostile shapes."""
    out = bytearray(frame.data)
    by_name = {f.name: f for f in frame.fields}
    for name, change in changes.items():
        field = by_name[name]
        value = change(field) if callable(change) else change
        out[field.offset:field.offset + field.size] = value.to_bytes(field.size, "little")
    return bytes(out)


# -- wheels ------------------------------------------------------------------------------
class WheelTemplate:
    """A wheel whose extension module can be swapped for another binary: every member
    kept, its SBOM and RECORD derived again as kernel-wheels derives them (a forger who
    has its source: ``checks.contract.derive``), so that only the binary can fail
    ``check``."""

    def __init__(self, wheel: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            self.members = [(info, zf.read(info)) for info in zf.infolist()]
        self.binary = next(i.filename for i, _ in self.members if i.filename.endswith(".so"))
        self.record = next(i.filename for i, _ in self.members if i.filename.endswith(".dist-info/RECORD"))
        self.sbom = next(i.filename for i, _ in self.members if i.filename.endswith(".cdx.json"))
        original = next(content for info, content in self.members if info.filename == self.binary)
        self.binary_sha256 = hashlib.sha256(original).hexdigest()
        self.name = wheel.name

    def named(self, build: int) -> str:
        """The wheel's name with a build tag, so that many versions fit in one folder."""
        name, version, rest = self.name.split("-", 2)
        return f"{name}-{version}-{build}-{rest}"

    def write(self, binary: bytes, path: Path) -> None:
        from kernel_wheels.checks.contract import derive
        from kernel_wheels.checks.facts import WheelContents

        contents = {info.filename: content for info, content in self.members}
        contents[self.binary] = binary
        dist_info = self.record.rsplit("/", 1)[0]
        facts = WheelContents(self.name, [n for n in contents if n != self.record], dist_info)
        facts.hashes = {n: hashlib.sha256(c).digest() for n, c in contents.items() if n != self.record}
        facts.sizes = {n: len(c) for n, c in contents.items() if n != self.record}
        facts.texts = {n.split("/", 1)[1]: c.decode() for n, c in contents.items()
                       if n.startswith(dist_info + "/") and n.endswith((".json", "METADATA", "WHEEL"))}
        record = facts.provenance
        assert record is not None
        derived = derive(facts, record, None, None).members
        contents[self.sbom], contents[self.record] = derived[self.sbom], derived[self.record]
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
            for info, _ in self.members:
                zf.writestr(info, contents[info.filename], zipfile.ZIP_STORED)


VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def template_wheel(binary: Path, folder: Path) -> WheelTemplate:
    """A wheel that carries ``binary`` as the variant's extension, made by ``to-wheel
    --no-check`` itself (no metadata.json: nothing but the binary can fail a check)."""
    variant = folder / "img2gray" / "build" / VARIANT
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("")
    shutil.copy(binary, variant / binary.name)
    subprocess.run([sys.executable, "-m", "kernel_wheels", "to-wheel", str(folder / "img2gray"), "1.0.0",
                    "-o", str(folder / "out"), "--no-check"], check=True, capture_output=True, timeout=600)
    return WheelTemplate(next((folder / "out").glob("*.whl")))


@dataclass(frozen=True)
class Base:
    """One shared object under attack, its frame, and a wheel that carries it."""

    name: str
    so: Path
    frame: Frame
    template: WheelTemplate
    needs_torch: bool  # the sample kernel's extension loads only after ``import torch``


def base_of(name: str, so: Path, folder: Path, *, needs_torch: bool) -> Base:
    return Base(name, so, frame_of(so.read_bytes()), template_wheel(so, folder), needs_torch)


def check_folder(folder: Path) -> tuple[dict[str, dict[str, Any]], subprocess.CompletedProcess[str]]:
    """``kernel-wheels check --json`` on every wheel of ``folder``, as a user runs it:
    {wheel file name: its report}."""
    proc = subprocess.run([sys.executable, "-m", "kernel_wheels", "check", "--json", "--jobs", "2",
                           str(folder)], capture_output=True, text=True, timeout=1200)
    reports = json.loads(proc.stdout) if proc.stdout.strip().startswith("[") else []
    return {r["wheel"]: r for r in reports}, proc


# -- the system loader as the judge ------------------------------------------------------
_WORKER = textwrap.dedent(r"""
    import ctypes, json, os, select, signal, sys, time
    if sys.argv[1] == "torch":
        import torch  # the kernel's extension needs torch's libraries loaded first
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        path = line.rstrip("\n")
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # loads one file, so that a crash or a constructor hurts nobody
            os.close(read)
            os.dup2(write, 2)  # the loader's own complaints (assertions) go to the answer
            try:
                ctypes.CDLL(path)
                os._exit(0)
            except OSError as exc:
                os.write(write, str(exc).encode()[:2000])
                os._exit(3)
        os.close(write)
        deadline = time.monotonic() + float(sys.argv[2])
        while True:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                status = None
                break
            select.select([read], [], [], 0.05)  # wakes when the child writes or exits
        detail = os.read(read, 4000).decode("utf-8", "replace")
        os.close(read)
        if status is None:
            result = ("hung", "no answer before the deadline")
        elif os.WIFSIGNALED(status):
            result = ("crashed", f"signal {os.WTERMSIG(status)}")
        elif os.WEXITSTATUS(status) == 0:
            result = ("loaded", "")
        else:
            result = ("refused", detail)
        print(json.dumps({"path": path, "status": result[0], "detail": result[1]}), flush=True)
""")


def load_all(paths: list[Path], *, torch: bool, timeout: float = 60) -> dict[Path, tuple[str, str]]:
    """{path: (loaded | refused | crashed | hung | worker died, detail)}: ``ctypes.CDLL``
    on each file in a forked child of a worker process (which imports torch first if
    asked); the worker is restarted should it die."""
    results: dict[Path, tuple[str, str]] = {}
    pending = list(paths)
    while pending:
        worker = subprocess.Popen([sys.executable, "-c", _WORKER, "torch" if torch else "plain",
                                   str(timeout)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        assert worker.stdin is not None and worker.stdout is not None
        feeder = threading.Thread(target=_feed, args=(worker.stdin, list(pending)), daemon=True)
        try:
            if not worker.stdout.readline():
                raise RuntimeError("the loader worker did not start")
            feeder.start()  # in a thread: the worker's answers must be read while it is fed
            for line in worker.stdout:
                answer = json.loads(line)
                results[Path(answer["path"])] = (answer["status"], answer["detail"])
        finally:
            worker.kill()
            worker.wait()
            if feeder.is_alive():
                feeder.join()
        done = [p for p in pending if p in results]
        if len(done) < len(pending):
            dead = pending[len(done)]
            results[dead] = ("worker died", f"exit status {worker.returncode}")
        pending = [p for p in pending if p not in results]
    return results


def _feed(stdin: IO[str], paths: list[Path]) -> None:
    try:
        for path in paths:
            stdin.write(f"{path}\n")
        stdin.close()
    except (BrokenPipeError, ValueError):  # the worker died: load_all restarts it
        pass


# -- a fuzzing campaign ------------------------------------------------------------------
@dataclass
class Case:
    description: str
    data: bytes
    error: str | None  # the reader's ElfError, if it raised one
    wheel: str


@dataclass
class Campaign:
    """Mutants of one base, each read by the reader (in this process), packed into a
    wheel, checked by the ``check`` command, and loaded if ``check`` accepted it."""

    base: Base
    folder: Path
    cases: list[Case] = field(default_factory=list)
    exceptions: list[tuple[str, str]] = field(default_factory=list)  # (mutation, traceback line)

    def add(self, mutation: Mutation, *, catch_all: bool = False) -> None:
        """Read ``mutation`` as check would; anything but ElfError propagates (the tests:
        hypothesis shrinks it), or is counted with ``catch_all`` (the benchmark)."""
        try:
            read_elf_bytes(mutation.data, f"img2gray/{VARIANT}/{self.base.so.name}")
            error = None
        except ElfError as exc:
            error = str(exc)
        except Exception as exc:
            if not catch_all:
                raise
            self.exceptions.append((mutation.description, f"{type(exc).__name__}: {exc}"))
            error = f"{type(exc).__name__}"
        wheel = self.base.template.named(len(self.cases))
        (self.folder / "wheels").mkdir(parents=True, exist_ok=True)
        self.base.template.write(mutation.data, self.folder / "wheels" / wheel)
        self.cases.append(Case(mutation.description, mutation.data, error, wheel))

    def judge(self) -> Verdict:
        started = time.monotonic()
        reports, proc = check_folder(self.folder / "wheels")
        checked = time.monotonic()
        accepted = [c for c in self.cases if reports.get(c.wheel, {}).get("passed")]
        files = []
        for case in accepted:
            so = self.folder / "accepted" / case.wheel / self.base.so.name
            so.parent.mkdir(parents=True)
            so.write_bytes(case.data)
            files.append(so)
        loads = load_all(files, torch=self.base.needs_torch)
        verdicts = {case.wheel: loads[so] for case, so in zip(accepted, files, strict=True)}
        return Verdict(reports, proc, accepted, verdicts, checked - started, time.monotonic() - checked)


@dataclass
class Verdict:
    reports: dict[str, dict[str, Any]]
    proc: subprocess.CompletedProcess[str]
    accepted: list[Case]
    loads: dict[str, tuple[str, str]]  # wheel -> what the system loader did
    check_seconds: float
    load_seconds: float

    def unloadable(self) -> list[tuple[str, tuple[str, str]]]:
        return [(c.description, self.loads[c.wheel]) for c in self.accepted if self.loads[c.wheel][0] != "loaded"]

    def unreported(self, cases: list[Case]) -> list[tuple[str, str | None]]:
        """Cases whose ElfError ``check`` did not report as a failure (a file without the
        ELF magic fails as no binary at all)."""
        missed = []
        for case in cases:
            if case.error is None:
                continue
            report = self.reports.get(case.wheel)
            failures = {f["message"] for f in report["findings"] if f["status"] == "fail"} if report else set()
            if not ((case.error in failures) if case.data[:4] == b"\x7fELF" else failures):
                missed.append((case.description, case.error))
        return missed


#: (words in a refusal, the kind of refusal), first match wins.
_REASONS = [
    (("is truncated", "past the end of the file"), "truncated: a table or segment past the end"),
    (("not an ELF file", "ELF class", "identification", "OS ABI", "ABI version", "ELF version",
      "not a shared object", "ELF header size", "cannot be for machine"), "ELF header"),
    (("program header table", "program header entry", "program headers"), "program header table"),
    (("loadable segment", "PT_LOAD"), "loadable segments (bounds, alignment, order, permissions)"),
    (("PT_DYNAMIC", "PT_TLS", "PT_PHDR", "PT_GNU_RELRO", "executable stack", "program header",
      "thread-local", "segments"), "other segments (dynamic, TLS, RELRO, stack, notes)"),
    (("version",), "symbol versions (needs, definitions, indexes)"),
    (("hash table",), "hash tables"),
    (("relocation", "DT_PLTREL"), "relocation tables"),
    (("DT_", "dynamic tag", "dynamic section", "dynamic entries", "the loader finds section",
      "the loader would call", "library path", "tag 0x", "DF_1"), "dynamic entries"),
    (("symbol",), "symbol tables"),
    (("string table", "section name"), "string tables"),
    (("section",), "sections (bounds, links, where segments map them)"),
]


def reason_class(message: str) -> str:
    """A refusal's kind, for counting (the benchmark's table)."""
    return next((kind for words, kind in _REASONS if any(w in message for w in words)), "other")


class RandomChooser:
    """Choices from a seeded random generator (the benchmark)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self._random.randint(low, high)

    def choice(self, items: Sequence[T]) -> T:
        return self._random.choice(items)

"""The ELF reader cannot be fooled: a shared object that ``check`` accepts is one the
system loader loads.

Two real shared objects are attacked: a tiny library compiled here with gcc (its
constructor only sets a flag) and the sample kernel's extension from the real build.
Named hostile shapes (the reported one: a program header table near the end of the file
with 0xffff entries, which ``check`` passed and ``ctypes.CDLL`` refused) are regression
tests; hypothesis then mutates both objects' frames (see ``elf_mutations``) and holds
every mutant to three rules: the reader raises nothing but ElfError, ``kernel-wheels
check`` never prints a traceback and reports every ElfError as a failure, and every
mutant ``check`` accepts loads with the system loader (dlopen through ctypes, in forked
children of a worker process). Nothing is mocked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kernel_wheels.checks import judge_wheel as check_wheel
from kernel_wheels.elf.reader import ElfError, read_elf_bytes
from support.elf_mutations import (
    VARIANT,
    Base,
    Campaign,
    Frame,
    base_of,
    build_tiny_library,
    check_folder,
    load_all,
    mutate,
    with_fields,
)

#: Mutants per base object and run: two bases make the 2,000 cases a run promises
#: (hypothesis may drop a few duplicates from its examples).
EXAMPLES = 1100
MINIMUM_CASES = 1000


@pytest.fixture(scope="module")
def bases(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Base]:
    tiny = build_tiny_library(tmp_path_factory.mktemp("tiny-library"))
    extension = next(cpu_build.glob("*.abi3.so"))
    return {"tiny": base_of("tiny", tiny, tmp_path_factory.mktemp("tiny-wheel"), needs_torch=False),
            "extension": base_of("extension", extension, tmp_path_factory.mktemp("extension-wheel"),
                                 needs_torch=True)}


# -- named hostile shapes ----------------------------------------------------------------
def _bytes_at(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new):]


def _phdr(frame: Frame, p_type: int) -> str:
    """``phdr[i]`` of the first program header of type ``p_type``."""
    field = next(f for f in frame.fields if f.name.endswith(".p_type") and f.value == p_type)
    return field.name.rsplit(".", 1)[0]


def _dyn(frame: Frame, tag: int) -> str:
    """``dyn[i](tag)`` of the first dynamic entry with ``tag``."""
    field = next(f for f in frame.fields if f.kind == "d_tag" and f.value == tag)
    return field.name.rsplit(".", 1)[0]


def _value(frame: Frame, name: str) -> int:
    return next(f.value for f in frame.fields if f.name == name)


PT_LOAD, PT_DYNAMIC, PT_TLS, PT_GNU_STACK, PT_GNU_RELRO = 1, 2, 7, 0x6474E551, 0x6474E552
DT_STRTAB, DT_SYMTAB, DT_INIT, DT_RELACOUNT = 5, 6, 12, 0x6FFFFFF9


def _defect(frame: Frame) -> bytes:
    """The reported shape: the program header table starts near the end of the file and
    claims 0xffff entries."""
    return with_fields(frame, {"e_phoff": len(frame.data) - 100, "e_phnum": 0xFFFF})


def _loads(frame: Frame) -> list[str]:
    return [f.name.rsplit(".", 1)[0] for f in frame.fields
            if f.name.endswith(".p_type") and f.value == PT_LOAD]


def _overlapping(frame: Frame) -> bytes:
    """The read-only data segment moved onto the code's page (address and offset still
    congruent): mapped last, it replaces the code."""
    text, rodata = _loads(frame)[1:3]
    vaddr = _value(frame, f"{text}.p_vaddr")
    return with_fields(frame, {f"{rodata}.p_vaddr": vaddr, f"{rodata}.p_paddr": vaddr})


def _strtab_elsewhere(frame: Frame) -> bytes:
    symtab = _value(frame, f"{_dyn(frame, DT_SYMTAB)}.d_val")
    return with_fields(frame, {f"{_dyn(frame, DT_STRTAB)}.d_val": symtab})


def _renamed_need(frame: Frame) -> bytes:
    """vn_file names a string that is no DT_NEEDED library (the version name itself)."""
    return with_fields(frame, {"verneed[0].vn_file": _value(frame, "verneed[0].aux[0].vna_name")})


def _needed_path(frame: Frame) -> bytes:
    """libc.so.6 renamed to /tmp/c.so in the string table (DT_NEEDED and the version
    need both read it)."""
    at = frame.data.index(b"\0libc.so.6\0") + 1
    return _bytes_at(frame.data, at, b"/tmp/c.so")


Shape = tuple[str, str, Callable[[Frame], bytes], str, str | None]
#: (test id, base, how, the ElfError's reason, what the system loader does with it: "not
#: loaded" (refused, or crashed), or None where that depends on the glibc version, the
#: machine's memory or what lies past a table)
SHAPES: list[Shape] = [
    ("phoff near the end, 0xffff entries", "tiny", _defect, "65535 program headers", "not loaded"),
    ("phoff near the end, 0xffff entries (extension)", "extension", _defect, "65535 program headers",
     "not loaded"),
    ("program header table past the end", "tiny",
     lambda f: with_fields(f, {"e_phoff": len(f.data) - 56}),
     "its program header table (10 entries at offset", "not loaded"),
    ("loadable segment past the end of the file", "tiny",  # the loader zero-fills past the end: SIGBUS
     lambda f: with_fields(f, {f"{_loads(f)[-1]}.p_filesz": len(f.data),
                               f"{_loads(f)[-1]}.p_memsz": len(f.data) + 0x100}),
     "lies past the end of the file", "not loaded"),
    ("loadable segments mapped over each other", "tiny", _overlapping,
     "are out of order or share a page", "not loaded"),
    ("address and offset not congruent", "tiny",
     lambda f: with_fields(f, {f"{_loads(f)[1]}.p_vaddr": lambda x: x.value + 0x10}),
     "are not congruent modulo its alignment", "not loaded"),
    ("unreadable loadable segment", "tiny",
     lambda f: with_fields(f, {f"{_loads(f)[0]}.p_flags": 0}), "is not readable", "not loaded"),
    ("an executable, not a shared object", "tiny", lambda f: with_fields(f, {"e_type": 2}),
     "an executable, not a shared object", "not loaded"),
    ("program header entry size", "tiny", lambda f: with_fields(f, {"e_phentsize": 32}),
     "program header entry size 32", "not loaded"),
    ("nonzero identification padding", "tiny", lambda f: with_fields(f, {"e_ident[EI_PAD]": 1}),
     "nonzero padding in its ELF identification", "not loaded"),
    ("OS ABI FreeBSD", "tiny", lambda f: with_fields(f, {"e_ident[EI_OSABI]": 9}), "OS ABI 9",
     "not loaded"),
    ("128 GiB of zero-filled memory", "tiny",  # the loader's mmap fails unless memory is overcommitted
     lambda f: with_fields(f, {f"{_loads(f)[-1]}.p_memsz": lambda x: x.value + (128 << 30)}),
     "bytes of zero-filled memory", None),
    ("thread-local block of 2**63 bytes", "tiny",  # the constructor's first access aborts
     lambda f: with_fields(f, {f"{_phdr(f, PT_TLS)}.p_memsz": 1 << 63}),
     "is not its thread-local sections", "not loaded"),
    ("PT_DYNAMIC outside every segment", "tiny",
     lambda f: with_fields(f, {f"{_phdr(f, PT_DYNAMIC)}.p_vaddr": 0x100000,
                               f"{_phdr(f, PT_DYNAMIC)}.p_offset": 0x100000}),
     "its PT_DYNAMIC segment (address 0x100000", "not loaded"),
    ("DT_STRTAB pointing at the symbols", "tiny", _strtab_elsewhere, "DT_STRTAB/DT_STRSZ",
     "not loaded"),
    ("DT_SYMTAB shifted by one symbol", "tiny",
     lambda f: with_fields(f, {f"{_dyn(f, DT_SYMTAB)}.d_val": lambda x: x.value + 24}),
     "through dynamic tag 0x6, which says", "not loaded"),
    ("version need of a library not needed", "tiny", _renamed_need,
     "which is not a DT_NEEDED library", "not loaded"),
    ("needed version with another name's hash", "tiny",
     lambda f: with_fields(f, {"verneed[0].aux[0].vna_hash": lambda x: x.value ^ 1}),
     "carries the hash of another name", "not loaded"),
    ("symbol version index beyond the records", "tiny",
     lambda f: with_fields(f, {"versym[1]": 0x7FFF}), "version index 32767", None),
    ("undefined symbol without a name", "tiny",
     lambda f: with_fields(f, {"dynsym[1].st_name": f.dynstr_size - 1}), "has no name", "not loaded"),
    ("relative relocation count too large", "tiny",
     lambda f: with_fields(f, {f"{_dyn(f, DT_RELACOUNT)}.d_val": 8}),
     "counts 8 relative relocations, but some of them are not relative", "not loaded"),
    ("RELRO over the code", "tiny",  # the code made read-only before the constructor runs
     lambda f: with_fields(f, {f"{_phdr(f, PT_GNU_RELRO)}.p_vaddr": _value(f, f"{_loads(f)[1]}.p_vaddr"),
                               f"{_phdr(f, PT_GNU_RELRO)}.p_memsz": 0x1000}),
     "its PT_GNU_RELRO segment (address 0x1000, 0x1000 bytes) does not start a writable", "not loaded"),
    ("position-independent executable flag", "tiny",
     lambda f: with_fields(f, {f"{_dyn(f, DT_RELACOUNT)}.d_tag": 0x6FFFFFFB,
                               f"{_dyn(f, DT_RELACOUNT)}.d_val": 0x08000000}),
     "a position-independent executable (DF_1_PIE)", "not loaded"),
    ("DT_INIT one byte into the code", "tiny",
     lambda f: with_fields(f, {f"{_dyn(f, DT_INIT)}.d_val": lambda x: x.value + 1}),
     "which is neither its .init section nor a function", "not loaded"),
    ("executable stack", "tiny",
     lambda f: with_fields(f, {f"{_phdr(f, PT_GNU_STACK)}.p_flags": 7}), "executable stack", None),
    ("DT_NEEDED is a path", "tiny", _needed_path, "it needs the library path '/tmp/c.so'",
     "not loaded"),
]


@pytest.fixture(scope="module")
def shapes(bases: dict[str, Base], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every shape as a file and a wheel, and what the system loader did with it (loaded
    in one batch per base: importing torch once is what makes it fast)."""
    folder = tmp_path_factory.mktemp("shapes")
    made: dict[str, dict[str, Any]] = {}
    for number, (name, base_name, build, _reason, _loader) in enumerate(SHAPES):
        base = bases[base_name]
        data = build(base.frame)
        so = folder / f"shape{number}" / base.so.name
        so.parent.mkdir()
        so.write_bytes(data)
        wheel = folder / "wheels" / base.template.named(number)
        wheel.parent.mkdir(exist_ok=True)
        base.template.write(data, wheel)
        made[name] = {"data": data, "so": so, "wheel": wheel, "base": base}
    for needs_torch in (False, True):
        paths = [m["so"] for m in made.values() if m["base"].needs_torch == needs_torch]
        for path, verdict in load_all(paths, torch=needs_torch).items():
            next(m for m in made.values() if m["so"] == path)["loader"] = verdict
    return made


@pytest.mark.parametrize("name, base_name, build, reason, loader", SHAPES, ids=[s[0] for s in SHAPES])
def test_hostile_shape_is_refused(shapes: dict[str, dict[str, Any]], name: str, base_name: str,
                                  build: Callable[[Frame], bytes], reason: str, loader: str | None) -> None:
    shape = shapes[name]
    with pytest.raises(ElfError) as refused:
        read_elf_bytes(shape["data"], f"img2gray/{VARIANT}/{shape['so'].name}")  # its place in the wheel
    message = str(refused.value)
    assert reason in message and "\n" not in message, message
    assert message.startswith(f"img2gray/{VARIANT}/{shape['so'].name}")
    report = check_wheel(shape["wheel"])
    assert not report.passed
    assert message in [f.message for f in report.failures if f.check == "elf"], report.failures
    status, detail = shape["loader"]
    if loader == "not loaded":  # the system loader agrees that the file is broken
        assert status != "loaded", (status, detail)


def test_check_command_reports_every_shape_on_one_line(shapes: dict[str, dict[str, Any]]) -> None:
    """The command users run: exit 1, one `fail: [elf] ...` line per wheel, no traceback."""
    folder = next(iter(shapes.values()))["wheel"].parent
    reports, proc = check_folder(folder)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(reports) == len(SHAPES) and not any(r["passed"] for r in reports.values())
    for shape in shapes.values():
        elf = [f["message"] for f in reports[shape["wheel"].name]["findings"]
               if f["check"] == "elf" and f["status"] == "fail"]
        assert len(elf) == 1 and "\n" not in elf[0], elf


def test_unmutated_bases_pass_check_and_load(bases: dict[str, Base], tmp_path: Path) -> None:
    """The controls: without a mutation both objects pass `check` and load, so a refusal
    above is the mutation's doing."""
    for base in bases.values():
        wheel = tmp_path / base.template.named(0)
        base.template.write(base.frame.data, wheel)
        assert check_wheel(wheel).passed, check_wheel(wheel).failures
        assert load_all([base.so], torch=base.needs_torch) == {base.so: ("loaded", "")}
        wheel.unlink()


# -- fuzzing -----------------------------------------------------------------------------
class _HypothesisChooser:
    def __init__(self, data: st.DataObject) -> None:
        self._data = data

    def integer(self, low: int, high: int) -> int:
        return self._data.draw(st.integers(low, high))

    def choice(self, items: Any) -> Any:
        return self._data.draw(st.sampled_from(items))


FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("base_name", ["tiny", "extension"])
def test_mutants_that_check_accepts_all_load(bases: dict[str, Base], base_name: str, tmp_path: Path) -> None:
    base = bases[base_name]
    campaign = Campaign(base, tmp_path)
    started = time.monotonic()

    @FUZZ
    @given(st.data())
    def mutant(data: st.DataObject) -> None:
        campaign.add(mutate(base.frame, _HypothesisChooser(data)))  # raises if the reader does

    mutant()
    generated = time.monotonic()
    verdict = campaign.judge()
    proc = verdict.proc
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr[-3000:]
    assert {c.wheel for c in campaign.cases} == set(verdict.reports), "check missed a wheel"
    assert not verdict.unreported(campaign.cases)
    refused = sum(c.error is not None for c in campaign.cases)
    print(f"{base_name}: {len(campaign.cases)} mutants, {refused} refused by the ELF reader, "
          f"{len(verdict.accepted)} accepted by check; generated in {generated - started:.1f} s, "
          f"checked in {verdict.check_seconds:.1f} s, loaded in {verdict.load_seconds:.1f} s")
    assert len(campaign.cases) >= MINIMUM_CASES
    assert verdict.accepted, "no mutant passed check: the run proves nothing"
    assert not verdict.unloadable(), verdict.unloadable()[:20]

"""What the segments of an ELF shared object map, and whether the sections agree.

glibc's loader (``_dl_map_object_from_fd``, ``_dl_map_segments``) maps each PT_LOAD
segment with ``mmap`` and then touches it: it checks only that a segment's address and
offset are congruent modulo the page size (glibc 2.28 also refused an alignment that is
not a multiple of the page), that a PT_LOAD and a PT_DYNAMIC exist, and that the object
does not need an executable stack (refused by dlopen since glibc 2.41). A segment that
reaches past the end of the file maps and then kills the process with SIGBUS; segments out
of order or on one page replace each other's pages; a PT_DYNAMIC, PT_GNU_RELRO or
PT_GNU_PROPERTY outside the mapped bytes is read or protected anyway. The reader refuses
all of that, and then holds the linker's view (section headers, which the checks read) to
the loader's (program headers, which the loader reads): every allocated section must lie
where a segment of the right permissions maps it, so that the checks judge the bytes the
loader will run.
"""

from __future__ import annotations

from .layout import (
    PF_R,
    PF_W,
    PF_X,
    PT_DYNAMIC,
    PT_GNU_EH_FRAME,
    PT_GNU_PROPERTY,
    PT_GNU_RELRO,
    PT_GNU_STACK,
    PT_INTERP,
    PT_NOTE,
    PT_PHDR,
    PT_TLS,
    SHF_EXECINSTR,
    SHF_TLS,
    SHF_WRITE,
    SHT_DYNAMIC,
    SHT_FINI_ARRAY,
    SHT_INIT_ARRAY,
    SHT_NOBITS,
    SHT_PREINIT_ARRAY,
    Layout,
    Section,
    Segment,
)

#: The loader's page on every supported machine (x86-64's and the smallest elsewhere).
PAGE = 4096
#: Loaded segments spanning more address space than this are no kernel (the loader
#: reserves the whole span at once).
MAX_SPAN = 1 << 36
#: The loader maps a segment's bytes beyond the file's (its .bss) as anonymous memory in
#: one mmap, which fails ("cannot map zero-fill pages") beyond the machine's memory.
MAX_ZERO_FILL = 1 << 30
#: glibc aligns the whole mapping to the largest PT_LOAD alignment (2.35+); real linkers
#: use 4 KiB to 2 MiB.
MAX_LOAD_ALIGN = 1 << 24
#: A thread-local block aligned beyond a page is allocated with malloc and fails at the
#: first access in some glibc versions (an abort, not an error).
MAX_TLS_ALIGN = PAGE
#: Writable sections that belong under PT_GNU_RELRO (read-only once relocated).
_RELRO_TYPES = {SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY, SHT_DYNAMIC}
_RELRO_PREFIXES = (".data.rel.ro", ".tdata", ".tbss", ".ctors", ".dtors", ".jcr", ".eh_frame",
                   ".gcc_except_table",  # writable in some toolchains' output, never written
                   ".relro_padding")  # lld pads the read-only-after-relocation part to a page


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _down(value: int, page: int = PAGE) -> int:
    return value - value % page


def _up(value: int, page: int = PAGE) -> int:
    return _down(value + page - 1, page)


def check_segments(layout: Layout) -> None:
    """The program headers, as the loader will use them."""
    loads = layout.loads
    if not loads:
        layout.fail("no loadable (PT_LOAD) segment: the loader refuses it")
    for load in loads:
        _check_load(layout, load)
    _check_load_order(layout, loads)
    _check_single(layout, PT_DYNAMIC, "PT_DYNAMIC", required=True)
    dynamic = layout.of_type(PT_DYNAMIC)[0]
    if dynamic.filesz == 0:
        layout.fail("its PT_DYNAMIC segment is empty (the loader refuses it: a debug-info file?)")
    _check_inside_load(layout, dynamic, "its PT_DYNAMIC segment")
    for kind, name in ((PT_PHDR, "PT_PHDR"), (PT_TLS, "PT_TLS"), (PT_GNU_RELRO, "PT_GNU_RELRO"),
                       (PT_GNU_EH_FRAME, "PT_GNU_EH_FRAME"), (PT_GNU_PROPERTY, "PT_GNU_PROPERTY")):
        _check_single(layout, kind, name, required=False)
    for segment in layout.of_type(PT_GNU_EH_FRAME) + layout.of_type(PT_GNU_PROPERTY):
        _check_inside_load(layout, segment, f"its program header {segment.index}")
    for segment in layout.of_type(PT_NOTE) + layout.of_type(PT_INTERP):
        layout.require_inside(segment.offset, segment.filesz, f"its program header {segment.index}")
    _check_phdr(layout)
    _check_tls_segment(layout)
    _check_stack(layout)
    _check_relro_segment(layout)


def _check_single(layout: Layout, kind: int, name: str, *, required: bool) -> None:
    count = len(layout.of_type(kind))
    if count > 1:
        layout.fail(f"{count} {name} segments (one is the most a shared object has)")
    if required and count == 0:
        layout.fail(f"no {name} segment (the loader refuses a shared object without one)")


def _check_load(layout: Layout, load: Segment) -> None:
    what = f"its loadable segment {load.index}"
    layout.require_inside(load.offset, load.filesz, what)  # past the end of the file: SIGBUS
    if not load.flags & PF_R:
        layout.fail(f"{what} is not readable (the loader reads its tables from loaded segments)")
    if load.filesz > load.memsz:
        layout.fail(f"{what} has more bytes in the file ({load.filesz:#x}) than in memory "
                    f"({load.memsz:#x})")
    if load.memsz - load.filesz > MAX_ZERO_FILL:
        layout.fail(f"{what} asks for {load.memsz - load.filesz:#x} bytes of zero-filled memory "
                    f"(more than {MAX_ZERO_FILL:#x}: the loader's mmap fails on most machines)")
    if not _is_power_of_two(load.align) or not PAGE <= load.align <= MAX_LOAD_ALIGN:
        layout.fail(f"{what} is aligned to {load.align:#x} (a power of two from {PAGE:#x} to "
                    f"{MAX_LOAD_ALIGN:#x} is what loaders map)")
    if (load.vaddr - load.offset) % load.align:
        layout.fail(f"{what}: address {load.vaddr:#x} and offset {load.offset:#x} are not "
                    f"congruent modulo its alignment {load.align:#x} (the loader refuses it)")


def _check_load_order(layout: Layout, loads: list[Segment]) -> None:
    for before, after in zip(loads, loads[1:], strict=False):
        if _up(before.vend) > _down(after.vaddr):
            layout.fail(f"its loadable segments {before.index} and {after.index} are out of order "
                        "or share a page (the loader would map one over the other)")
    span = _up(loads[-1].vend) - _down(loads[0].vaddr)
    if span > MAX_SPAN:
        layout.fail(f"its loadable segments span {span:#x} bytes of addresses")


def _check_inside_load(layout: Layout, segment: Segment, what: str) -> Segment:
    """A segment the loader reads from memory: inside one PT_LOAD's file bytes, at the
    same place in the file and in memory."""
    load = layout.load_holding(segment.vaddr, segment.filesz)
    if load is None or segment.offset - segment.vaddr != load.offset - load.vaddr \
            or segment.memsz < segment.filesz:
        layout.fail(f"{what} (address {segment.vaddr:#x}, {segment.filesz:#x} bytes) is not "
                    "inside a loaded segment's file contents")
    return load


def _check_phdr(layout: Layout) -> None:
    for segment in layout.of_type(PT_PHDR):
        header = layout.header
        if segment.offset != header.phoff or segment.filesz != header.phnum * header.phentsize:
            layout.fail("its PT_PHDR segment is not its program header table")
        _check_inside_load(layout, segment, "its PT_PHDR segment")


def _check_tls_segment(layout: Layout) -> None:
    for tls in layout.of_type(PT_TLS):
        if tls.filesz > tls.memsz:
            layout.fail("its PT_TLS segment has more bytes in the file than in memory")
        if tls.align > 1 and (not _is_power_of_two(tls.align) or tls.align > MAX_TLS_ALIGN):
            layout.fail(f"its PT_TLS segment is aligned to {tls.align:#x} (a power of two up to "
                        f"{MAX_TLS_ALIGN:#x} is what the loader allocates)")
        if tls.filesz:
            _check_inside_load(layout, tls, "its PT_TLS segment")


def _check_stack(layout: Layout) -> None:
    stacks = layout.of_type(PT_GNU_STACK)
    if len(stacks) != 1 or stacks[0].flags & PF_X:
        layout.fail("it asks for an executable stack (no PT_GNU_STACK, or one with PF_X): "
                    "dlopen refuses that since glibc 2.41, and it is a security hole")


def _check_relro_segment(layout: Layout) -> None:
    for relro in layout.of_type(PT_GNU_RELRO):
        load = layout.load_holding(relro.vaddr, relro.memsz, in_file=False)
        if load is None or not load.flags & PF_W or load.vaddr != relro.vaddr:
            layout.fail(f"its PT_GNU_RELRO segment (address {relro.vaddr:#x}, {relro.memsz:#x} bytes) "
                        "does not start a writable loaded segment")


def check_sections(layout: Layout) -> None:
    """Every allocated section where the program headers map it, with the permissions
    its contents need; the tables the loader finds through segments equal to theirs."""
    for section in layout.sections:
        if section.allocated and section.size and not section.flags & SHF_TLS:
            _check_mapped(layout, section)
    _check_tls_sections(layout)
    _check_same_place(layout, PT_DYNAMIC, layout.first(SHT_DYNAMIC), "the dynamic section")
    if layout.header.shstrndx:  # without section names, these sections cannot be found
        _check_same_place(layout, PT_GNU_EH_FRAME, layout.named(".eh_frame_hdr"), ".eh_frame_hdr")
        _check_same_place(layout, PT_GNU_PROPERTY, layout.named(".note.gnu.property"),
                          ".note.gnu.property")


def _check_mapped(layout: Layout, section: Section) -> None:
    what = f"section {section.name or section.index}"
    load = layout.load_holding(section.addr, section.size, in_file=section.in_file)
    if load is None:
        layout.fail(f"{what} (address {section.addr:#x}) is not inside a loaded segment")
    if section.in_file and section.offset - section.addr != load.offset - load.vaddr:
        layout.fail(f"{what} is at offset {section.offset:#x} in the file, but the loader maps "
                    f"offset {load.offset + section.addr - load.vaddr:#x} at its address")
    if section.type == SHT_NOBITS and section.addr < load.vaddr + load.filesz:
        layout.fail(f"{what} holds no bytes, but the loader fills its address from the file")
    if section.flags & SHF_EXECINSTR and not load.flags & PF_X:
        layout.fail(f"{what} holds code in a segment that is not executable")
    if section.flags & SHF_WRITE and not load.flags & PF_W:
        layout.fail(f"{what} is writable data in a segment that is not writable")


def _check_tls_sections(layout: Layout) -> None:
    """PT_TLS is the thread-local sections' image: the loader allocates p_memsz bytes per
    thread (an absurd size aborts the process at the first access) and copies p_filesz."""
    sections = [s for s in layout.sections if s.flags & SHF_TLS and s.allocated and s.size]
    tls = layout.of_type(PT_TLS)
    if not sections:
        if tls and tls[0].memsz:
            layout.fail("its PT_TLS segment has no thread-local section")
        return
    if not tls:
        layout.fail("it has thread-local sections but no PT_TLS segment")
    segment = tls[0]
    for section in sections:
        if not segment.holds(section.addr, section.size, in_file=section.in_file) \
                or (section.in_file and section.offset - section.addr != segment.offset - segment.vaddr) \
                or (not section.in_file and section.addr < segment.vaddr + segment.filesz):
            layout.fail(f"thread-local section {section.name or section.index} is not where its "
                        "PT_TLS segment says")
    start = min(s.addr for s in sections)
    image = max((s.addr + s.size for s in sections if s.in_file), default=start) - start
    end = max(s.addr + s.size for s in sections) - start
    if segment.vaddr != start or segment.filesz != image or segment.memsz > _up(end, max(segment.align, 1)):
        layout.fail(f"its PT_TLS segment ({segment.filesz:#x} bytes in the file, {segment.memsz:#x} "
                    f"in memory) is not its thread-local sections ({image:#x}, {end:#x})")


def _check_same_place(layout: Layout, kind: int, section: Section | None, what: str) -> None:
    segments = layout.of_type(kind)
    if section is None and not segments:
        return
    if section is None or not segments:
        layout.fail(f"{what} and its program header do not come together")
    segment = segments[0]
    if (segment.vaddr, segment.offset, segment.filesz) != (section.addr, section.offset, section.size):
        layout.fail(f"{what} (address {section.addr:#x}, {section.size:#x} bytes) is not where its "
                    f"program header says (address {segment.vaddr:#x}, {segment.filesz:#x} bytes)")


def check_relro(layout: Layout, bind_now: bool) -> None:
    """The pages PT_GNU_RELRO makes read-only after relocation hold only what is never
    written after it: a writable variable there crashes the first write to it."""
    for relro in layout.of_type(PT_GNU_RELRO):
        start, end = _down(relro.vaddr), _down(relro.vaddr + relro.memsz)
        for section in layout.sections:
            if not (section.allocated and section.flags & SHF_WRITE and section.size) \
                    or section.addr + section.size <= start or section.addr >= end:
                continue
            if section.type in _RELRO_TYPES or section.name == ".got" \
                    or section.name.startswith(_RELRO_PREFIXES):
                continue
            # The PLT's GOT: bound at load time with BIND_NOW; otherwise only the loader's own
            # first three words, written before the protection, may lie under it.
            reserved = 3 * layout.header.word
            if section.name in (".got.plt", ".plt") and (bind_now or end <= section.addr + reserved):
                continue
            layout.fail(f"its PT_GNU_RELRO segment makes writable section "
                        f"{section.name or section.index} read-only")

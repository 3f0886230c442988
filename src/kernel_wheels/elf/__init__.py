"""Reading ELF shared objects, which come from whoever published a kernel and are read as
hostile: the frame is checked the way glibc's loader checks it before any table is used.
The checks judge what this reads (``checks/``); the builder reads its own extensions and
torch's libraries with it (``building/``).

- ``reader``: :func:`~kernel_wheels.elf.reader.read_elf`, the facts the checks need, in
  one pass over a memory map;
- ``layout``: headers, segments and sections; ``mapping``: what they say about each
  other; ``dynamic``: the dynamic entries; ``symbols`` and ``versions``: symbols, hash
  tables and symbol versions.
"""

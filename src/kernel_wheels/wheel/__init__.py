"""The wheel format, as this tool writes it.

- ``plan``: the wheel contract as code (a variant and a kernel version -> name, version,
  tags, requirements);
- ``metadata``: the dist-info texts (METADATA, WHEEL, the provenance record);
- ``guard``: the import guard that names the wheel's build when torch does not match;
- ``writer``: writing a wheel reproducibly (RECORD, member order, timestamps) and placing
  it atomically, on top of ``zipwriter`` (a deterministic one-pass zip writer) and
  ``compression`` (the pinned deflate implementation and its thread slots).

It reads the ``kernel`` wing's values and knows nothing of where a kernel came from.
"""

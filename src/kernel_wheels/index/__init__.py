"""What a package index is made of, whoever serves it (the static site, ``serve``, the
mirror) and whoever reads it (``install``, ``publish``):

- ``simple``: Simple Repository API pages (PEP 503 HTML, PEP 691 JSON) rendered from a
  list of wheel entries, with no file system or network in sight;
- ``targets``: build targets (``torch27-cxx11-cu128``), what a target can use and which
  build the Hub's loader prefers;
- ``wheelfacts``: what an index needs from one wheel, read in one pass, plus its check.
"""

"""Getting wheels to machines: the stages after ``check``.

- ``targets``: build targets (``torch27-cxx11-cu128``), what a target can use and which
  build the Hub's loader prefers;
- ``environment``: the facts of a Python environment (torch, CUDA, C++ ABI, tags) and
  its target key;
- ``simple``: rendering Simple Repository API pages (PEP 503 HTML, PEP 691 JSON) from
  a list of wheel entries, with no file system or network in sight;
- ``wheelfacts``: what the index needs from one wheel, read in one pass, plus its check;
- ``site``: the static index site on disk (incremental, atomic, locked), with
  ``sitepages`` (which pages to render, writing them), ``sitestate`` (the cache between
  runs) and ``atomic`` (renames from a staging folder, the lock);
- ``transport``: HTTP with index servers, treated as hostile (credentials for their own
  origin only, a minimum transfer rate, bounded answers); every server text and installer
  output goes through ``kernel_wheels.redaction`` before it is shown;
- ``simple_client``: reading a remote index's Simple API;
- ``credentials`` and ``publish``: uploading to an index server;
- ``install``: choosing the one wheel that fits an environment and installing it.

No module here imports the CLI.
"""

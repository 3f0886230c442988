"""What a Hub kernel is: the domain values every other wing reads.

- ``variants``: the build-variant grammar (``torch27-cxx11-cu128-x86_64-linux`` -> ``Variant``);
- ``versions``: version requests (``1.1.2``, ``>=1.1,<2``, ``1``, a revision) and the wheel
  version they give; ``revision``: what a source resolved a request to (a pinned commit);
- ``selection``: choosing variants by name patterns and parsed fields;
- ``layout``: a variant folder's files and where each goes in a wheel;
- ``metadata``: a variant's ``metadata.json``, read as kernels-data reads it, and the
  requirements its ``python-depends`` and ``kernel-depends`` stand for; ``build_provenance``:
  its ``provenance`` (builder, commits, dirty trees); ``digest``: the sha256 or sha512
  digests it records;
- ``arrival``: a file still being downloaded, readable while it arrives.

Nothing here knows about wheels, sources or the network: this wing imports only
``errors`` and ``data``.
"""

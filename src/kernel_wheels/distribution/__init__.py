"""A compatibility entry point, and nothing else.

Variant wheels written by kernel-wheels name their ``torch_backend`` provider as
``kernel_wheels.distribution.variant_provider:TorchBackendPlugin`` (the ``plugin-api`` of
their ``variant.json``, docs/variants.md). Published wheels keep that name for good, so
the module stays importable here; the code lives in :mod:`kernel_wheels.install`.
What used to be in this package is now in four: ``index`` (the Simple API format),
``site`` (the static index site), ``remote`` (index servers over HTTP) and ``install``.
"""

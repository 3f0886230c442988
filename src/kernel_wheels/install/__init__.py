"""Installing: the one kernel wheel that fits a Python environment, without touching torch.

- ``environment``: the facts of a Python environment (torch, CUDA, C++ ABI, tags) and its
  target key, read by a probe in the target interpreter;
- ``core``: choosing the wheel (pure) and installing it with pip or uv;
- ``installed``: the kernel wheels a Python has, and ``LOCAL_KERNELS`` for ``kernels``;
- ``variant_provider``: the ``torch_backend`` provider for variant-aware installers.
"""

"""kernel-builder source trees -> Hub-layout variants (``kernel-wheels build``).

- :mod:`.pipeline` is the build itself, read top to bottom (:func:`~.pipeline.build`);
- :mod:`.config` reads ``build.toml`` (every key checked against ``data/build_toml.json``);
- :mod:`.source_checks` checks the package layout and Python op registrations;
- :mod:`.toolchain` finds torch, apache-tvm-ffi, the C++ compiler and the CUDA toolkit;
- :mod:`.cross` provides a cross compiler and torch's wheel for ``--target-arch``;
- :mod:`.cuda_archs` decides each CUDA component's capabilities;
- :mod:`.depends` provides C++ dependencies such as CUTLASS (:mod:`.source_archive`
  downloads and checks tagged source archives);
- :mod:`.compile_env` writes the compiler command lines;
- :mod:`.scheduler` runs them in parallel, with :mod:`.object_cache` for unchanged files;
- :mod:`.symbol_versions` and :mod:`.extension_check` keep the linked extension within manylinux_2_28;
- :mod:`.variant` writes the variant folder; :mod:`.cache_paths` owns the work folder.
"""

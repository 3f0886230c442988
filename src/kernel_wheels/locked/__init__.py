"""Conversions driven by what a project locked with the ``kernels`` library.

- ``lockfile``: a ``kernels.lock`` (every format ``kernels lock`` has written: the
  variant hashes of 0.x, the dependency records of 0.17) and the
  ``[tool.kernels.dependencies]`` of the ``pyproject.toml`` beside it, read into checked
  values; a dependency that is not locked is refused;
- ``pipeline``: every locked kernel converted at its locked commit, each variant's
  listing checked against the lock's hash before anything is downloaded or written, all
  wheels placed at once or none (:func:`~.pipeline.convert_locked`).

It sits beside ``serve``, above ``convert`` (it runs ``to_wheels`` once per kernel) and
``sources`` (the Hub source checks each listing against the lock as it downloads).
"""

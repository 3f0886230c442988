"""The kernel-wheels performance benchmark (issue #10): workloads, baselines, measurements.

Entry point: ``python -m benchmarks.run``, from the project's root. Every module here is
importable on its own; the ones that run as worker processes (``limit_pass``,
``download``) also have a ``main``.
"""

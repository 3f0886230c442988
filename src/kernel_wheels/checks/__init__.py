"""Prove that a wheel is what its name and records claim: one verdict
(:func:`~.verdict.judge_wheel`), asked by every command that trusts a wheel.

The verdict is :mod:`.verdict`; each rule is a module of its own (``contents``,
``members``, ``names``, ``digests``, ``contract``, ``signature``, ``sbom``, ``variants``,
``binaries`` with ``linkage``, ``manylinux``, ``abi3`` and ``foreign``, ``gpu``).
Nothing here raises for a bad wheel: a :class:`CheckReport` says what holds.
"""

from __future__ import annotations

from .report import CheckReport, Finding, Status
from .verdict import Target, judge_wheel, judge_wheels, judge_written

__all__ = ["CheckReport", "Finding", "Status", "Target", "judge_wheel", "judge_wheels", "judge_written"]

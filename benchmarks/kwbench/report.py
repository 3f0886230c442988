"""Rows, targets, the printed table and the JSON record."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Unit = Literal["s", "MB", "req/s", "s/variant", "s/wheel"]


@dataclass(frozen=True)
class Target:
    """``ratio <= limit`` (ours / baseline) or ``value < limit`` (ours alone)."""

    kind: Literal["ratio_max", "value_below", "value_min"]
    limit: float

    def describe(self, unit: str) -> str:
        if self.kind == "ratio_max":
            return f"<= {self.limit:g}x"
        if self.kind == "value_min":
            return f">= {self.limit:g} {unit}"
        return f"< {self.limit:g} {unit}"

    def met(self, ours: float | None, ratio: float | None) -> bool | None:
        if self.kind == "ratio_max":
            return None if ratio is None else ratio <= self.limit
        if ours is None:
            return None
        return ours >= self.limit if self.kind == "value_min" else ours < self.limit


@dataclass
class Row:
    key: str  # short id, e.g. "to-wheel/4"
    title: str  # what the table shows in its first column
    measures: str  # one sentence: what exactly "ours" and "baseline" are
    unit: Unit
    ours: float | None = None
    baseline: float | None = None
    target: Target | None = None
    note: str = ""  # extra figures, or why the row has no value
    samples: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.baseline:
            return None
        return self.ours / self.baseline

    @property
    def result(self) -> str:
        if self.error:
            return "ERROR"
        if self.target is None:
            return "info"  # a reference figure: the issue sets no target for it
        met = self.target.met(self.ours, self.ratio)
        return "n/a" if met is None else ("pass" if met else "FAIL")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ratio=self.ratio, result=self.result,
                    target=self.target.describe(self.unit) if self.target else None)
        return data


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "MB":
        return f"{value:,.0f} MB" if value >= 100 else f"{value:.1f} MB"
    if unit == "req/s":
        return f"{value:,.0f} req/s"
    if unit == "s/variant":
        return f"{value:.3f} s/var"
    if unit == "s/wheel":
        return f"{value * 1000:.2f} ms/wheel"
    return f"{value:.3f} s" if value < 1 else f"{value:.2f} s"


def table(rows: list[Row]) -> str:
    header = ("row", "ours (median)", "baseline (median)", "ratio", "target", "result")
    lines = [header]
    for row in rows:
        ours = _value(row.ours, row.unit) if not row.error else "error"
        if row.ours is None and row.note.startswith("n/a") and not row.error:
            ours = row.note
        lines.append((row.title, ours, _value(row.baseline, row.unit),
                      f"{row.ratio:.2f}x" if row.ratio is not None else "-",
                      row.target.describe(row.unit) if row.target else "-", row.result))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        out.append(" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def legend(rows: list[Row]) -> str:
    """What each row measures, and its notes (extra figures, errors)."""
    out = []
    for row in rows:
        out.append(f"- {row.title}: {row.measures}")
        if row.note and not (row.ours is None and row.note.startswith("n/a")):
            out.append(f"    {row.note}")
        if row.error:
            out.append(f"    error: {row.error.splitlines()[0] if row.error else ''}")
    return "\n".join(out)


def write_json(path: Path, rows: list[Row], context: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**context, "rows": [r.to_dict() for r in rows]}, indent=2) + "\n")

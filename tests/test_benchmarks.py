"""The benchmark suite runs to the end (issue #42): ``python -m benchmarks.run --quick``,
the command docs/benchmarks.md gives, in a work folder of its own (``KWBENCH_WORK``: it
builds its kernels, the peers' venvs and the Hub from nothing, as on a fresh clone). It
must exit 0 and print every row of every group with a figure, each peer row beside its
peer's figure from the same run. No speed is asserted: a row may say FAIL (quick sizes
say little, and this machine is shared); only ERROR, a missing row or a missing figure
fails the test.

Slow (every row group at small sizes: kernels compiled, the old tool and simple503
installed, olah, a venv with torch): minutes, hence its own timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import ROOT

#: Every row key the quick run must print, by group (a key ending in "/" is a prefix:
#: the to-wheel rows are per variant count).
EXPECTED = {
    "to-wheel": ("to-wheel/", "size/", "limit/", "scaling"),
    "cold": ("cold/4", "cold/snapshot/4"),
    "rss": ("rss/20", "rss/200", "rss/growth"),
    "check": ("check/sample", "check/cuda", "check/library"),
    "index": ("index/vs-simple503/100", "index/vs-simple503/500", "index/linear", "index/scratch",
              "index/add-one"),
    "install": ("install/pip", "install/uv", "install/uv-plain"),
    "serve": ("serve/uncached", "serve/cached", "serve/index"),
    "mirror": ("mirror/",),
}
#: Rows measured against a peer in the same run: their baseline figure must be there.
WITH_PEER = ("to-wheel/", "limit/", "cold/", "check/", "index/vs-simple503/", "install/")


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_quick_mode_runs_every_row(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    env = {**os.environ, "KWBENCH_WORK": str(tmp_path / "work")}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--output", str(results)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    document = json.loads(results.read_text())
    rows = {row["key"]: row for row in document["rows"]}
    for group, keys in EXPECTED.items():
        for key in keys:
            found = [k for k in rows if k == key or (key.endswith("/") and k.startswith(key))]
            assert found, f"[{group}] no row {key} in {sorted(rows)}"
    table = proc.stdout.split("\n\n")[0]
    for key, row in rows.items():
        assert row["result"] != "ERROR", f"{key}: {row['error']}"
        assert row["ours"] is not None, f"{key}: no figure ({row['note']})"
        assert row["title"] in table, f"{key}: not printed"
        if key.startswith(WITH_PEER):
            assert row["baseline"] is not None and row["samples"].get("baseline"), \
                f"{key}: no peer figure from the same run"
            assert len(row["samples"]["ours"]) == len(row["samples"]["baseline"]) == document["sizes"]["runs"]
    assert document["kernel_wheels_git"]["commit"], document["kernel_wheels_git"]
    assert "results: " + str(results) in proc.stdout

"""``kernel_wheels/data/stable_abi.json``, the stable-ABI symbols ``check`` reads (the
limited-API version each was added in), is abi3info's database as this environment has
it: the table spares every check of an abi3 wheel the import of abi3info's 970 models
(issue #42), and must never say anything abi3info does not. A symbol missing from the
table is looked up in abi3info itself (tested here too).

Regenerate after upgrading abi3info: ``python tests/test_stable_abi_table.py``.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

from kernel_wheels.checks.abi3 import abi3info_added, added_in, python_tag_version

TABLE = Path(__file__).resolve().parents[1] / "src" / "kernel_wheels" / "data" / "stable_abi.json"


def expected_table() -> dict[str, Any]:
    from abi3info import DATAS, FUNCTIONS

    added: dict[str, list[str]] = {}
    for symbol, member in [*FUNCTIONS.items(), *DATAS.items()]:
        added.setdefault(str(member.added), []).append(symbol.name)
    ordered = sorted(added, key=lambda v: tuple(int(p) for p in v.split(".")))
    return {"source": f"abi3info {importlib.metadata.version('abi3info')}",
            "added": {version: sorted(added[version]) for version in ordered}}


def test_the_table_is_abi3infos_database() -> None:
    shipped = json.loads(TABLE.read_text("utf-8"))
    expected = expected_table()
    assert shipped["added"] == expected["added"], \
        f"{TABLE} differs from {expected['source']}: run python {__file__}"


def test_every_symbol_reads_as_abi3info_says() -> None:
    from abi3info import DATAS, FUNCTIONS

    for symbol, member in [*FUNCTIONS.items(), *DATAS.items()]:
        assert added_in(symbol.name) == (member.added.major, member.added.minor), symbol.name
    assert added_in("PyNotInTheStableAbi") is None
    # what the table does not know is asked of abi3info itself
    assert abi3info_added("PyType_FromSpec") == (3, 2)
    assert abi3info_added("PyNotInTheStableAbi") is None


def test_python_tags_read_as_abi3info_reads_them() -> None:
    from abi3info.models import PyVersion

    for tag in ("cp32", "cp39", "cp310", "cp313"):
        parsed = PyVersion.parse_python_tag(tag)
        assert python_tag_version(tag) == (parsed.major, parsed.minor)


if __name__ == "__main__":
    TABLE.write_text(json.dumps(expected_table(), indent=0) + "\n", "utf-8")
    print(f"wrote {TABLE}")

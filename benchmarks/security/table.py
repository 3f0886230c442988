"""Write the case table of docs/security.md from a JUnit report of the security tests.

Every row is one test of the suite (a parametrised test gives one row per case), so the
table cannot claim a defence that no test exercises, and its result column is what the
run said. Reproduce:

    python -m pytest tests/test_security_hub.py tests/test_security_hub_fuzz.py \
        tests/test_confine.py tests/test_serve_abuse.py tests/test_index_hostile.py \
        tests/test_index_recovery.py tests/test_elf_hostile.py tests/test_kernels_ecosystem.py \
        tests/test_build_hostile.py tests/test_mirror_hostile.py tests/test_install_hostile.py \
        tests/test_remote_hostile.py tests/test_hostile_inputs.py tests/test_provenance.py \
        tests/test_verdict.py --junitxml=security.xml
    python -m benchmarks.security.table security.xml docs/security.md
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

BEGIN = "<!-- security-table: begin (benchmarks/security/table.py writes this part) -->"
END = "<!-- security-table: end -->"

# Who attacks, by test file; the first matching (file, words in the test's name) wins.
ATTACKERS: list[tuple[str, tuple[str, ...], str]] = [
    ("test_security_hub.py", ("build_folder", "variant_folder", "git_build_link", "symbolic_link_loop",
                              "init_py", "kernel_name", "newline_in_python_depends"),
     "hostile kernel repository"),
    ("test_security_hub.py", ("git_url_credentials",), "local user reading process lists"),
    ("test_security_hub.py", ("offline_refs",), "local user who can write the HF cache"),
    ("test_security_hub.py", ("git_repository",), "hostile kernel repository"),
    ("test_security_hub.py", (), "hostile Hub or mirror"),
    ("test_security_hub_fuzz.py", (), "hostile Hub or mirror (generated answers)"),
    ("test_confine.py", (), "any remote or source name (the one gate)"),
    ("test_serve_abuse.py", ("planted_in_the_cache",), "local user who can write serve's cache"),
    ("test_serve_abuse.py", ("idle", "half_sent", "byte_at_a_time", "keep_alive",
                             "hostile_paths_from_clients"),
     "network client of serve"),
    ("test_serve_abuse.py", ("password", "unknown_user", "credentials", "failure_counters", "user_removed",
                             "healthz_names_kernels_only"), "network client of serve (credentials)"),
    ("test_serve_abuse.py", (), "hostile Hub behind serve"),
    ("test_index_hostile.py", ("argv",), "local user reading process lists"),
    ("test_index_hostile.py", (), "hostile index server"),
    ("test_index_recovery.py", ("control_character", "linked_outside"), "hostile wheel names / local user"),
    ("test_index_recovery.py", (), "kill -9 at any point of index"),
    ("test_elf_hostile.py", (), "hostile kernel binary"),
    ("test_kernels_ecosystem.py", ("lock",), "Hub that disagrees with a lock file"),
    ("test_build_hostile.py", (), "hostile kernel source tree (build)"),
    ("test_mirror_hostile.py", ("org",), "hostile Hub organisation listing"),
    ("test_mirror_hostile.py", (), "second repository of one project / tampered mirror records"),
    ("test_install_hostile.py", ("local_kernels",), "installed distribution claiming a kernel"),
    ("test_install_hostile.py", ("lock",), "lock naming one repository twice"),
    ("test_install_hostile.py", (), "hostile wheel on an index (install)"),
    ("test_remote_hostile.py", ("publish", "password", "server_text"), "index server echoing credentials"),
    ("test_remote_hostile.py", ("s3", "store", "mirror_object", "prefix"), "hostile or stalled S3 store"),
    ("test_remote_hostile.py", ("yank",), "yank reasons with terminal controls"),
    ("test_remote_hostile.py", (), "network client of serve"),
    ("test_hostile_inputs.py", ("canary", "guard", "compiler"), "suite guards (secrets, writes outside)"),
    ("test_hostile_inputs.py", (), "any outside data (property-based harness)"),
    ("test_provenance.py", (), "unsigned, tampered or foreign-signed kernel"),
    ("test_verdict.py", ("name",), "wheel taking another package's name"),
    ("test_verdict.py", (), "forger of a signed kernel's wheel (index, mirror, a copy)"),
]


def attacker(file: str, test: str) -> str | None:
    for name, words, who in ATTACKERS:
        if file == name and (not words or any(word in test for word in words)):
            return who
    return None


def rows(report: Path) -> list[tuple[str, str, str, str]]:
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):
        file = case.get("classname", "").rsplit(".", 1)[-1] + ".py"
        name = case.get("name", "")
        test, _, param = name.partition("[")
        who = attacker(file, test)
        if who is None:
            continue
        if case.find("skipped") is not None:
            result = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            result = "FAILED"
        else:
            result = "passed"
        expected = test.removeprefix("test_").replace("_", " ")
        found.append((who, param.rstrip("]") or "—", f"{expected} (`{file}::{test}`)", result))
    return found


def table(found: list[tuple[str, str, str, str]]) -> str:
    lines = ["| # | attacker | case | expected (the test) | result |", "|---|---|---|---|---|"]
    for number, (who, case, expected, result) in enumerate(found, 1):
        case = re.sub(r"\|", "\\|", case)
        lines.append(f"| {number} | {who} | `{case}` | {expected} | {result} |")
    return "\n".join(lines)


def main(report: str, document: str) -> int:
    found = rows(Path(report))
    passed = sum(1 for row in found if row[3] == "passed")
    text = Path(document).read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    summary = f"{len(found)} cases, {passed} passed in the run that wrote this table."
    Path(document).write_text(f"{text[:start]}\n{summary}\n\n{table(found)}\n\n{text[end:]}")
    print(summary)
    return 0 if passed == len(found) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

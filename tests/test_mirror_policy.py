"""`kernel-wheels mirror` under a provenance policy applies it to what the destination
already publishes (docs/mirror.md, *A policy over what is there*): a run that states a
policy judges each published wheel of its part with the one verdict, reports each one the
policy refuses (``refused``, exit 1) and, with ``--remove-refused``, removes it with its
pages in the finish (``removed``). Real components: the mirror command, a Hub of our own
(tests/support/serve_hub.py), a folder and an S3 bucket (moto's server), signatures of the
test Sigstore deployment."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_mirror import check_pages, new_bucket
from test_serve_policy import kernel_files

from support.helpers import run_cli
from support.mirror_hub import S3Server, folder_snapshot, s3_server
from support.serve_hub import HubRepo, commit_of, hostile_hub

REPOS = ("acme/plaink", "acme/signedk")
VERDICTS = ".kernel-wheels/mirror/verdicts/"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def mirror(env: dict[str, str], to: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("mirror", *REPOS, "--to", to, "--json", "--retries", "0", *args, env=env, check=False)


def rows(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    return [(r["status"], r["repo"], r["detail"]) for r in json.loads(proc.stdout)["items"]]


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_policy_reports_then_removes_what_the_destination_already_publishes(
        tmp_path: Path, s3: S3Server, where: str) -> None:
    """A destination filled without a policy holds an unsigned wheel. A run under
    --require-signature reports it refused (naming the wheel and the reason, exit 1) and
    changes nothing that is published; with --remove-refused its wheel, metadata and pages
    go, the signed kernel's stay, every page lists only files that are there; the next
    run refuses to convert it again."""
    keys = tmp_path / "deployment"
    keys.mkdir()
    files = {"acme/plaink": kernel_files("plaink"), "acme/signedk": kernel_files("signedk", keys)}
    strict = ("--require-signature", "--trusted-root", keys / "root.json")
    bucket = new_bucket(s3) if where == "s3" else ""
    to = f"s3://{bucket}/k" if where == "s3" else str(tmp_path / "site")

    def snapshot() -> dict[str, bytes]:
        return s3.snapshot(bucket, "k") if where == "s3" else folder_snapshot(tmp_path / "site")

    with hostile_hub(**{repo: HubRepo({"v1.0.0": commit_of(repo)}, found)
                        for repo, found in files.items()}) as hub:
        env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
               "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1",
               **s3.env()}
        loose = mirror(env, to, "--trusted-root", keys / "root.json")  # no signature required
        assert loose.returncode == 0, loose.stderr
        assert [status for status, _, _ in rows(loose)] == ["added", "added"]
        before = snapshot()

        reported = mirror(env, to, *strict)
        assert reported.returncode == 1, reported.stderr
        ((status, repo, detail),) = rows(reported)
        assert (status, repo) == ("refused", "acme/plaink")
        assert detail.startswith("plaink-1.0.0-py3-none-any.whl is published, but the policy refuses "
                                 "it: [provenance] acme/plaink build/torch-universal: unsigned (no "
                                 "metadata.json.sigstore) and the policy requires a signature"), detail
        assert detail.endswith("(--remove-refused removes it)")
        assert json.loads(reported.stdout)["counts"]["skipped"] == 2
        after = snapshot()
        assert {k: v for k, v in after.items() if not k.startswith(VERDICTS)} == \
            {k: v for k, v in before.items() if not k.startswith(VERDICTS)}
        # Each verdict is kept, by the policy and the wheel's sha256: one .pass, one .refused.
        new = sorted(set(after) - set(before))
        assert all(k.startswith(VERDICTS) for k in new), new
        assert sorted(k.rsplit(".", 1)[1] for k in new) == ["pass", "refused"]
        assert rows(mirror(env, to, *strict)) == rows(reported)  # from the kept verdicts

        removed = mirror(env, to, *strict, "--remove-refused")
        assert removed.returncode == 0, removed.stderr
        assert [(s, r) for s, r, _ in rows(removed)] == [("removed", "acme/plaink")]
        objects = snapshot()
        assert not [k for k in objects if "plaink" in k and not k.startswith(".kernel-wheels/")]
        assert "files/signedk-1.0.0-py3-none-any.whl" in objects
        assert [p["name"] for p in json.loads(objects["simple/index.json"])["projects"]] == ["signedk"]
        assert check_pages(objects) >= 1
        state = json.loads(objects[".kernel-wheels/mirror/state/acme/plaink.json"])
        assert state["records"] == [] and state["garbage"] == []

        again = mirror(env, to, *strict)
        assert again.returncode == 1
        ((status, repo, detail),) = rows(again)
        assert (status, repo) == ("refused", "acme/plaink") and "the policy requires a signature" in detail
        assert {k for k in snapshot() if not k.startswith(".kernel-wheels/")} == \
            {k for k in objects if not k.startswith(".kernel-wheels/")}


def test_remove_refused_is_refused_for_an_index_server(tmp_path: Path) -> None:
    """An index server's upload API cannot remove a file: one line, exit 2, before anything
    is listed."""
    proc = run_cli("mirror", "acme/k", "--to", "https://pypi.invalid/", "--state", tmp_path / "state",
                   "--remove-refused", "--require-signature", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("--remove-refused: an index server's upload API cannot remove or "
                                        "replace a file; mirror into a folder or bucket for that")

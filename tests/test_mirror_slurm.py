"""Issue #41: the mirror's shards on a real batch engine, and ``--shard auto``.

A one-node Slurm cluster of the test's own (support/slurm.py: slurmctld, slurmd and
munged on 127.0.0.1) runs the documented job script, ``scripts/deploy/mirror.sbatch``, as
``sbatch --array=...`` against the olah Hub and moto's S3 server on loopback (and a
folder); the destination must equal one unsharded run's byte for byte, also when a task
is killed and requeued, and when two arrays run over one destination at once. The
tasks' secrets come from files (never through Slurm): canaries planted in the submitting
shell and in those files must show in no child's argv (support/audited.py watches every
kernel-wheels of the array), no log and nothing Slurm keeps.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_mirror import check_pages

from kernel_wheels.errors import UsageError
from kernel_wheels.mirror.plan import Shard
from support.helpers import AUDITED, CANARIES, ROOT, one_line_error, run_cli
from support.mirror_hub import KERNELS, S3Server, folder_snapshot, mirror_hub, s3_server
from support.serve_hub import HubRepo, commit_of, hostile_hub, universal_files
from support.slurm import SlurmCluster, Task, slurm_cluster, why_not

SCRIPT = ROOT / "scripts" / "deploy" / "mirror.sbatch"
MANIFEST = ROOT / "scripts" / "deploy" / "mirror-job.yaml"
DOC = ROOT / "docs" / "mirror.md"
REPOS = sorted(KERNELS)
ITEMS = sum(len(variants) for releases in KERNELS.values() for _, variants in releases)

#: The mirror's own credential variables, set in the shell that submits the array: the
#: script's --export line must leave them behind (Slurm keeps a job's environment in its
#: state folder), and the tasks must not use them.
SHELL_CREDENTIALS = {"HF_TOKEN": "hf_kwcanary-shell-hf-token-7d1e",
                     "HUGGING_FACE_HUB_TOKEN": "hf_kwcanary-shell-hub-token-7d1e",
                     "AWS_ACCESS_KEY_ID": "kwcanary-shell-access-key-7d1e",
                     "AWS_SECRET_ACCESS_KEY": "kwcanary-shell-secret-key-7d1e",
                     "AWS_SESSION_TOKEN": "kwcanary-shell-session-token-7d1e"}
#: The secrets the tasks are meant to use, in files of mode 0600.
FILE_HF_TOKEN = "hf_kwcanary-file-hf-token-0b52"
FILE_AWS_SECRET = "kwcanary-file-secret-key-0b52"
#: Never in Slurm's keeping.
KEPT_OUT = sorted({*SHELL_CREDENTIALS.values(), FILE_HF_TOKEN, FILE_AWS_SECRET})
#: Never in an argv or a log: those, and the suite's other canaries (GITHUB_TOKEN, ...),
#: which the submitting shell also holds.
EVERY_SECRET = sorted({*KEPT_OUT, *CANARIES.values()})


# -- the engine and the loopback services ----------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = why_not()
    if reason:
        pytest.skip(f"no Slurm cluster: {reason}")
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as started:
        yield started


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mirror_hub(tmp_path_factory.mktemp("mirror-hub")) as (endpoint, _repos):
        yield endpoint


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="module")
def one_run(hub: str, s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """What one unsharded run writes into a folder (test_mirror.py shows a bucket gets
    the same bytes)."""
    folder = tmp_path_factory.mktemp("one-run")
    env = {"HF_ENDPOINT": hub, "HF_HOME": str(folder / "hf-home"), "KERNEL_WHEELS_CACHE": str(folder / "kw-cache"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", **s3.env()}
    run_cli("mirror", *REPOS, "--to", folder / "site", env=env)
    return folder_snapshot(folder / "site")


_buckets = iter(range(1_000_000))


def new_bucket(s3: S3Server) -> str:
    return s3.bucket(f"slurm-{os.getpid()}-{next(_buckets)}")


@dataclass
class Submitter:
    """A user's side of the cluster: a working folder (the jobs' logs go there), the
    secret files, and a shell whose ``kernel-wheels`` is the tool under the suite's argv
    audit."""

    cluster: SlurmCluster
    folder: Path
    hub: str
    s3: S3Server

    def __post_init__(self) -> None:
        secrets = self.folder / "secrets"
        secrets.mkdir(mode=0o700)
        (secrets / "hf-token").write_text(FILE_HF_TOKEN + "\n")
        (secrets / "aws-credentials").write_text(
            f"[default]\naws_access_key_id = testing\naws_secret_access_key = {FILE_AWS_SECRET}\n")
        for path in secrets.iterdir():
            path.chmod(0o600)
        self.secrets = secrets
        self.audit_log = self.folder / "audit.log"
        self.audit_log.touch()
        self.bin = self.folder / "bin"
        self.bin.mkdir()
        for name in ("home", "tmp", "hf-home", "kw-cache"):
            (self.folder / name).mkdir()
        self.install_tool()

    def install_tool(self, kill_task: int | None = None, after_writes: int = 0) -> None:
        """The array's ``kernel-wheels``: the tool through support/audited.py (a line in
        the audit log for any secret in a child's argv). With ``kill_task``, that task's
        first attempt SIGKILLs itself with its ``after_writes``-th write (the mirror's test
        hook), as an out-of-memory kill or a lost node would end it."""
        (self.folder / "audit-secrets.json").write_text(json.dumps(EVERY_SECRET))
        kill = "" if kill_task is None else (
            f'if [ "${{SLURM_ARRAY_TASK_ID:-}}" = {kill_task} ] && [ "${{SLURM_RESTART_COUNT:-0}}" = 0 ]; then\n'
            f"  export KERNEL_WHEELS_MIRROR_KILL_AFTER_WRITES={after_writes}\nfi\n")
        shim = self.bin / "kernel-wheels"
        shim.write_text(f"#!/bin/sh\n# kernel-wheels under the test suite's argv audit\n{kill}"
                        f"export KW_AUDIT_LOG={self.audit_log}\n"
                        f'KW_AUDIT_SECRETS=$(cat {self.folder / "audit-secrets.json"}); export KW_AUDIT_SECRETS\n'
                        f'exec {sys.executable} {AUDITED} "$@"\n')
        shim.chmod(0o755)

    @property
    def env(self) -> dict[str, str]:
        """The submitting shell: where the Hub and the store are, and secrets that the job
        must not take along. HOME is empty: the AWS credentials can come only from the
        file the script names."""
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}", "HOME": str(self.folder / "home"),
                "TMPDIR": str(self.folder / "tmp"), "HF_ENDPOINT": self.hub,
                "HF_HOME": str(self.folder / "hf-home"), "KERNEL_WHEELS_CACHE": str(self.folder / "kw-cache"),
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "AWS_ENDPOINT_URL": self.s3.endpoint,
                "AWS_DEFAULT_REGION": "us-east-1", "KERNEL_MIRROR_SECRETS": str(self.secrets),
                **CANARIES, **SHELL_CREDENTIALS}

    def sbatch(self, *args: str | Path) -> str:
        """``sbatch ARGS... scripts/deploy/mirror.sbatch`` as docs/mirror.md says, from the
        working folder."""
        assert not any(secret in str(arg) for arg in args for secret in EVERY_SECRET)
        return self.cluster.sbatch(*args, env=self.env, cwd=self.folder)

    def log(self, job: str, task: int) -> str:
        return (self.folder / f"kernel-mirror-{job}_{task}.log").read_text()

    def check_secrets(self) -> None:
        """No secret in any argv the audit saw or in any log (the tasks', the daemons'),
        and none of the mirror's credentials in anything Slurm keeps (its state folder:
        each job's script, arguments and environment; the node's spool)."""
        assert self.audit_log.read_text() == "", self.audit_log.read_text()
        logs = [*self.folder.glob("kernel-mirror-*.log"), *self.cluster.log.rglob("*")]
        kept = [*(self.cluster.root / "state").rglob("*"), *(self.cluster.root / "spool").rglob("*")]
        for paths, secrets in ((logs, EVERY_SECRET), (kept, KEPT_OUT)):
            for path in paths:
                if path.is_file():
                    data = path.read_bytes()
                    shown = [s for s in secrets if s.encode() in data]
                    assert not shown, f"{path} holds {shown}"
        assert logs and kept
        # The tasks' HOME holds nothing: the tool writes only where it is told to.
        assert not any((self.folder / "home").iterdir())


@pytest.fixture
def submitter(cluster: SlurmCluster, hub: str, s3: S3Server, tmp_path: Path) -> Submitter:
    folder = tmp_path / "user"
    folder.mkdir()
    return Submitter(cluster, folder, hub, s3)


def succeeded(tasks: dict[int, Task]) -> bool:
    return all(t.state == "COMPLETED" for t in tasks.values())


def shards_of(submitter: Submitter, job: str, tasks: dict[int, Task]) -> dict[int, str]:
    """task id -> the shard its log says --shard auto chose."""
    found = {}
    for task in tasks:
        match = re.search(r"^shard (\d+/\d+) from Slurm array task (\d+) of", submitter.log(job, task), re.M)
        assert match and int(match[2]) == task, submitter.log(job, task)
        found[task] = match[1]
    return found


def test_the_cluster_listens_on_loopback_only(cluster: SlurmCluster) -> None:
    assert cluster.listening() == {"munged": [],  # a Unix socket only
                                   "slurmctld": [f"127.0.0.1:{cluster.ports['slurmctld']}"],
                                   "slurmd": [f"127.0.0.1:{cluster.ports['slurmd']}"]}


# -- the array's destination is one run's ------------------------------------------------

def test_an_array_writes_the_bytes_of_one_run_into_a_bucket_and_a_folder(
        submitter: Submitter, s3: S3Server, one_run: dict[str, bytes]) -> None:
    bucket = new_bucket(s3)
    site = submitter.folder / "site"
    # 0-3 (SLURM_ARRAY_TASK_MIN 0) into the bucket, 1-4 (MIN 1) into the folder, at once.
    into_bucket = submitter.sbatch("--array=0-3", SCRIPT, *REPOS, "--to", f"s3://{bucket}/k", "--json")
    into_folder = submitter.sbatch("--array=1-4", SCRIPT, *REPOS, "--to", site, "--json")
    for job, ids in ((into_bucket, range(4)), (into_folder, range(1, 5))):
        tasks = submitter.cluster.wait_final(job, 4)
        assert sorted(tasks) == list(ids)
        assert succeeded(tasks), {t: (v.state, submitter.log(job, t)[-2000:]) for t, v in tasks.items()}
        # Each task took another part: --shard auto read Slurm's variables.
        assert sorted(shards_of(submitter, job, tasks).values()) == ["0/4", "1/4", "2/4", "3/4"]
        added = [json.loads(submitter.log(job, t)[submitter.log(job, t).index("{"):])["counts"]["added"]
                 for t in tasks]
        assert sum(added) == ITEMS and sum(a > 0 for a in added) >= 3, added
    assert s3.snapshot(bucket, "k") == one_run
    assert folder_snapshot(site) == one_run
    submitter.check_secrets()


def test_a_task_killed_and_requeued_leaves_the_bytes_of_one_run(
        submitter: Submitter, s3: S3Server, one_run: dict[str, bytes]) -> None:
    bucket = new_bucket(s3)
    submitter.install_tool(kill_task=1, after_writes=4)  # task 1's first attempt dies with its 4th write
    job = submitter.sbatch("--array=0-3", SCRIPT, *REPOS, "--to", f"s3://{bucket}/k")
    tasks = submitter.cluster.wait_final(job, 4)
    assert [tasks[t].state for t in range(4)] == ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED"], tasks
    killed = s3.snapshot(bucket, "k")
    assert killed != one_run  # task 1's part is missing (or half there)
    assert check_pages(killed) > 0  # ... and no page names a missing or partial object
    # Re-run it as docs/mirror.md says: requeue the task, and start it now (a requeued task
    # waits out Slurm's credential lifetime, about two minutes, before it starts again).
    submitter.cluster.command("scontrol", "requeue", f"{job}_1")
    submitter.cluster.wait(job, lambda t: t[1].state not in ("COMPLETED", "FAILED"), "task 1 to be requeued")
    submitter.cluster.command("scontrol", "update", f"JobId={job}_1", "StartTime=now")
    tasks = submitter.cluster.wait_final(job, 4)
    assert succeeded(tasks), submitter.log(job, 1)[-3000:]
    assert submitter.cluster.restarts(job, 1) == 1
    log = submitter.log(job, 1)  # --open-mode=append: both attempts' lines
    assert "array task 1 (restart 0)" in log and "array task 1 (restart 1)" in log, log
    assert s3.snapshot(bucket, "k") == one_run
    submitter.check_secrets()


def test_two_arrays_over_one_bucket_at_once_leave_the_bytes_of_one_run(
        submitter: Submitter, s3: S3Server, one_run: dict[str, bytes]) -> None:
    bucket = new_bucket(s3)
    # Held, then released together: both arrays' 8 tasks start in one scheduling pass
    # (the node has the CPUs for all of them).
    first = submitter.sbatch("--hold", "--array=0-3", SCRIPT, *REPOS, "--to", f"s3://{bucket}/k")
    second = submitter.sbatch("--hold", "--array=0-3", SCRIPT, *REPOS, "--to", f"s3://{bucket}/k")
    submitter.cluster.command("scontrol", "release", f"{first},{second}")
    done = {job: submitter.cluster.wait_final(job, 4) for job in (first, second)}
    for job, tasks in done.items():
        assert succeeded(tasks), {t: submitter.log(job, t)[-2000:] for t in tasks}
    # They did overlap: the second array started before the first one ended.
    assert min(t.start for t in done[second].values()) <= max(t.end for t in done[first].values())
    assert s3.snapshot(bucket, "k") == one_run
    submitter.check_secrets()


def test_the_tasks_get_their_secrets_from_the_files_only(submitter: Submitter, tmp_path: Path) -> None:
    """The Hub token reaches the Hub from every task, read from the file the script
    names: never the submitting shell's, which Slurm does not keep."""
    repo = HubRepo({"v1.0.0": commit_of("one"), "v1.1.0": commit_of("two")}, universal_files(2))
    with hostile_hub(**{"secret-org/kernel": repo}) as hub:
        submitter.hub = hub.endpoint
        job = submitter.sbatch("--array=0-1", SCRIPT, "secret-org/kernel", "--to", tmp_path / "site")
        tasks = submitter.cluster.wait_final(job, 2)
        assert succeeded(tasks), {t: submitter.log(job, t)[-2000:] for t in tasks}
        assert sorted(shards_of(submitter, job, tasks).values()) == ["0/2", "1/2"]
        # Every request for the repository (refs, trees, files) carries the file's token;
        # nothing carries another (huggingface_hub's own anonymous requests carry none).
        of_repo = [a for r, a in zip(hub.requests, hub.authorizations, strict=True) if "secret-org/kernel" in r]
        assert of_repo and set(of_repo) == {f"Bearer {FILE_HF_TOKEN}"}
        assert set(hub.authorizations) - {None} == {f"Bearer {FILE_HF_TOKEN}"}
    assert sorted(p.name for p in (tmp_path / "site" / "files").glob("*.whl")) == \
        ["kernel-1.0.0-py3-none-any.whl", "kernel-1.1.0-py3-none-any.whl"]
    # A secret file others can read stops the task before the tool starts.
    (submitter.secrets / "hf-token").chmod(0o644)
    job = submitter.sbatch("--array=0-0", SCRIPT, "secret-org/kernel", "--to", tmp_path / "other")
    assert submitter.cluster.wait_final(job, 1)[0].state == "FAILED"
    assert f"kernel-mirror: {submitter.secrets / 'hf-token'} is open to other users: chmod 600" \
        in submitter.log(job, 0)
    assert not (tmp_path / "other").exists()
    submitter.check_secrets()


# -- --shard auto --------------------------------------------------------------------------

def _slurm(task: int, low: int, high: int, step: int = 1, count: int | None = None) -> dict[str, str]:
    count = (high - low) // step + 1 if count is None else count
    return {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": str(low), "SLURM_ARRAY_TASK_MAX": str(high),
            "SLURM_ARRAY_TASK_STEP": str(step), "SLURM_ARRAY_TASK_COUNT": str(count),
            "SLURM_ARRAY_JOB_ID": "41", "SLURM_JOB_ID": "42"}


@pytest.mark.parametrize(("environ", "shard"), [
    (_slurm(0, 0, 3), (0, 4)), (_slurm(3, 0, 3), (3, 4)),
    (_slurm(1, 1, 4), (0, 4)), (_slurm(4, 1, 4), (3, 4)),          # --array=1-4: ids 1..4
    (_slurm(8, 0, 12, step=4), (2, 4)),                             # --array=0-12:4
    (_slurm(5, 5, 5), (0, 1)),                                      # --array=5: one task, the whole plan
    ({"JOB_COMPLETION_INDEX": "7", "KERNEL_WHEELS_SHARD_COUNT": "8"}, (7, 8)),
    ({"KERNEL_WHEELS_SHARD": "2/4"}, (2, 4)),
    # An explicit K/N wins: one task of an array run again by hand (sbatch --array=5).
    ({**_slurm(5, 5, 5), "KERNEL_WHEELS_SHARD": "5/8"}, (5, 8)),
    ({**_slurm(1, 0, 3), "SLURM_ARRAY_TASK_STEP": "", "SLURM_ARRAY_TASK_MAX": ""}, (1, 4)),  # empty is unset
])
def test_shard_auto_reads_the_engines_variables(environ: dict[str, str], shard: tuple[int, int]) -> None:
    found = Shard.parse("auto", environ)
    assert (found.index, found.count) == shard and found == Shard(*shard)
    assert found.source  # said in the run's log


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "--shard auto: no batch engine gave this process a shard: run it as a Slurm array task "
         "(SLURM_ARRAY_TASK_ID), in a Kubernetes Indexed Job (JOB_COMPLETION_INDEX with KERNEL_WHEELS_SHARD_COUNT), "
         "set KERNEL_WHEELS_SHARD=K/N, or give --shard K/N"),
    ({"SLURM_JOB_ID": "42"}, "--shard auto: no batch engine gave this process a shard"),  # not an array
    ({"SLURM_ARRAY_TASK_ID": "2"}, "--shard auto: SLURM_ARRAY_TASK_ID (a Slurm array task) is set but "
                                   "SLURM_ARRAY_TASK_COUNT is not"),
    ({**_slurm(2, 1, 4), "SLURM_ARRAY_TASK_MIN": ""}, "SLURM_ARRAY_TASK_MIN is not"),
    ({**_slurm(2, 1, 4), "SLURM_ARRAY_TASK_COUNT": "four"}, "--shard auto: SLURM_ARRAY_TASK_COUNT='four' is not "
                                                            "a whole number"),
    (_slurm(7, 1, 7, count=3), "--shard auto: Slurm array task 7 of ids 1-7 with SLURM_ARRAY_TASK_COUNT=3 does "
                               "not give one of N shards: submit the array as a range"),  # --array=1,3,7
    (_slurm(6, 0, 12, step=4), "Slurm array task 6 of ids 0-12:4"),  # not one of the ids
    (_slurm(9, 1, 4), "Slurm array task 9 of ids 1-4"),
    ({"JOB_COMPLETION_INDEX": "3"}, "--shard auto: JOB_COMPLETION_INDEX=3 needs the number of completions: set "
                                    "KERNEL_WHEELS_SHARD_COUNT to the Job's spec.completions"),
    ({"JOB_COMPLETION_INDEX": "8", "KERNEL_WHEELS_SHARD_COUNT": "8"},
     "--shard auto: JOB_COMPLETION_INDEX=8 with KERNEL_WHEELS_SHARD_COUNT=8: set KERNEL_WHEELS_SHARD_COUNT to "
     "the Job's spec.completions"),
    ({"KERNEL_WHEELS_SHARD_COUNT": "8"}, "--shard auto: KERNEL_WHEELS_SHARD_COUNT is set but JOB_COMPLETION_INDEX "
                                         "is not: is the Job's completionMode Indexed?"),
    ({"JOB_COMPLETION_INDEX": "-1", "KERNEL_WHEELS_SHARD_COUNT": "8"}, "JOB_COMPLETION_INDEX='-1' is not a whole"),
    ({**_slurm(1, 0, 3), "JOB_COMPLETION_INDEX": "1", "KERNEL_WHEELS_SHARD_COUNT": "4"},
     "--shard auto: a Slurm array and a Kubernetes Indexed Job both name a shard (Slurm array task 1 of 0-3; "
     "Kubernetes Indexed Job index 1 of 4): set KERNEL_WHEELS_SHARD=K/N or give --shard K/N"),
    ({"KERNEL_WHEELS_SHARD": "4/4"}, "--shard auto: KERNEL_WHEELS_SHARD='4/4': give K/N with 0 <= K < N"),
    ({"KERNEL_WHEELS_SHARD": "x" * 100}, "KERNEL_WHEELS_SHARD='" + "x" * 40 + "...'"),
])
def test_shard_auto_refuses_what_gives_no_shard(environ: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        Shard.parse("auto", environ)
    assert message in caught.value.message and "\n" not in caught.value.message


def test_shard_auto_without_an_engine_is_one_line(tmp_path: Path) -> None:
    env = {name: "" for name in os.environ if name.startswith("SLURM_")}
    proc = run_cli("mirror", "mirror-org/alpha", "--to", tmp_path / "site", "--shard", "auto",
                   env={**env, "JOB_COMPLETION_INDEX": "", "KERNEL_WHEELS_SHARD": ""}, check=False)
    one_line_error(proc, "--shard auto: no batch engine gave this process a shard", status=2)
    assert not (tmp_path / "site").exists()
    proc = run_cli("mirror", "mirror-org/alpha", "--to", tmp_path / "site", "--shard", "auto",
                   env={**env, "JOB_COMPLETION_INDEX": "3"}, check=False)
    one_line_error(proc, "JOB_COMPLETION_INDEX=3 needs the number of completions", status=2)


# -- the documented files ------------------------------------------------------------------

def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(), re.M | re.S)


def test_the_docs_show_the_job_script_and_the_manifest_the_tests_run() -> None:
    assert SCRIPT.read_text() in _blocks("bash"), "docs/mirror.md does not hold scripts/deploy/mirror.sbatch verbatim"
    assert MANIFEST.read_text() in _blocks("yaml"), "docs/mirror.md does not hold scripts/deploy/mirror-job.yaml verbatim"
    assert os.access(SCRIPT, os.X_OK)
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_indexed_job_manifest_is_a_valid_job_whose_pods_take_every_shard() -> None:
    import kubernetes_validate  # the Job API's own schemas, bundled (offline)
    import yaml

    job = yaml.safe_load(MANIFEST.read_text())
    version = kubernetes_validate.latest_version()
    assert kubernetes_validate.validate(job, version, strict=True)
    # The validator does refuse what the Job API refuses (a number where a string goes).
    broken = json.loads(json.dumps(job))
    broken["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = 8
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)

    spec = job["spec"]
    container = spec["template"]["spec"]["containers"][0]
    assert spec["completionMode"] == "Indexed"
    argv = [*container.get("command", []), *container.get("args", [])]
    assert argv[:2] == ["kernel-wheels", "mirror"] and argv[argv.index("--shard") + 1] == "auto"
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    # Each pod's environment as Kubernetes sets it gives each index its own shard.
    shards = {Shard.parse("auto", {**env, "JOB_COMPLETION_INDEX": str(k)}) for k in range(spec["completions"])}
    assert shards == {Shard(k, spec["completions"]) for k in range(spec["completions"])}
    # Secrets come from Kubernetes Secrets, never as values in the manifest.
    secret_names = {"HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert {e["name"] for e in container["env"] if "valueFrom" in e} == secret_names
    assert not secret_names & set(env)

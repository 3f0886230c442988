#!/usr/bin/env python3
"""Issue #41's sizing figures: the documented job script (scripts/deploy/mirror.sbatch) as a
Slurm array on a one-node test cluster, everything on loopback.

The cluster, the olah Hub and moto's S3 server are the tests' own
(tests/support/slurm.py, tests/support/mirror_hub.py). The Hub serves REPOS kernels of 3
releases x 7 pure-Python variants each (the tests' fixture kernels: a wheel is a few kB,
so the figures measure the per-wheel work of listing, converting, checking, uploading
and indexing, not bandwidth). The array (``sbatch --array=0-(TASKS-1)``) mirrors them into
a bucket, then runs again with nothing new. Task times are Slurm's (StartTime/EndTime,
whole seconds).

    PYTHONPATH=src:tests python3 scripts/mirror_slurm_figures.py --out /tmp/slurm-figures

Root only (the test cluster's slurmd runs as root), with Debian's slurm-wlm and munge.
Writes OUT/mirror_slurm.json and prints a summary; exits 0 only if every task succeeded
and the bucket holds every wheel.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.helpers import olah_server  # noqa: E402
from tests.support.mirror_hub import git, s3_server, write_release  # noqa: E402
from tests.support.slurm import SlurmCluster, Task, slurm_cluster, why_not  # noqa: E402

VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch213-cxx11-cpu-x86_64-linux",
            "torch27-cxx11-cu128-x86_64-linux", "torch28-cxx11-cu128-x86_64-linux")
RELEASES = ("1.0.0", "1.1.0", "2.0.0")


def make_repos(root: Path, count: int) -> list[str]:
    names = []
    for n in range(count):
        repo_id = f"sizing-org/kernel-{n:02d}"
        repo = root / "kernels" / repo_id
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "commit.gpgsign", "false")
        for step, version in enumerate(RELEASES):
            write_release(repo, version, VARIANTS, step)
        names.append(repo_id)
    return names


def seconds(task: Task) -> float:
    return (datetime.fromisoformat(task.end) - datetime.fromisoformat(task.start)).total_seconds()


def run_array(cluster: SlurmCluster, work: Path, env: dict[str, str], tasks: int, args: list[str]) -> dict:
    script = ROOT / "scripts" / "deploy" / "mirror.sbatch"
    job = cluster.sbatch(f"--array=0-{tasks - 1}", script, *args, "--json", env=env, cwd=work)
    done = cluster.wait_final(job, tasks)
    failed = {t: v.state for t, v in done.items() if v.state != "COMPLETED"}
    if failed:
        raise SystemExit(f"tasks failed: {failed}; logs in {work}")
    counts = []
    for task in sorted(done):
        log = (work / f"kernel-mirror-{job}_{task}.log").read_text()
        counts.append(json.loads(log[log.index("{"):])["counts"])
    task_seconds = [seconds(t) for t in done.values()]
    wall = (max(datetime.fromisoformat(t.end) for t in done.values())
            - min(datetime.fromisoformat(t.start) for t in done.values())).total_seconds()
    return {"job": job, "tasks": tasks, "added": [c["added"] for c in counts],
            "skipped": [c["skipped"] for c in counts], "task_seconds": task_seconds,
            "task_minutes": sum(task_seconds) / 60, "wall_seconds": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/slurm-figures"))
    parser.add_argument("--repos", type=int, default=12)
    parser.add_argument("--tasks", type=int, default=4)
    args = parser.parse_args()
    reason = why_not()
    if reason:
        raise SystemExit(f"mirror_slurm_figures: no Slurm cluster: {reason}")
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    work = out / "work"
    for folder in ("hub", "home", "tmp", "hf-home", "kw-cache", "secrets", "s3"):
        (work / folder).mkdir(parents=True)
    secrets = work / "secrets"
    (secrets / "aws-credentials").write_text("[default]\naws_access_key_id = testing\n"
                                             "aws_secret_access_key = testing\n")
    (secrets / "aws-credentials").chmod(0o600)
    repos = make_repos(work / "hub", args.repos)
    wheels = len(repos) * len(RELEASES) * len(VARIANTS)
    with slurm_cluster(out / "slurm") as cluster, s3_server(work / "s3") as s3, \
            olah_server(work, work / "hub", f"kernels/{repos[0]}") as hub:
        s3.bucket("sizing")
        version = cluster.command("sinfo", "--version").stdout.strip()
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "HOME": str(work / "home"), "TMPDIR": str(work / "tmp"), "HF_ENDPOINT": hub.endpoint,
               "HF_HOME": str(work / "hf-home"), "KERNEL_WHEELS_CACHE": str(work / "kw-cache"),
               "HF_HUB_DISABLE_PROGRESS_BARS": "1", "AWS_ENDPOINT_URL": s3.endpoint,
               "AWS_DEFAULT_REGION": "us-east-1", "KERNEL_MIRROR_SECRETS": str(secrets)}
        first = run_array(cluster, work, env, args.tasks, [*repos, "--to", "s3://sizing/k"])
        objects = s3.snapshot("sizing", "k")
        again = run_array(cluster, work, env, args.tasks, [*repos, "--to", "s3://sizing/k"])
    wheel_bytes = sum(len(v) for k, v in objects.items() if k.endswith(".whl"))
    result = {
        "machine": f"{platform.node()}: {os.cpu_count()} CPUs, {platform.platform()}",
        "setup": f"one-node {version} cluster on loopback; olah Hub and moto S3 on 127.0.0.1",
        "repos": len(repos), "wheels": wheels, "first": first, "rerun": again,
        "objects": len(objects), "bytes_stored": sum(len(v) for v in objects.values()),
        "wheel_bytes": wheel_bytes,
        "wheels_per_task_minute": sum(first["added"]) / first["task_minutes"],
    }
    (out / "mirror_slurm.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['setup']}; {result['machine']}")
    print(f"first run: {sum(first['added'])} wheels added by {args.tasks} tasks "
          f"({first['added']}), {first['task_minutes']:.2f} task-minutes, "
          f"wall {first['wall_seconds']:.0f} s: "
          f"{result['wheels_per_task_minute']:.0f} wheels per task-minute")
    print(f"stored: {result['objects']} objects, {result['bytes_stored'] / 1e6:.2f} MB "
          f"({wheel_bytes / 1e6:.2f} MB of wheels, {wheel_bytes / max(1, wheels) / 1e3:.1f} kB each)")
    print(f"re-run with nothing new: {sum(again['skipped'])} skipped, tasks {again['task_seconds']} s, "
          f"wall {again['wall_seconds']:.0f} s")
    ok = sum(first["added"]) == wheels and sum(k.endswith(".whl") for k in objects) == wheels
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

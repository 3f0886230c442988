"""A one-node Slurm cluster of the test's own (issue #41): Debian's ``slurm-wlm`` and
``munge``, started as the test's processes with their configuration, state, spool and
logs in a folder of the test, listening on 127.0.0.1 only, stopped at the end (jobs
cancelled first).

What it takes to run without a machine's setup (found on Debian 12, Slurm 22.05):
munged with a key file of its own (``--force``: pytest's folders are not world-
searchable, which munged otherwise refuses for its socket); no cgroups
(``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``); no accounting
database (``AccountingStorageType=accounting_storage/none``: ``sacct`` has nothing to say
here, so the tests watch ``squeue`` and ``scontrol``); ``SlurmdParameters=config_overrides``
so that the node offers more CPUs than a 2-core machine has (two 4-task arrays, 4 CPUs
each, at once); ``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny`` so that both
daemons bind 127.0.0.1 instead of every address; ``MinJobAge`` long enough that finished
tasks stay visible to ``squeue`` for the whole test.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .helpers import free_port, stop

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("munge", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
#: Where Debian puts the daemons (not on every user's PATH).
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
#: Task states after which Slurm does nothing more with a task (unless it is requeued).
FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
NODE = "kwnode"
#: The node's CPUs and memory as configured (config_overrides: more than the machine has).
NODE_CPUS, NODE_MEMORY_MB = 32, 65536


def why_not() -> str | None:
    """Why no cluster can start on this machine, in words; None when it can."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name, path=_SEARCH) is None]
    if absent:
        return (f"no {', '.join(absent)} on this machine: install Debian's slurm-wlm and munge "
                "(scripts/test.sh does)")
    if os.geteuid() != 0:
        return (f"not root (uid {os.geteuid()}): the test cluster's slurmd runs as root "
                "(SlurmdUser=root) to start the array's tasks")
    return None


@dataclass(frozen=True)
class Task:
    """One array task as ``squeue`` shows it."""

    job: str  # the array's job id
    task: int
    state: str
    start: str  # ISO time, or N/A
    end: str
    reason: str


class SlurmCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "etc" / "slurm.conf"
        self.log = root / "log"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, ...) of this cluster runs with: the
        test's own, less any Slurm settings of an outer cluster, plus SLURM_CONF."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))}
        return {**clean, "SLURM_CONF": str(self.conf)}

    # -- clients ---------------------------------------------------------------------
    def command(self, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(args), env={**self.env, **(env or {})}, cwd=cwd,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}\n"
                                 f"{self.daemon_logs()}")
        return proc

    def sbatch(self, *args: str | Path, env: Mapping[str, str], cwd: Path) -> str:
        """``sbatch --parsable ARGS``: the job id."""
        out = self.command("sbatch", "--parsable", *map(str, args), env=env, cwd=cwd).stdout
        return out.strip().split(";")[0]

    def tasks(self, job: str) -> dict[int, Task]:
        """Every task of array ``job`` (pending ones too, one line each: ``squeue -r``)."""
        out = self.command("squeue", "--noheader", "--all", "--array", "--states=all", "--jobs", job,
                           "--format=%F|%K|%T|%S|%e|%r").stdout
        found = {}
        for line in out.splitlines():
            parent, task, state, start, end, reason = line.split("|", 5)
            found[int(task)] = Task(parent, int(task), state, start, end, reason)
        return found

    def restarts(self, job: str, task: int) -> int:
        out = self.command("scontrol", "--oneliner", "show", "job", f"{job}_{task}").stdout
        match = re.search(r"\bRestarts=(\d+)", out)
        assert match, out
        return int(match[1])

    def wait(self, job: str, condition: Callable[[dict[int, Task]], bool], what: str) -> dict[int, Task]:
        """Until ``condition(tasks)`` holds; fails at once if a daemon exits. No time
        limit of its own (pytest-timeout ends a test that hangs)."""
        while True:
            tasks = self.tasks(job)
            if condition(tasks):
                return tasks
            self.check_alive(f"waiting for {what}")
            time.sleep(0.2)  # a poll interval, not a wait for anything

    def wait_final(self, job: str, count: int) -> dict[int, Task]:
        """Until all ``count`` tasks of ``job`` are in a final state."""
        return self.wait(job, lambda tasks: len(tasks) == count and all(t.state in FINAL for t in tasks.values()),
                         f"the {count} tasks of job {job} to end")

    # -- daemons ---------------------------------------------------------------------
    def check_alive(self, doing: str) -> None:
        dead = [name for name, process in self.processes.items() if process.poll() is not None]
        if dead:
            raise AssertionError(f"{', '.join(dead)} exited while {doing}:\n{self.daemon_logs()}")

    def listening(self) -> dict[str, list[str]]:
        """daemon -> the ``address:port`` of every TCP socket it listens on (from /proc:
        the sockets among its open files, found in the kernel's LISTEN tables)."""
        listen = {}
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    address, port = fields[1].split(":")
                    listen[fields[9]] = f"{_address(address)}:{int(port, 16)}"
        found = {}
        for name, process in self.processes.items():
            inodes = set()
            for fd in Path(f"/proc/{process.pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue  # closed meanwhile
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
            found[name] = sorted(listen[i] for i in inodes if i in listen)
        return found

    def daemon_logs(self, lines: int = 15) -> str:
        text = []
        for path in sorted(self.log.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            text.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(text)

    def _start(self, name: str, *args: str) -> None:
        out = (self.log / f"{name}.out").open("wb")
        with out:
            self.processes[name] = subprocess.Popen([shutil.which(name, path=_SEARCH) or name, *args],
                                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                    env=self.env, cwd=self.root, start_new_session=True)

    def start(self) -> None:
        for folder in ("etc", "log", "state", "spool", "munge-key", "munge-run"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        key_folder, run = self.root / "munge-key", self.root / "munge-run"
        key_folder.chmod(0o700)
        run.chmod(0o755)
        key = key_folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = run / "munge.socket"
        self._start("munged", "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
                    f"--pid-file={run / 'munged.pid'}", f"--seed-file={key_folder / 'munged.seed'}",
                    f"--log-file={self.log / 'munged.log'}")
        self._wait_until(lambda: socket_path.exists(), "munged's socket")
        self.conf.write_text(self._config(socket_path))
        self._start("slurmctld", "-D", "-f", str(self.conf))
        self._start("slurmd", "-D", "-f", str(self.conf), "-N", NODE)
        self._wait_until(self._node_idle, "the node to register as idle")

    def _wait_until(self, ready: Callable[[], bool], what: str) -> None:
        while not ready():
            self.check_alive(f"starting the cluster ({what})")
            time.sleep(0.1)

    def _node_idle(self) -> bool:
        proc = self.command("sinfo", "--noheader", "--Node", "--format=%T|%E", check=False)
        if proc.returncode != 0:  # slurmctld is not answering yet
            return False
        state, _, reason = proc.stdout.strip().partition("|")
        if state.startswith(("inval", "drain")):
            raise AssertionError(f"the test node is {state}: {reason}\n{self.daemon_logs()}")
        return state == "idle"

    def _config(self, munge_socket: Path) -> str:
        ctld, slurmd = free_port(), free_port()
        while slurmd == ctld:
            slurmd = free_port()
        self.ports = {"slurmctld": ctld, "slurmd": slurmd}
        host = socket.gethostname().split(".")[0]
        user = "root"
        return f"""\
# A one-node cluster of the tests (tests/support/slurm.py): 127.0.0.1 only.
ClusterName=kwtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={self.log / 'slurmctld.log'}
SlurmdLogFile={self.log / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=86400
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN
PartitionName=kw Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""

    def stop(self) -> None:
        """Cancel every job (and wait until no task runs), then stop the daemons."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            self.command("scancel", "--full", "--user", "root", check=False)
            while self.processes["slurmd"].poll() is None:
                out = self.command("squeue", "--noheader", "--states=RUNNING,COMPLETING,CONFIGURING",
                                   "--format=%i", check=False)
                if out.returncode != 0 or not out.stdout.strip():
                    break
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.get(name)
            if process is not None:
                stop(process)


def _address(hex_address: str) -> str:
    """/proc/net/tcp's address (little-endian words) as text."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(words) == 4 else socket.AF_INET6, words)


@contextmanager
def slurm_cluster(root: Path) -> Iterator[SlurmCluster]:
    """A started cluster, stopped when the block ends (also when it fails)."""
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()

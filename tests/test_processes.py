"""``processes.alive``: the one test of "is this process of this host gone" behind the
clean-up of a killed run's leftovers (build work folders, mirror temporary files, leases)."""

from __future__ import annotations

import os
import subprocess
import sys

from kernel_wheels.processes import alive


def test_a_running_process_is_alive_and_an_exited_one_is_not() -> None:
    assert alive(os.getpid())
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: its pid names no process any more
    assert not alive(process.pid)


def test_a_process_of_another_user_is_alive() -> None:
    assert alive(1)  # init: signal 0 is refused to an ordinary user, but it runs

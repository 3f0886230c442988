"""``kernel-wheels install`` of the sample wheel into a fresh venv that has torch, against
plain ``pip install`` of the same wheel into the same kind of venv (issue #42: at most
1.5x; with ``--installer uv`` at most 0.5x plain pip), and ``uv pip install`` for
reference.

Every run gets a fresh venv: a copy (hard links, ``cp -al``) of a venv made once with
``uv venv --seed`` and torch installed by uv, as the tests make theirs; made untimed
before the run. Each side installs from a folder holding only the sample's wheel, with
no index: kernel-wheels ``install img2gray --no-index -f LINKS --python V`` (it probes the
venv, chooses the wheel, checks it, installs it with the installer, proves torch
unchanged), pip ``V -m pip install --no-index -f LINKS img2gray``, uv ``uv pip install
--python V --no-index -f LINKS img2gray``. pip reads no configuration file
(``PIP_CONFIG_FILE`` is the null device for every side: this machine's find-links would
add a folder to pip's search); uv keeps its cache under .work/ (warm after the first run,
as a user's is). Each run is verified: the venv then has img2gray's dist-info.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.helpers import UV, torch_wheel

from ..bench import Bench
from ..config import KERNEL_WHEELS, WORK
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target
from ..sample import sample_wheel

PROJECT = "img2gray"
VS_PIP, UV_VS_PIP = 1.5, 0.5
UV_CACHE = WORK / "uv-cache"
TEMPLATE = WORK / "install-venvs" / "template"


def _env() -> dict[str, str]:
    return {**base_env(), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "UV_CACHE_DIR": str(UV_CACHE)}


def _template(env: dict[str, str]) -> Path:
    """The venv every run's venv is a copy of: uv venv --seed, torch installed by uv."""
    done = TEMPLATE.with_name("template.done")
    if not done.exists():
        shutil.rmtree(TEMPLATE, ignore_errors=True)
        torch = torch_wheel(WORK / "torch-wheel")
        subprocess.run([UV, "venv", "-q", "--seed", "--python", sys.executable,
                        str(TEMPLATE)], check=True, capture_output=True, env=env)
        subprocess.run([UV, "pip", "install", "-q", "--python", str(TEMPLATE / "bin" / "python"),
                        str(torch)], check=True, capture_output=True, env=env)
        done.touch()
    return TEMPLATE


def _fresh(venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run(["cp", "-a", "-l", str(TEMPLATE), str(venv)], check=True)


def _installed(venv: Path) -> None:
    found = list(venv.glob(f"lib/python3*/site-packages/{PROJECT}-*.dist-info/RECORD"))
    if len(found) != 1:
        raise RuntimeError(f"{PROJECT} is not installed in {venv} after the run")


def run(bench: Bench) -> list[Row]:
    env = _env()
    bench.progress("  install: the sample kernel's wheel and a venv with torch (made once)")
    wheel, _ = sample_wheel()
    links = Path(wheel).parent
    _template(env)
    jobs = {}
    sides = {
        "ours": lambda python: [str(KERNEL_WHEELS), "install", PROJECT, "--no-index", "-f", str(links),
                                "--python", python],
        "ours-uv": lambda python: [str(KERNEL_WHEELS), "install", PROJECT, "--no-index", "-f", str(links),
                                   "--python", python, "--installer", "uv"],
        "pip": lambda python: [python, "-m", "pip", "install", "--no-index", "-f", str(links), PROJECT],
        "uv": lambda python: [UV, "pip", "install", "--python", python, "--no-index", "-f", str(links),
                              PROJECT],
    }
    for side, argv in sides.items():
        venv = WORK / "install-venvs" / side
        jobs[side] = Job(f"install-{side}", argv(str(venv / "bin" / "python")), env, cwd=WORK,
                         prepare=lambda venv=venv: _fresh(venv), verify=lambda venv=venv: _installed(venv))
    bench.progress("  install the sample wheel into a fresh venv: kernel-wheels (pip, uv), pip, uv")
    run_interleaved(list(jobs.values()), bench.sizes.runs, bench.progress)

    def samples(side: str) -> list[float]:
        return [s.seconds for s in jobs[side].samples]

    pip = jobs["pip"].median_s
    return [
        Row("install/pip", "install the sample wheel vs pip install",
            "kernel-wheels install (probe, choose, check, pip, torch proven unchanged) vs plain pip "
            "install of the same wheel, each into a fresh venv with torch, no index",
            "s", jobs["ours"].median_s, pip, Target("ratio_max", VS_PIP),
            samples={"ours": samples("ours"), "baseline": samples("pip")}),
        Row("install/uv", "install --installer uv vs pip install",
            "the same kernel-wheels install with uv as the installer vs plain pip install",
            "s", jobs["ours-uv"].median_s, pip, Target("ratio_max", UV_VS_PIP),
            samples={"ours": samples("ours-uv"), "baseline": samples("pip")}),
        Row("install/uv-plain", "  for reference: uv pip install vs pip install",
            "plain uv pip install of the same wheel into the same kind of venv vs plain pip install",
            "s", jobs["uv"].median_s, pip,
            samples={"ours": samples("uv"), "baseline": samples("pip")}),
    ]

"""Issue #33 (UX round 3): what a newcomer and a platform engineer tripped over, each
tried as they would, with the real command, real servers on 127.0.0.1 and real venvs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import one_line_error, run_cli
from support.servers_index import IndexServer, pip_env, pypiserver


@pytest.fixture(scope="module")
def kernel_folder(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder holding the sample kernel's CPU build, as `build -o` writes it."""
    root = tmp_path_factory.mktemp("kernel") / "img2gray"
    shutil.copytree(cpu_build, root / "build" / cpu_build.name)
    return root


@pytest.fixture(scope="module")
def variant_output(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`to-wheel --variants` output: the plain wheel and its variant wheel."""
    out = tmp_path_factory.mktemp("variants")
    run_cli("to-wheel", kernel_folder, "1.1.2", "--variants", "-o", out)
    assert len(list(out.glob("*.whl"))) == 2
    return out


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    with pypiserver(tmp_path_factory.mktemp("pypiserver")) as server:
        yield server


def _publish_env(server: IndexServer) -> dict[str, str]:
    return {**pip_env(), "TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}


# --- 1. publish refuses variant wheels up front --------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_publish_refuses_variant_wheels_before_uploading(variant_output: Path, pypi: IndexServer,
                                                         as_json: bool) -> None:
    proc = run_cli("publish", variant_output, "--repository-url", pypi.upload_url,
                   *(["--json"] if as_json else []), env=_publish_env(pypi), check=False)
    line = one_line_error(proc, "variant wheel", "index", status=2)
    assert "--variants" in line, line
    assert pypi.listing() == {}  # nothing uploaded, not even the plain wheel
    if as_json:
        error = json.loads(proc.stdout)["error"]
        assert error["type"] == "UsageError" and "variant wheel" in error["message"]

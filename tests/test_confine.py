"""confine.py: a name from outside is either refused or stays inside its folder, and a
folder from outside is walked only where its links stay inside its root."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_wheels.confine import (
    Problem,
    Refusal,
    commit_id,
    file_name,
    inside,
    ref_name,
    regular_files,
    relative_path,
)
from kernel_wheels.errors import UnsafeNameError

names = st.lists(st.sampled_from(list("./\\a\x00\n") + ["..", "é"]), max_size=30).map("".join)


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(name=names)
def test_an_accepted_path_never_leaves_its_root(name: str) -> None:
    root = "/srv/root"
    try:
        accepted = relative_path(name, "test")
    except UnsafeNameError as exc:
        assert "\n" not in exc.message
        return
    joined = os.path.normpath(os.path.join(root, str(accepted)))
    assert joined.startswith(root + "/") and ".." not in accepted.parts


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "a\\b",
                                  "a\x00b", "a\nb", "", "x" * 256, "a/" * 2049 + "b", None, 3])
def test_relative_path_refuses(name: object) -> None:
    with pytest.raises(UnsafeNameError) as refused:
        relative_path(name, "org/repo: a listing entry")
    assert refused.value.message.startswith("org/repo: a listing entry: ")
    assert "\n" not in refused.value.message


@pytest.mark.parametrize("name", ["a", "build/v/_ops.py", "a b/é.txt", ".hidden", "a..b"])
def test_relative_path_accepts(name: str) -> None:
    assert str(relative_path(name, "w")) == name


def test_file_name_is_one_part() -> None:
    assert file_name("x.whl", "w") == "x.whl"
    with pytest.raises(UnsafeNameError):
        file_name("a/b", "w")


@pytest.mark.parametrize("commit", ["a" * 40, "0" * 64])
def test_commit_id_accepts_hex_digests(commit: str) -> None:
    assert commit_id(commit, "w") == commit


@pytest.mark.parametrize("commit", ["A" * 40, "a" * 39, "a" * 41, "../" + "a" * 37, None, 1, ""])
def test_commit_id_refuses(commit: object) -> None:
    with pytest.raises(UnsafeNameError):
        commit_id(commit, "w")


@pytest.mark.parametrize("ref", ["v1.1.2", "main", "release/1.x", "v1"])
def test_ref_name_accepts(ref: str) -> None:
    assert ref_name(ref, "w") == ref


@pytest.mark.parametrize("ref", ["../x", "a..b", ".x", "a/.x", "x.lock", "a//b", "/a", "a/", "a b",
                                 "a:b", "a~b", "a^b", "a?b", "a*b", "a[b", "a\\b", "a@{b", "x.", ""])
def test_ref_name_refuses(ref: str) -> None:
    with pytest.raises(UnsafeNameError):
        ref_name(ref, "w")


def test_inside_refuses_a_path_through_a_planted_link(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "snapshots").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "snapshots" / "abc").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeNameError, match="through a link"):
        inside(root, "snapshots/abc/file", "w")
    assert inside(root, "snapshots/new/file", "w") == root / "snapshots" / "new" / "file"


# --- regular_files: the one folder walk (variant folders to pack, a build's package) -------


class Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.relpath)
        self.refusal = refusal


def _walk(folder: Path, root: Path, skip_folders: frozenset[str] = frozenset(),
          check_name: Callable[[str], object] | None = None) -> list[str]:
    files = regular_files(folder, root, Refused, skip_folders=skip_folders, check_name=check_name)
    return [relpath for _, relpath in files]


def _refusal(folder: Path, root: Path) -> tuple[str, Problem]:
    with pytest.raises(Refused) as refused:
        regular_files(folder, root, Refused)
    return refused.value.refusal.relpath, refused.value.refusal.problem


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ holding a folder to walk, pkg/, with a file, a subfolder and a shared file."""
    root = tmp_path / "root"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "b.py").write_text("b")
    (root / "pkg" / "sub" / "a.txt").write_text("a")
    (root / "shared.h").write_text("h")
    (tmp_path / "secret").write_text("not the tree's")
    return root


def test_every_regular_file_sorted_links_inside_the_root_followed(tree: Path) -> None:
    (tree / "pkg" / "header.h").symlink_to("../shared.h")  # outside the folder, inside the root
    (tree / "pkg" / "again").symlink_to("sub", target_is_directory=True)  # one folder, two names
    files = regular_files(tree / "pkg", tree, Refused)
    assert [relpath for _, relpath in files] == ["b.py", "header.h", "sub/a.txt"]
    assert dict((relpath, path.read_text()) for path, relpath in files)["header.h"] == "h"


@pytest.mark.parametrize("target", ["../../../secret", "ABSOLUTE"])
def test_a_link_out_of_the_root_is_refused_by_name(tree: Path, target: str) -> None:
    link = tree / "pkg" / "sub" / "stolen"
    link.symlink_to(tree.parent / "secret" if target == "ABSOLUTE" else target)
    assert _refusal(tree / "pkg", tree) == ("sub/stolen", Problem.OUTSIDE)


def test_the_folder_itself_may_be_a_link_only_inside_the_root(tree: Path) -> None:
    (tree / "alias").symlink_to("pkg", target_is_directory=True)
    assert _walk(tree / "alias", tree) == ["b.py", "sub/a.txt"]
    (tree.parent / "outside").mkdir()
    (tree / "out").symlink_to(tree.parent / "outside", target_is_directory=True)
    assert _refusal(tree / "out", tree) == ("", Problem.OUTSIDE)


def test_broken_links_and_loops_are_refused(tree: Path) -> None:
    (tree / "pkg" / "gone").symlink_to("nothing-here")
    assert _refusal(tree / "pkg", tree) == ("gone", Problem.BROKEN)
    (tree / "pkg" / "gone").unlink()
    (tree / "pkg" / "a").symlink_to("b-link")
    (tree / "pkg" / "b-link").symlink_to("a")
    with pytest.raises(Refused) as refused:
        regular_files(tree / "pkg", tree, Refused)
    assert refused.value.refusal.relpath == "a" and refused.value.refusal.problem is Problem.LOOP
    assert refused.value.refusal.reason  # the operating system's words, for the message


def test_fifo_and_socket_are_refused_never_opened(tree: Path) -> None:
    os.mkfifo(tree / "pkg" / "sub" / "waits")  # opening it would block the walk for ever
    assert _refusal(tree / "pkg", tree) == ("sub/waits", Problem.FIFO)
    (tree / "pkg" / "sub" / "waits").unlink()
    with socket.socket(socket.AF_UNIX) as server:
        cwd = os.getcwd()
        os.chdir(tree / "pkg")  # a socket's path is limited to 108 bytes: bound relative
        try:
            server.bind("listens")
        finally:
            os.chdir(cwd)
        assert stat.S_ISSOCK((tree / "pkg" / "listens").stat().st_mode)
        assert _refusal(tree / "pkg", tree) == ("listens", Problem.SOCKET)


def test_skipped_folders_and_the_name_check(tree: Path) -> None:
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"")
    assert _walk(tree / "pkg", tree, skip_folders=frozenset({"__pycache__"})) == ["b.py", "sub/a.txt"]
    seen: list[str] = []
    assert _walk(tree / "pkg", tree, check_name=seen.append) == [
        "__pycache__/b.cpython-311.pyc", "b.py", "sub/a.txt"]
    assert sorted(seen) == ["__pycache__", "__pycache__/b.cpython-311.pyc", "b.py", "sub", "sub/a.txt"]

"""confine.py: a name from outside is either refused or stays inside its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_wheels.confine import commit_id, file_name, inside, ref_name, relative_path
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

"""The Hub's answers, held to the shapes a Hub gives before anything of them is used.

A Hub-compatible server (the Hub, a company mirror, whatever ``HF_ENDPOINT`` names) is
trusted for nothing. huggingface_hub turns its JSON into objects (``GitRefs``, ``KernelInfo``)
without checking what the fields hold, and tree listings are read page by page as JSON
(:meth:`~.repository.HubRepository.tree`); the functions here take those answers and
return plain, checked values: ref names that are valid git refs, commit ids of 40 (or 64)
hex digits, listing paths that are plain relative paths under the folder that was asked
for, sizes that are non-negative integers, blob ids and LFS digests of the right length.
Anything else is an :class:`UnexpectedAnswerError` (or, for a name that would lead
outside a folder, an :class:`UnsafeNameError`) with one line naming the repository and
the entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..confine import commit_id, file_name, ref_name, relative_path, shown
from ..errors import UnexpectedAnswerError
from .files import RemoteFile

#: A file larger than this is not a kernel's file (the largest known are a few GB).
MAX_FILE_SIZE = 1 << 40
#: Refs and listing entries beyond these counts are not a kernel repository's.
MAX_REFS = 100_000
MAX_ENTRIES = 1_000_000
_GIT_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _refs_of(items: Any, kind: str, where: str) -> dict[str, str]:
    if not isinstance(items, list):
        raise UnexpectedAnswerError(f"{where}: the refs answer's {kind}s are not a list")
    if len(items) > MAX_REFS:
        raise UnexpectedAnswerError(f"{where}: the refs answer lists {len(items)} {kind}s")
    found: dict[str, str] = {}
    for item in items:
        name = ref_name(getattr(item, "name", None), f"{where}: a {kind} in the refs answer")
        commit = commit_id(getattr(item, "target_commit", None), f"{where}: {kind} {name}")
        if found.setdefault(name, commit) != commit:
            raise UnexpectedAnswerError(f"{where}: the refs answer lists {kind} {name} twice, "
                                        "at different commits")
    return found


def refs(answer: Any, where: str) -> tuple[dict[str, str], dict[str, str]]:
    """({tag: commit}, {branch: commit}) of a ``list_repo_refs`` answer."""
    return (_refs_of(getattr(answer, "tags", None), "tag", where),
            _refs_of(getattr(answer, "branches", None), "branch", where))


def revision_commit(answer: Any, where: str) -> str:
    """The commit id of a ``repo_info`` answer."""
    return commit_id(getattr(answer, "sha", None), f"{where}: the revision answer's commit")


def tree_page(answer: Any, where: str) -> list[dict[str, Any]]:
    """One page of a tree listing: a JSON list of objects."""
    if not isinstance(answer, list) or not all(isinstance(entry, dict) for entry in answer):
        raise UnexpectedAnswerError(f"{where}: a tree listing page is not a list of entries")
    return answer


def _entries(pages: Iterable[list[dict[str, Any]]], where: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for page in pages:
        entries += page
        if len(entries) > MAX_ENTRIES:
            raise UnexpectedAnswerError(f"{where}: the listing has more than {MAX_ENTRIES} entries")
    return entries


def _listed_path(entry: dict[str, Any], folder: str, where: str) -> str:
    """The entry's path, which must lie under ``folder/`` (anywhere for the root, ``""``)."""
    path = str(relative_path(entry.get("path"), f"{where}: a listing entry"))
    if folder and not path.startswith(folder + "/"):
        raise UnexpectedAnswerError(f"{where}: the listing of {folder}/ holds '{shown(path)}', "
                                    "which is not under it")
    return path


def _kind(entry: dict[str, Any], where: str) -> str:
    kind = entry.get("type")
    if kind not in ("file", "directory"):
        raise UnexpectedAnswerError(f"{where}: a listing entry has the type {shown(repr(kind), 40)}")
    return str(kind)


def folder_names(pages: Iterable[list[dict[str, Any]]], folder: str, where: str) -> list[str]:
    """The sub-folders a non-recursive listing of ``folder`` names (``build`` -> the
    variant names), sorted."""
    names = set()
    for entry in _entries(pages, where):
        if _kind(entry, where) != "directory":
            continue
        path = _listed_path(entry, folder, where)
        names.add(file_name(path[len(folder) + 1:], f"{where}: a folder in {folder}/"))
    return sorted(names)


def _size(value: Any, path: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_FILE_SIZE:
        raise UnexpectedAnswerError(f"{where}: the listing gives {shown(path)} the size "
                                    f"{shown(repr(value), 40)}")
    return value


def remote_file(entry: dict[str, Any], folder: str, where: str) -> RemoteFile:
    """A file entry of a listing of ``folder``, checked field by field."""
    path = _listed_path(entry, folder, where)
    blob_id = entry.get("oid")
    if not isinstance(blob_id, str) or not _GIT_OID.fullmatch(blob_id):
        raise UnexpectedAnswerError(f"{where}: the listing gives {shown(path)} the blob id "
                                    f"{shown(repr(blob_id), 80)}")
    lfs = entry.get("lfs")
    if lfs is None:
        return RemoteFile(path, _size(entry.get("size"), path, where), blob_id, None)
    sha256 = lfs.get("oid") if isinstance(lfs, dict) else None
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise UnexpectedAnswerError(f"{where}: the listing gives {shown(path)} the LFS digest "
                                    f"{shown(repr(sha256), 80)}")
    return RemoteFile(path, _size(lfs.get("size"), path, where), blob_id, sha256)


def remote_files(pages: Iterable[list[dict[str, Any]]], folder: str, where: str) -> list[RemoteFile]:
    """The files of a listing of ``folder``, each checked, no path twice, no path both
    a file and a folder."""
    files: dict[str, RemoteFile] = {}
    for entry in _entries(pages, where):
        if _kind(entry, where) != "file":
            continue
        file = remote_file(entry, folder, where)
        if files.setdefault(file.path, file) != file:
            raise UnexpectedAnswerError(f"{where}: the listing holds {shown(file.path)} twice")
    for path in files:  # a file cannot also be a folder of another file's path
        parent = path.rpartition("/")[0]
        while parent and parent != folder:
            if parent in files:
                raise UnexpectedAnswerError(f"{where}: the listing holds {shown(parent)} both as "
                                            "a file and as a folder")
            parent = parent.rpartition("/")[0]
    return list(files.values())

"""The Simple API entries of the server's indexes, through the static site's own code.

Which wheels an index lists is :func:`kernel_wheels.index.targets.select_for_target`
(the root index lists all), and the pages are rendered by
:mod:`kernel_wheels.index.simple` from :class:`~kernel_wheels.index.simple.WheelEntry`
values, exactly as ``kernel-wheels index`` renders them; links are relative in the same
way (``../../files/<wheel>``), so the server works behind any path prefix.

What differs is only what is known: before a wheel is first converted, its entry has no
``#sha256=``, no size, and ``data-core-metadata="true"`` (PEP 714: the metadata file
exists, its hash is not given). pip and uv install such links as they are (a hash is
only required under ``--require-hashes``, which takes the hashes from the requirements
file anyway); once the wheel is cached, the page lists both hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape
from urllib.parse import quote

from ..index.simple import WheelEntry
from ..index.targets import Target, parse_kernel_wheel, select_for_target, targets_of
from ..index.wheelfacts import WheelFacts
from .catalog import ServedWheel

FILES = "files"


def for_target(wheels: Sequence[ServedWheel], target: Target | None) -> list[ServedWheel]:
    """What an index lists: everything for the root index (``target`` None), else the
    one build per release and platform that a machine of ``target`` should get. A
    release that two tags spell on different commits is on no page: its files are
    refused (502), and an installer would pick it as the newest and fail; nor is a wheel
    the policy refuses (its ``refused`` reason)."""
    wheels = [w for w in wheels if w.ambiguity is None and w.refused is None]
    if target is None:
        return list(wheels)
    by_name = {w.filename: w for w in wheels}
    parsed = [k for w in wheels if (k := parse_kernel_wheel(w.filename)) is not None]
    return [by_name[k.filename] for k in select_for_target(target, parsed)]


def entries(wheels: Iterable[ServedWheel], facts_of: Callable[[ServedWheel], WheelFacts | None],
            depth: int) -> list[WheelEntry]:
    """Entries for a project page ``depth`` folders below the server's root."""
    prefix = "../" * depth + FILES + "/"
    result = []
    for wheel in wheels:
        facts = facts_of(wheel)
        result.append(WheelEntry(
            project=wheel.kernel.project, filename=wheel.filename,
            url=prefix + quote(wheel.filename, safe=""),
            sha256=facts.sha256 if facts else None,
            requires_python=wheel.requires_python,
            core_metadata_sha256=facts.metadata_sha256 if facts else None,
            size=facts.size if facts else None,
            core_metadata_unhashed=facts is None,
            gpu_code=facts.gpu_code if facts else None))
    return result


def target_keys(wheels: Iterable[ServedWheel]) -> list[str]:
    """The target keys the torch builds among ``wheels`` were made for (any other valid
    key is served too: its index lists what fits it)."""
    return sorted(targets_of(k for w in wheels if (k := parse_kernel_wheel(w.filename))))


def landing_page(projects: Iterable[str], targets: Iterable[str]) -> str:
    items = ['    <li><a href="simple/">simple/</a>: every wheel (for '
             "<code>kernel-wheels install</code>)</li>"]
    items += [f'    <li><a href="{escape(t)}/simple/">{escape(t)}/simple/</a>: '
              f"<code>pip install NAME --index-url http://HOST/{escape(t)}/simple</code></li>"
              for t in targets]
    kernels = ", ".join(escape(p) for p in sorted(projects)) or "none yet"
    return "\n".join(["<!DOCTYPE html>", "<html>", "  <head>", '    <meta charset="utf-8">',
                      "    <title>Kernel wheels</title>", "  </head>", "  <body>",
                      "    <h1>Kernel wheels</h1>", f"    <p>Kernels: {kernels}</p>", "    <ul>",
                      *items, "    </ul>", "  </body>", "</html>"]) + "\n"

"""What a mirror run reports while it runs: typed events, to a callback.

The default reports nothing; the CLI renders the events (per repository and overall,
with bytes and rates). Kept here, small and self-contained, so that a project-wide
progress module can be bridged to it later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Listed:
    """A repository's releases are known."""

    repo: str
    releases: int
    variants: int


@dataclass(frozen=True)
class Planned:
    to_convert: int
    skipped: int
    shard: str


@dataclass(frozen=True)
class ItemDone:
    """One (repository, version, variant) converted and uploaded."""

    repo: str
    version: str
    variant: str
    wheel: str
    size: int
    #: Items done so far, and planned, in this run.
    done: int
    total: int


@dataclass(frozen=True)
class Message:
    text: str


Event = Listed | Planned | ItemDone | Message
Progress = Callable[[Event], None]


def silent(_event: Event) -> None:
    pass

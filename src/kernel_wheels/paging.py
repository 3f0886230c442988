"""Every paginated listing from outside, bounded in pages, items and time: one helper.

A listing is asked page by page, each page naming the next (a Hub page's ``Link: next``
URL, an S3 page's continuation token). A server that always names a next page (a new
token every time, a link to itself with a new query) would keep a run asking for ever,
and one whose pages are each on time would never trip a request's timeout. So a listing
is followed only through :func:`follow`, which counts what it has taken and ends it with
one line, ``error(message)``, once it passes any of its :class:`Bounds`: the pages asked
for, the items they held, or the seconds since the first page was asked for (each
request is bounded on its own by the transport's ``--timeout``; this bounds their sum).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Page = TypeVar("Page")
Cursor = TypeVar("Cursor")

#: The longest a whole listing may take, whatever its pages: a quarter of an hour.
LISTING_SECONDS = 900.0


@dataclass(frozen=True)
class Bounds:
    """The most a listing may take: pages asked for, items held, seconds in all."""

    pages: int
    items: int
    seconds: float = LISTING_SECONDS

    def __post_init__(self) -> None:
        if self.pages < 1 or self.items < 1 or not self.seconds > 0:
            raise ValueError(f"listing bounds must be positive: {self}")


@dataclass(frozen=True)
class Step(Generic[Page, Cursor]):
    """One page as the listing's ``fetch`` read it: the page, how many items it holds,
    and the cursor of the next page (None: the last page)."""

    page: Page
    items: int
    next: Cursor | None


def follow(first: Cursor, fetch: Callable[[Cursor], Step[Page, Cursor]], bounds: Bounds,
           what: str, error: Callable[[str], Exception],
           clock: Callable[[], float] = time.monotonic) -> Iterator[Page]:
    """The pages of a listing, from the cursor ``first`` (a URL, None for an S3 listing's
    first page), each read by ``fetch`` (which judges the page and its cursor: another
    host, a token seen before); ``error(message)`` once the pages, items or seconds
    pass ``bounds``. ``what`` names the listing in that message (``listing s3://b/p``)."""
    started = clock()
    cursor: Cursor = first
    pages = items = 0
    while True:
        step = fetch(cursor)
        pages += 1
        items += step.items
        if items > bounds.items:
            raise error(f"{what} holds more than {bounds.items} items (in {pages} pages); "
                        "refusing to read more of it")
        yield step.page
        if step.next is None:
            return
        if pages >= bounds.pages:
            raise error(f"{what} goes on for more than {bounds.pages} pages; refusing to read "
                        "more of it")
        elapsed = clock() - started
        if elapsed > bounds.seconds:
            raise error(f"{what} has taken more than {bounds.seconds:g} s ({pages} pages so far); "
                        "refusing to wait for more of it")
        cursor = step.next


Item = TypeVar("Item")


def at_most(items: Sequence[Item], limit: int, what: str,
            error: Callable[[str], Exception]) -> Sequence[Item]:
    """``items`` of one page that has no next (a Simple API page, a find-links page),
    or ``error(message)`` when it holds more than ``limit``: its size is bounded by
    the transport, the work its items cause is bounded here."""
    if len(items) > limit:
        raise error(f"{what} holds more than {limit} items; refusing to read it")
    return items

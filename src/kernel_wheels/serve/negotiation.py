"""PEP 691 content negotiation: which form of a Simple API page a client gets.

Clients name what they accept in ``Accept`` (pip: JSON first, then HTML; a browser:
``text/html``); PEP 691 also allows a ``format`` URL parameter with the same values.
The highest quality wins. Among equals, a type the client names outright beats one it
reaches through a wildcard, and JSON beats HTML when named outright; through ``*/*``
alone (curl, old clients) the answer is plain ``text/html``, which every client reads.
Nothing acceptable: ``None`` (the application answers 406).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..index.simple import HTML_TYPE, JSON_TYPE

HTML_V1 = "application/vnd.pypi.simple.v1+html"
_ALIASES = {
    "application/vnd.pypi.simple.latest+json": JSON_TYPE,
    "application/vnd.pypi.simple.latest+html": HTML_V1,
}


@dataclass(frozen=True)
class Form:
    """A form of a page: whether it is JSON, and the Content-Type to answer with."""

    json: bool
    content_type: str


_FORMS = {
    JSON_TYPE: Form(True, JSON_TYPE),
    HTML_V1: Form(False, HTML_V1),
    HTML_TYPE: Form(False, f"{HTML_TYPE}; charset=utf-8"),
}
# Preference among equal qualities: (named outright, through a wildcard).
_RANK = {JSON_TYPE: (3, 1), HTML_V1: (2, 2), HTML_TYPE: (1, 3)}

SUPPORTED = ", ".join(_FORMS)


def _ranges(accept: str) -> list[tuple[str, float]]:
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if not media:
            continue
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = max(0.0, min(1.0, float(value)))
                except ValueError:
                    quality = 0.0
        media = media.lower()
        ranges.append((_ALIASES.get(media, media), quality))
    return ranges


def _quality(offered: str, ranges: list[tuple[str, float]]) -> tuple[float, bool] | None:
    """(quality, named outright) of ``offered`` under the most specific matching range."""
    kind = offered.split("/")[0]
    best: tuple[int, float] | None = None
    for media, quality in ranges:
        specificity = 2 if media == offered else 1 if media == f"{kind}/*" else \
            0 if media == "*/*" else -1
        if specificity >= 0 and (best is None or specificity > best[0]):
            best = (specificity, quality)
    if best is None:
        return None
    return best[1], best[0] == 2


def negotiate(accept: str | None, format_parameter: str | None = None) -> Form | None:
    wanted = format_parameter or accept or HTML_TYPE
    ranges = _ranges(wanted)
    choices = []
    for offered, form in _FORMS.items():
        found = _quality(offered, ranges)
        if found is None or found[0] <= 0:
            continue
        quality, named = found
        rank = _RANK[offered][0 if named else 1]
        choices.append((quality, named, rank, form))
    if not choices:
        return None
    return max(choices, key=lambda choice: choice[:3])[3]

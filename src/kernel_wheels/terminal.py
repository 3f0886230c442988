"""Text from outside, on its way to a terminal or a log: the one escaping.

Anything a remote answer, a wheel, a record or a file names can hold characters a
terminal acts on rather than shows: ESC (``\\x1b]0;title\\x07`` sets the window's title,
``\\x1b[2J`` clears the screen), BEL, CR (which rewrites the line it ends), the C1
controls (``\\x9b`` is CSI to many terminals), the bidirectional embeddings, overrides
and isolates (U+202A-U+202E, U+2066-U+2069: the text shown is not the text read),
zero-width and other format characters, line separators, unassigned and private
code points. :func:`shown` writes each of them as a Python escape (``\\x1b``,
``\\u202e``), so that what reaches the screen is what the text holds, on one line.

The CLI prints through :func:`shown_lines` (``cli.common.out`` and ``stderr``): its own
line breaks are kept, every other character a terminal would act on is escaped.
"""

from __future__ import annotations

#: What a one-line value is cut at by default.
LIMIT = 120


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escaped(text: str) -> str:
    # isprintable() is False for C0, DEL, C1, format characters (bidi, zero-width),
    # surrogates, private use, unassigned code points, line and paragraph separators,
    # and spaces other than ' ': all escaped. Most texts are printable: one C pass.
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else _escape(c) for c in text)


def shown(text: str, limit: int = LIMIT) -> str:
    """``text`` on one line, every character a terminal acts on escaped (control, format,
    bidirectional, separator, unassigned), cut at ``limit`` characters."""
    escaped = _escaped(text)
    return escaped if len(escaped) <= limit else escaped[:limit] + "..."


def shown_lines(text: str) -> str:
    """``text`` with its line breaks (``\\n``) kept and everything else :func:`shown`
    escapes escaped, uncut: for output the tool lays out in lines itself."""
    if text.isprintable():
        return text
    return "\n".join(_escaped(line) for line in text.split("\n"))

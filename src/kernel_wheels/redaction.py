"""Secrets that never show: one redaction for every text that reaches output.

An index server may echo what it was sent: the password in an error page, the
``Authorization`` header in a debug answer, the upload URL with its user part in a
``Location`` header, a file name made of the password. Every message built from a
server's answer, every field read from an index page and every line of an
installer's output goes through :func:`redact` before anyone sees it; it removes the
secret in every form it travels in (as is, URL-encoded, HTML- or JSON-escaped, inside
the base64 of a Basic ``Authorization`` header), any ``user:password@`` part of a URL,
and the value of any Basic or Bearer header.

Masking known spellings cannot be complete: a server can echo a password in upper
case, as HTML entities, as JSON ``\\u`` escapes, as hex, read as latin-1, split over
two lines, or in any mix of these. So text from a server is shown only when it is
*known* to hold no secret (:func:`untrusted_lines`): after masking, it is decoded every
way it could be (:func:`holds_secret`), and if any decoding still holds a credential,
none of the server's text is shown. A very short secret (under :data:`SHORT_SECRET`
characters) is masked only where it stands as a value of its own (``password=p``,
``/p/``), never inside a word (``http``, ``simple``); a server's text that holds it
anywhere is withheld instead.
"""

from __future__ import annotations

import base64
import html
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

from .terminal import shown

MASK = "********"
#: What stands where a server's text was withheld.
WITHHELD = "(the server's text is not shown: it may echo the credentials)"
#: Secrets shorter than this are masked only as whole values (see the module's doc).
SHORT_SECRET = 8
#: Rounds of decodings of a server's text (nested encodings), and the most characters
#: all decodings together may have: a text whose decodings would take more is
#: withheld (judged as holding a secret), so no padding hides a deep encoding.
_ROUNDS = 3
_VIEW_BUDGET = 4_000_000
#: Of an answer's body not shown, this much is judged with what is shown (a secret
#: split between the shown first line and the next).
_ALSO = 4096

# ``scheme://user:password@`` up to the last ``@`` of the authority (a password may hold
# an unencoded ``@``); the path, query and fragment are left alone.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#]*@")
# A credential after "Basic"/"Bearer": a token with a digit or a base64 sign in it (so
# that "Basic authentication" stays readable; a known secret is masked whatever it is).
_AUTH_VALUE = re.compile(r"(?i)\b(basic|bearer)(\s+)(?=[A-Za-z0-9+/=._~-]*[0-9+/=])[A-Za-z0-9+/=._~-]{6,}")
_AUTH_HEADER = re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:[a-z]+\s+)?)[^\s<>\"',;]+")


class Secret:
    """A string that does not show itself: neither ``repr`` nor ``str`` gives it, so
    no log line or traceback can print it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__


def _forms(secret: str) -> set[str]:
    """The spellings ``secret`` can come back in."""
    percent = quote(secret, safe="")
    forms = {secret, percent, re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), percent),
             quote(secret), quote_plus(secret), html.escape(secret), json.dumps(secret)[1:-1],
             "".join(f"&#{ord(c)};" for c in secret), "".join(f"&#x{ord(c):x};" for c in secret),
             json.dumps(secret, ensure_ascii=True)[1:-1]}
    raw = secret.encode("utf-8", "surrogateescape")
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode()
        forms |= {text, text.rstrip("=")}
    return {form for form in forms if form}


def _as_value(form: str) -> re.Pattern[str]:
    """``form`` where it stands alone: not inside a run of letters and digits."""
    return re.compile(rf"(?<![0-9A-Za-z]){re.escape(form)}(?![0-9A-Za-z])")


def redact(text: str, secrets: Iterable[str] = (), *, userinfo: str = "") -> str:
    """``text`` with every form of every secret replaced, URLs without their user part
    and Basic/Bearer header values masked. ``secrets`` are the raw values: a password,
    the ``user:password`` pair a Basic header encodes, a token. ``userinfo`` stands where
    a URL's user part was (``"***@"`` shows that the URL had one)."""
    text = _USERINFO.sub(lambda match: match[1] + userinfo, text)
    text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    text = _AUTH_VALUE.sub(rf"\1\2{MASK}", text)
    forms: set[str] = set()
    values: set[str] = set()
    for secret in secrets:
        if secret:
            (values if len(secret) < SHORT_SECRET else forms).update(_forms(secret))
    for form in sorted(forms, key=len, reverse=True):  # longest first: no half-masked form
        text = text.replace(form, MASK)
    for form in sorted(values - forms, key=len, reverse=True):
        text = _as_value(form).sub(MASK, text)
    return text


# --- whether a text holds a secret, however it is spelt --------------------------------------

_ESCAPE = re.compile(r"\\(U[0-9a-fA-F]{8}|[uU][0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a"}
# Characters that hide between a secret's parts without showing: white space, control
# and format characters (zero-width spaces, bidirectional marks).
_INVISIBLE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]+")
_NOT_ALNUM = re.compile(r"[\W_]+")
#: Only ASCII white space: C1 characters and U+00A0 are bytes of UTF-8 read as latin-1.
_LINE_SPACE = re.compile(r"[ \t\n\r\f\v]+")


def _unescape(text: str) -> str:
    """JSON's, JavaScript's and Python's backslash escapes decoded (``\\u003c`` -> ``<``)."""
    def one(match: re.Match[str]) -> str:
        code = match[1]
        if code[0] in "uUx" and len(code) > 1:
            value = int(code[1:], 16)
            return chr(value) if value <= 0x10FFFF else code
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES.get(code, code)

    # A pair of \u surrogates is one character.
    return _ESCAPE.sub(one, text).encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")


def _unbase64(text: str, shift: int = 0) -> str:
    """Every run that reads as base64 (either alphabet) replaced by what it encodes,
    its first ``shift`` characters left out (a run glued to a word before it)."""
    def one(match: re.Match[str]) -> str:
        run = match[0].rstrip("=")[shift:].replace("-", "+").replace("_", "/")
        for candidate in (run + "=" * (-len(run) % 4), run[:len(run) // 4 * 4]):
            try:  # whole, else its full quartets (a run glued to a word after it)
                return base64.b64decode(candidate).decode("utf-8", "replace")
            except ValueError:
                continue
        return match[0]

    return _BASE64_RUN.sub(one, text)


_HEX_RUN = re.compile(r"[0-9A-Fa-f]{8,}")


def _unhex(text: str, shift: int = 0) -> str:
    """Every run of hex digits replaced by the text its bytes give (from ``shift``)."""
    def one(match: re.Match[str]) -> str:
        run = match[0][shift:]
        run = run[:len(run) // 2 * 2]
        return bytes.fromhex(run).decode("utf-8", "replace")

    return _HEX_RUN.sub(one, text)


_READ_AS_SINGLE_BYTES = re.compile("[\u0080-\u00ff\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192"
                                   "\u02c6\u02dc\u2013-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]")


def _unmojibake(text: str) -> str:
    """UTF-8 that a latin-1 or Windows-1252 reader turned into characters, read back."""
    if not _READ_AS_SINGLE_BYTES.search(text):
        return text
    raw = bytearray()
    for char in text:
        if ord(char) < 256:
            raw.append(ord(char))
        else:
            try:
                raw += char.encode("cp1252")
            except UnicodeEncodeError:
                raw += char.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def _fully(decode: Callable[[str], str], text: str) -> Iterable[str]:
    """``decode`` applied again and again (an encoding nested in itself), every stage:
    a stage can over-decode what the one before it showed."""
    for _ in range(8):
        decoded = decode(text)
        if decoded == text:
            return
        yield decoded
        text = decoded


def _decodings(text: str) -> Iterable[str]:
    yield _LINE_SPACE.sub("", text)  # an encoding split over lines (at any depth)
    yield text.lower()  # escapes upper-cased (\\U0030, &#X30;, %2F)
    yield from _fully(html.unescape, text)
    yield from _fully(lambda t: unquote(t, errors="replace"), text)
    yield from _fully(lambda t: unquote_plus(t, errors="replace"), text)
    yield from _fully(lambda t: t.replace("%25", "%"), text)  # only the '%' of a nested one
    yield from _fully(_unescape, text)
    yield from _fully(_unhex, text)
    yield from _fully(_unmojibake, text)
    yield _unhex(text, 1)
    yield from _fully(_unbase64, text)
    for shift in (1, 2, 3):  # once: the next round decodes what it gives
        yield _unbase64(text, shift)


def _views(text: str) -> tuple[list[str], bool]:
    """``text`` decoded every way it could have been encoded, nested a few times deep;
    and whether every decoding fit in :data:`_VIEW_BUDGET`."""
    # Also without white space: an encoding split over lines decodes only when joined.
    # And in lower case: an escape upper-cased (\\U0030, %2f) still decodes.
    joined = _LINE_SPACE.sub("", text)
    views = list(dict.fromkeys([text, joined, text.lower(), joined.lower()]))
    seen = set(views)
    frontier = list(views)
    budget = _VIEW_BUDGET - sum(map(len, views))
    for round_ in range(_ROUNDS):
        following = []
        for view in frontier:
            for decoded in _decodings(view):
                if decoded in seen:
                    continue
                budget -= len(decoded)
                if budget < 0:
                    return views, False
                seen.add(decoded)
                views.append(decoded)
                if round_ + 1 < _ROUNDS:
                    following.append(decoded)
        frontier = following
    return views, True


def _read_as_single_bytes(raw: bytes) -> str:
    """UTF-8 bytes as a latin-1 (or Windows-1252) reader shows them ("ü" -> "Ã¼")."""
    return "".join(bytes([b]).decode("cp1252", errors="ignore") or chr(b) for b in raw)


def _detectable(secret: str) -> set[str]:
    """Spellings of ``secret`` that its decodings do not undo: as bytes read one by one,
    as hex, as base64 at each of the three positions it can start at in a longer text."""
    raw = secret.encode("utf-8", "surrogateescape")
    forms = {secret, secret.upper(), secret.lower(), raw.decode("latin-1"),
             _read_as_single_bytes(raw), raw.hex()}
    forms |= set(_decodings(secret))  # a server that decoded what it was sent
    # Percent-encoded once and twice: a '%' glued before them would decode otherwise.
    for safe in ("", "/"):
        once = quote(secret, safe=safe)
        forms |= {once, quote(once, safe=safe), quote_plus(secret, safe=safe)}
    for shift in range(3):
        padded = b"\0" * shift + raw
        start, end = (shift * 8 + 5) // 6, len(padded) * 8 // 6
        for encoded in (base64.b64encode(padded), base64.urlsafe_b64encode(padded)):
            forms.add(encoded.decode()[start:end])
    return {form for form in forms if form}


def _normal(text: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).casefold())


def holds_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether any decoding of ``text`` (HTML entities, percent-encoding in either case,
    backslash escapes, nested), in any case, with anything invisible or any punctuation
    between its characters, holds one of ``secrets`` as is, as hex, as base64, or as
    UTF-8 read as latin-1. Errs on the side of yes: a caller withholds the text."""
    patterns = []
    for secret in secrets:
        for form in _detectable(secret) if secret else ():
            normal = _normal(form)
            alnum = _NOT_ALNUM.sub("", normal)
            # The letters and digits alone, when they are most of the secret (a secret
            # of punctuation would otherwise be found in any text).
            patterns.append((normal, alnum if len(alnum) >= min(len(normal), 6) else ""))
    if not patterns:
        return False
    views, complete = _views(text)
    if not complete:
        return True  # too many ways to read it to tell: withheld
    for view in views:
        normal = _normal(view)
        alnum = _NOT_ALNUM.sub("", normal)
        for form, form_alnum in patterns:
            if (form and form in normal) or (form_alnum and form_alnum in alnum):
                return True
    return False


def untrusted_lines(texts: Sequence[str], secrets: Iterable[str] = (),
                    limits: Sequence[int] = (), *, also: str = "") -> list[str]:
    """Texts a server sent (one answer's reason phrase, headers, body), for one-line
    messages: each redacted, escaped and cut (at ``limits[i]``, else 200 characters),
    or all of them :data:`WITHHELD` when, masked, they still hold a secret in any
    decoding. Judged together, with ``also`` (the rest of the same answer, not shown):
    a secret split over two of them, or over a body's lines, is found too."""
    secrets = tuple(s for s in secrets if s)
    masked = [redact(text, secrets) for text in texts]
    if secrets and holds_secret("\n".join([*masked, redact(also[:_ALSO], secrets)]), secrets):
        return [WITHHELD] * len(texts)
    return [shown(text, limits[i] if i < len(limits) else 200) for i, text in enumerate(masked)]


def untrusted_line(text: str, secrets: Iterable[str] = (), limit: int = 200) -> str:
    """One text a server sent, as :func:`untrusted_lines` shows it."""
    return untrusted_lines([text], secrets, [limit])[0]


def one_line(text: str, secrets: Iterable[str] = (), limit: int = 200) -> str:
    """A server's text for a one-line message: redacted, control characters escaped,
    cut at ``limit`` characters."""
    return shown(redact(text, secrets), limit)


# A command line's or requirement line's option that carries a secret as its value:
# ``--password X``, ``--token=X``, ``--client-secret X`` (the value masked, the name kept).
_SECRET_OPTION = re.compile(r"(?i)(--?[a-z0-9-]*(?:password|passwd|token|secret|api-key)[a-z0-9-]*)"
                            r"(=|\s+)(\S+)")


def quoted(text: str, limit: int = 200) -> str:
    """A requirement, URL or command line from outside (an ``install -r`` line, an
    index URL, an argument list), for a message that quotes it: a URL's user part
    (``http://u:PASSWORD@host``), a Basic or Bearer value and a secret option's value
    (``--password X``) masked, then escaped and cut as :func:`shown` does. The one
    redaction such messages go through; the CLI's error line applies it again."""
    masked = redact(text, userinfo="***@")
    masked = _SECRET_OPTION.sub(lambda m: f"{m[1]}{m[2]}{MASK}", masked)
    return shown(masked, limit)


def strip_userinfo(url: str) -> str:
    """``url`` without user name and password (``http://u:p@host/x`` -> ``http://host/x``)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``http://user:pw@host/x`` -> (``http://host/x``, user, pw)."""
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return strip_userinfo(url), user, password

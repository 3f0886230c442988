"""Secrets that never show: one redaction for every text that reaches output.

An index server may echo what it was sent: the password in an error page, the
``Authorization`` header in a debug answer, the upload URL with its user part in a
``Location`` header, a file name made of the password. Every message built from a
server's answer, every field read from an index page and every line of an
installer's output goes through :func:`redact` before anyone sees it; it removes the
secret in every form it travels in (as is, URL-encoded, HTML- or JSON-escaped, inside
the base64 of a Basic ``Authorization`` header), any ``user:password@`` part of a URL,
and the value of any Basic or Bearer header.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from .confine import shown

MASK = "********"

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
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret),
             html.escape(secret), json.dumps(secret)[1:-1]}
    raw = secret.encode("utf-8", "surrogateescape")
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode()
        forms |= {text, text.rstrip("=")}
    return {form for form in forms if form}


def redact(text: str, secrets: Iterable[str] = (), *, userinfo: str = "") -> str:
    """``text`` with every form of every secret replaced, URLs without their user part
    and Basic/Bearer header values masked. ``secrets`` are the raw values: a password,
    the ``user:password`` pair a Basic header encodes, a token. ``userinfo`` stands where
    a URL's user part was (``"***@"`` shows that the URL had one)."""
    text = _USERINFO.sub(lambda match: match[1] + userinfo, text)
    text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    text = _AUTH_VALUE.sub(rf"\1\2{MASK}", text)
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms |= _forms(secret)
    for form in sorted(forms, key=len, reverse=True):  # longest first: no half-masked form
        text = text.replace(form, MASK)
    return text


def one_line(text: str, secrets: Iterable[str] = (), limit: int = 200) -> str:
    """A server's text for a one-line message: redacted, control characters escaped,
    cut at ``limit`` characters."""
    return shown(redact(text, secrets), limit)


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

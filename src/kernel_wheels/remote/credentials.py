"""Where to upload and as whom: the settings twine users already have.

Resolution order (twine's): the upload URL from ``--repository-url``, else
``TWINE_REPOSITORY_URL``, else the ``repository`` of section NAME in ``~/.pypirc`` (NAME
from ``--repository`` or ``TWINE_REPOSITORY``). The user name from ``--username``, else
``TWINE_USERNAME``, else the ``.pypirc`` section, else the URL's user part, else the
keyring. The password from ``TWINE_PASSWORD``, else ``.pypirc``, else the URL, else the
keyring (when the ``keyring`` package is installed), else a prompt on a terminal.

The password lives in a :class:`Secret`, whose ``repr`` and ``str`` never show it, so
neither a log line nor a traceback can print it. The credentials are bound to the
upload URL's origin (:class:`~.transport.Login`): the index's Simple API gets them when
it lives there too, nothing else does.
"""

from __future__ import annotations

import configparser
import getpass
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..redaction import Secret, one_line, split_credentials
from .transport import Login

__all__ = ["KNOWN_REPOSITORIES", "Repository", "Secret", "read_pypirc", "resolve_repository"]

KNOWN_REPOSITORIES = {
    "pypi": "https://upload.pypi.org/legacy/",
    "testpypi": "https://test.pypi.org/legacy/",
}


@dataclass(frozen=True)
class Repository:
    upload_url: str  # without credentials
    username: str | None
    password: Secret | None
    #: The .pypirc section it came from, if any.
    name: str | None = None

    @property
    def login(self) -> Login | None:
        """The credentials, for the upload URL's origin only."""
        return Login.for_url(self.upload_url, self.username,
                             self.password.reveal() if self.password else None)

    @property
    def display(self) -> str:
        return one_line(self.upload_url, self.login.secrets if self.login else (), 300)


def read_pypirc(path: Path, name: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()  # no interpolation: passwords may hold '%'
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise UsageError(f"cannot read {path}: {exc.message.splitlines()[0]}") from None
    if not parser.has_section(name):
        if name in KNOWN_REPOSITORIES:
            return {"repository": KNOWN_REPOSITORIES[name]}
        raise UsageError(f"no [{name}] section in {path}")
    section = dict(parser.items(name))
    section.setdefault("repository", KNOWN_REPOSITORIES.get(name, ""))
    if not section["repository"]:
        raise UsageError(f"[{name}] in {path} has no 'repository' URL")
    return section


def _keyring_credential(url: str, username: str | None) -> tuple[str | None, str | None]:
    """(user, password) from the keyring, if the package and a backend exist."""
    try:
        import keyring
    except ImportError:
        return None, None
    try:
        if username is None:
            credential = keyring.get_credential(url, None)
            if credential is None:
                return None, None
            return credential.username, credential.password
        return username, keyring.get_password(url, username)
    except Exception:  # any backend failure (no D-Bus, locked store...) means "no keyring"
        return username, None


def _prompt(url: str, user: str | None) -> tuple[str, str]:
    """Ask on the terminal, as twine does; end of input (Ctrl-D) is a usage error."""
    try:
        if user is None:
            user = input(f"user name for {url}: ")
        return user, getpass.getpass(f"password for {user} at {url}: ")
    except EOFError:
        print(file=sys.stderr)  # the prompt's line ends before the error's
        raise UsageError(f"no credentials for {url}: end of input at the prompt (set "
                         "TWINE_USERNAME and TWINE_PASSWORD, use ~/.pypirc or a keyring, "
                         "or --non-interactive)") from None


def resolve_repository(*, repository_url: str | None = None, repository: str | None = None,
                       username: str | None = None, config_file: Path | None = None,
                       environ: Mapping[str, str] | None = None, use_keyring: bool = True,
                       interactive: bool | None = None) -> Repository:
    """The upload URL and credentials, as twine finds them: the URL given, else
    ``TWINE_REPOSITORY_URL``, else the ``repository`` section of ``.pypirc``; the user
    and password from ``username``, ``TWINE_USERNAME``/``TWINE_PASSWORD``, the section,
    the URL's user part, the keyring (``use_keyring``), then a prompt (``interactive``;
    None: when stdin is a terminal)."""
    env = os.environ if environ is None else environ
    section: dict[str, str] = {}
    name = None
    url = repository_url or env.get("TWINE_REPOSITORY_URL")
    if not url:
        name = repository or env.get("TWINE_REPOSITORY")
        if not name:
            raise UsageError("no repository: give --repository-url URL or --repository NAME "
                             "(a section of ~/.pypirc)")
        section = read_pypirc(config_file or Path.home() / ".pypirc", name)
        url = section["repository"]
    clean, url_user, url_password = split_credentials(url)
    if not clean.startswith(("http://", "https://")):
        raise UsageError(f"'{one_line(clean)}' is not an http(s) upload URL")
    user = username or env.get("TWINE_USERNAME") or section.get("username") or url_user
    password = env.get("TWINE_PASSWORD") or section.get("password") or url_password
    if password is None and use_keyring:
        user, password = _keyring_credential(clean, user)
    if password is None and (sys.stdin.isatty() if interactive is None else interactive):
        user, password = _prompt(clean, user)
    return Repository(clean, user, Secret(password) if password is not None else None, name)

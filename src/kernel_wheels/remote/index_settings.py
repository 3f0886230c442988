"""Where ``install`` looks, as pip and uv users already said it: flags, their variables,
pip.conf, ``.netrc`` and the keyring.

Precedence (pip's, with uv's variables after pip's own): a command-line flag, else
``PIP_INDEX_URL`` / ``PIP_EXTRA_INDEX_URL`` / ``PIP_FIND_LINKS``, else ``UV_INDEX_URL``
(or ``UV_DEFAULT_INDEX``) / ``UV_EXTRA_INDEX_URL`` (or ``UV_INDEX``) /
``UV_FIND_LINKS``, else pip.conf (``[install]`` before ``[global]``; the files pip reads,
in its order: ``/etc/xdg/pip/pip.conf``, ``/etc/pip.conf``, ``~/.pip/pip.conf``,
``~/.config/pip/pip.conf``, the target environment's ``pip.conf``, then
``PIP_CONFIG_FILE``, each overriding the ones before; ``PIP_CONFIG_FILE=/dev/null``
reads none), else PyPI, as pip.

Credentials for an index whose URL has no user part come from ``~/.netrc`` (or
``NETRC``), then the keyring (``--keyring-provider``), as pip and uv look them up.
"""

from __future__ import annotations

import configparser
import netrc
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from ..errors import UsageError
from ..redaction import one_line, split_credentials
from .transport import Tls

PYPI = "https://pypi.org/simple/"
KEYRING_PROVIDERS = ("auto", "import", "disabled")


@dataclass(frozen=True)
class IndexFlags:
    """What the command line said; None (or empty) where it said nothing."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    pre: bool = False
    cert: str | None = None
    client_cert: str | None = None
    keyring_provider: str | None = None


@dataclass(frozen=True)
class IndexSettings:
    #: The indexes to read, the main one first; their credentials in the URLs.
    index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    pre: bool
    tls: Tls = field(default_factory=Tls)
    #: Where the main index came from ("--index-url", "PIP_INDEX_URL", a pip.conf path...).
    index_origin: str = "--index-url"


def config_files(environ: Mapping[str, str], prefix: str | None) -> list[Path]:
    """pip.conf files in pip's loading order (later ones win)."""
    chosen = environ.get("PIP_CONFIG_FILE")
    if chosen == os.devnull:
        return []
    xdg_dirs = environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    home = Path(environ.get("HOME", str(Path.home())))
    xdg_home = Path(environ.get("XDG_CONFIG_HOME", str(home / ".config")))
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    if prefix:
        files.append(Path(prefix) / "pip.conf")
    if chosen:
        files.append(Path(chosen))
    return files


def environment_prefix(python: Path | None) -> str | None:
    """The target environment's prefix, where pip reads its "site" pip.conf: the given
    Python's virtual environment, else the activated one (``VIRTUAL_ENV``)."""
    if python is None:
        return os.environ.get("VIRTUAL_ENV")
    folder = python.absolute().parent.parent
    return str(folder) if (folder / "pyvenv.cfg").is_file() else None


def read_pip_conf(files: Sequence[Path]) -> dict[str, tuple[str, str]]:
    """{option: (value, file)} of pip.conf's install settings; [install] over [global],
    a later file over an earlier one."""
    found: dict[str, tuple[str, str]] = {}
    for path in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read pip's configuration {path}: "
                             f"{str(exc).splitlines()[0]}") from None
        for section in ("global", "install"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    found[key] = (value, str(path))
    return found


def _words(value: str | None) -> tuple[str, ...]:
    return tuple(value.split()) if value else ()


def _first(*candidates: tuple[str | None, str]) -> tuple[str | None, str]:
    for value, origin in candidates:
        if value:
            return value, origin
    return None, ""


def resolve(flags: IndexFlags, environ: Mapping[str, str] | None = None,
            prefix: str | None = None) -> IndexSettings:
    """The indexes and find-links locations to read, with their credentials."""
    env = os.environ if environ is None else environ
    conf = read_pip_conf(config_files(env, prefix))

    def conf_value(key: str) -> tuple[str | None, str]:
        value, path = conf.get(key, (None, ""))
        return value, f"{key} in {path}"

    index, origin = _first((flags.index_url, "--index-url"),
                           (env.get("PIP_INDEX_URL"), "PIP_INDEX_URL"),
                           (env.get("UV_INDEX_URL"), "UV_INDEX_URL"),
                           (env.get("UV_DEFAULT_INDEX"), "UV_DEFAULT_INDEX"),
                           conf_value("index-url"))
    extra_text, _ = _first((" ".join(flags.extra_index_urls), "--extra-index-url"),
                           (env.get("PIP_EXTRA_INDEX_URL"), ""),
                           (env.get("UV_EXTRA_INDEX_URL"), ""), (env.get("UV_INDEX"), ""),
                           conf_value("extra-index-url"))
    links_text, _ = _first((" ".join(flags.find_links), "--find-links"),
                           (env.get("PIP_FIND_LINKS"), ""), (env.get("UV_FIND_LINKS"), ""),
                           conf_value("find-links"))
    no_index = flags.no_index or _true(env.get("PIP_NO_INDEX")) or _true(env.get("UV_NO_INDEX")) \
        or _true(conf_value("no-index")[0])
    pre = flags.pre or _true(env.get("PIP_PRE")) or _true(conf_value("pre")[0])
    cert, _ = _first((flags.cert, ""), (env.get("PIP_CERT"), ""), conf_value("cert"))
    client_cert, _ = _first((flags.client_cert, ""), (env.get("PIP_CLIENT_CERT"), ""),
                            conf_value("client-cert"))
    provider = (flags.keyring_provider or env.get("PIP_KEYRING_PROVIDER")
                or env.get("UV_KEYRING_PROVIDER") or conf_value("keyring-provider")[0] or "auto")
    if provider == "subprocess":
        provider = "auto"  # the keyring package in this process answers as its command would
    if provider not in KEYRING_PROVIDERS:
        raise UsageError(f"--keyring-provider {one_line(provider)}: give auto, import, "
                         "subprocess or disabled")
    indexes: tuple[str, ...] = ()
    if not no_index:
        indexes = tuple(dict.fromkeys((index or PYPI, *_words(extra_text))))
        origin = origin if index else "pip's default (PyPI)"
    links = _words(links_text)
    if not indexes and not links:
        raise UsageError("--no-index and no --find-links: nowhere to look for the kernel")
    return IndexSettings(tuple(with_credentials(url, env, provider) for url in indexes), links,
                         pre, Tls(cert, client_cert), origin if indexes else "--find-links")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def with_credentials(url: str, environ: Mapping[str, str], provider: str) -> str:
    """``url`` with a user part from .netrc or the keyring when it has none."""
    clean, user, password = split_credentials(url)
    if password is not None or not clean.startswith(("http://", "https://")):
        return url
    found = _from_netrc(clean, environ) if user is None else None
    if found is None and provider != "disabled":
        found = _from_keyring(clean, user)
    if found is None:
        return url
    parts = urlsplit(clean)
    userinfo = f"{quote(found[0], safe='')}:{quote(found[1], safe='')}"
    return urlunsplit((parts.scheme, f"{userinfo}@{parts.netloc}", parts.path, parts.query, ""))


def _from_netrc(url: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    path = Path(environ.get("NETRC", str(Path(environ.get("HOME", str(Path.home()))) / ".netrc")))
    if not path.is_file():
        return None
    try:
        entry = netrc.netrc(str(path)).authenticators(urlsplit(url).hostname or "")
    except (netrc.NetrcParseError, OSError) as exc:
        raise UsageError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    if entry is None:
        return None
    login, _account, password = entry
    return (login or "", password or "") if password else None


def _from_keyring(url: str, username: str | None) -> tuple[str, str] | None:
    """pip's keyring lookup: the index URL, then its host, with the user if known."""
    try:
        import keyring
    except ImportError:
        return None
    netloc = urlsplit(url).netloc
    for service in (url, netloc):
        try:
            if username:
                password = keyring.get_password(service, username)
                if password is not None:
                    return username, password
                continue
            credential = keyring.get_credential(service, None)
        except Exception:  # any backend failure (no D-Bus, a locked store...) means "none"
            return None
        if credential is not None and credential.password is not None:
            return credential.username or "", credential.password
    return None

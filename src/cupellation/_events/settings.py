"""The core's environment variables, each resolved here, in one way.

- ``CUPELLATION_CAPTURE_CONTENT`` (``full``, ``hash`` or ``none``): the content
  capture of a sink built without ``content_capture=`` (AuditLog, StructlogSink,
  SpanCollector, and what builds on them).
- ``CUPELLATION_DIGEST_KEY``: the key that turns a run's digest into an
  HMAC-SHA256 (sinks writing it, readers checking it) when no ``digest_key=``
  is given.
- ``CUPELLATION_STORE_USER``, ``CUPELLATION_STORE_PASSWORD`` and
  ``CUPELLATION_STORE_PASSWORD_FILE`` (a file whose first line is the password): the
  credentials of a ClickHouse server store (``cupellation.store``). A store URL never
  carries a password, and the command line never takes one.

A parameter always wins over the environment. An empty variable counts as
unset. An invalid value does what OpenTelemetry's SDK does with its own
variables: it warns once (through :mod:`warnings` and the ``cupellation``
logger) and the sink's default applies; the program goes on. A parameter with
an invalid value raises, as any bad argument does.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from typing import Final

from ..exceptions import InvalidTypeError, InvalidValueError
from .levels import ContentCapture

__all__ = [
    "CAPTURE_ENV_VAR",
    "DIGEST_KEY_ENV_VAR",
    "STORE_PASSWORD_ENV_VAR",
    "STORE_PASSWORD_FILE_ENV_VAR",
    "STORE_USER_ENV_VAR",
    "resolve_capture",
    "resolve_digest_key",
    "resolve_store_credentials",
]

#: Sets a sink's content capture when its ``content_capture`` parameter is not given.
CAPTURE_ENV_VAR: Final = "CUPELLATION_CAPTURE_CONTENT"
#: Sets the key of run digests (HMAC-SHA256) when no ``digest_key`` is given.
DIGEST_KEY_ENV_VAR: Final = "CUPELLATION_DIGEST_KEY"
#: The user name of a ClickHouse server store (``cupellation.store``).
STORE_USER_ENV_VAR: Final = "CUPELLATION_STORE_USER"
#: The password of a ClickHouse server store.
STORE_PASSWORD_ENV_VAR: Final = "CUPELLATION_STORE_PASSWORD"
#: A file holding the password of a ClickHouse server store (its first line; wins over
#: ``CUPELLATION_STORE_PASSWORD``), for secrets mounted as files.
STORE_PASSWORD_FILE_ENV_VAR: Final = "CUPELLATION_STORE_PASSWORD_FILE"

_logger = logging.getLogger("cupellation")
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(variable: str, value: str, problem: str) -> None:
    with _warned_lock:
        if (variable, value) in _warned:
            return
        _warned.add((variable, value))
    message = f"cupellation: {variable}={value!r} {problem}"
    warnings.warn(message, RuntimeWarning, stacklevel=4)
    _logger.warning("%s", message)


def resolve_capture(value: ContentCapture | str | None, default: ContentCapture
                    ) -> ContentCapture:
    """The content capture in force: ``value`` when given (a bad one raises
    :class:`~cupellation.exceptions.InvalidValueError`), else
    ``CUPELLATION_CAPTURE_CONTENT`` when set and not empty, else ``default``.

    An invalid variable warns once and ``default`` applies.
    """
    if value is not None:
        return ContentCapture.parse(value)
    text = os.environ.get(CAPTURE_ENV_VAR, "").strip()
    if not text:
        return default
    try:
        return ContentCapture.parse(text)
    except ValueError:
        _warn_once(CAPTURE_ENV_VAR, text, f"is not full, hash or none; the default "
                   f"({default.value}) applies")
        return default


def resolve_digest_key(value: bytes | str | None) -> bytes | None:
    """The digest key in force: ``value`` when given (text is taken as UTF-8), else
    ``CUPELLATION_DIGEST_KEY`` when set and not empty, else None (plain SHA-256).

    Raises :class:`~cupellation.exceptions.InvalidTypeError` for a ``value`` that
    is neither bytes nor text, and warns once (the plain digest applying) for a
    variable that cannot be encoded as UTF-8.
    """
    if value is not None:
        if isinstance(value, bytes | bytearray):
            return bytes(value) or None
        if isinstance(value, str):
            return value.encode("utf-8", "surrogatepass") or None
        raise InvalidTypeError("digest_key", value, "bytes, text or None")
    text = os.environ.get(DIGEST_KEY_ENV_VAR, "")
    if not text:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _warn_once(DIGEST_KEY_ENV_VAR, "<not UTF-8>", "cannot be read as UTF-8; digests are "
                   "plain SHA-256")
        return None


def resolve_store_credentials() -> tuple[str | None, str | None]:
    """The (user, password) of a server store from the environment: the user from
    ``CUPELLATION_STORE_USER``; the password from the first line of the file
    ``CUPELLATION_STORE_PASSWORD_FILE`` names, else ``CUPELLATION_STORE_PASSWORD``.
    An unset or empty variable is None.

    Raises :class:`~cupellation.exceptions.InvalidValueError` naming the variable
    when the password file cannot be read.
    """
    user = os.environ.get(STORE_USER_ENV_VAR, "") or None
    path = os.environ.get(STORE_PASSWORD_FILE_ENV_VAR, "")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                first = handle.readline()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidValueError(STORE_PASSWORD_FILE_ENV_VAR, path,
                                    f"cannot be read ({type(exc).__name__})") from None
        return user, first.rstrip("\r\n") or None
    return user, os.environ.get(STORE_PASSWORD_ENV_VAR, "") or None

"""The core's environment variables, each resolved here, in one way.

- ``CUPELLATION_CAPTURE_CONTENT`` (``full``, ``hash`` or ``none``): the content
  capture of a sink built without ``content_capture=`` (AuditLog, StructlogSink,
  SpanCollector, and what builds on them).
- ``CUPELLATION_DIGEST_KEY``: the key that turns a run's digest into an
  HMAC-SHA256 (sinks writing it, readers checking it) when no ``digest_key=``
  is given.
- ``OTEL_SERVICE_NAME`` (OpenTelemetry's own, read here as the SDK reads it, then
  ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``): the service a sink records in
  each run's ``run_started`` when neither the run's :class:`~cupellation.RunInfo`
  nor the sink (``service=``) names one, and no SDK provider with a resource is in
  use (see :func:`resolve_service`).
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
from urllib.parse import unquote

from ..exceptions import InvalidTypeError, InvalidValueError
from .levels import ContentCapture

__all__ = [
    "CAPTURE_ENV_VAR",
    "DIGEST_KEY_ENV_VAR",
    "RESOURCE_ATTRIBUTES_ENV_VAR",
    "SERVICE_ENV_VAR",
    "STORE_PASSWORD_ENV_VAR",
    "STORE_PASSWORD_FILE_ENV_VAR",
    "STORE_USER_ENV_VAR",
    "check_service",
    "resolve_capture",
    "resolve_digest_key",
    "resolve_service",
    "resolve_store_credentials",
]

#: Sets a sink's content capture when its ``content_capture`` parameter is not given.
CAPTURE_ENV_VAR: Final = "CUPELLATION_CAPTURE_CONTENT"
#: Sets the key of run digests (HMAC-SHA256) when no ``digest_key`` is given.
DIGEST_KEY_ENV_VAR: Final = "CUPELLATION_DIGEST_KEY"
#: OpenTelemetry's variable naming the service (the resource's ``service.name``): the
#: service a run is recorded under when nothing closer names it.
SERVICE_ENV_VAR: Final = "OTEL_SERVICE_NAME"
#: OpenTelemetry's resource attributes (``key=value,...``, values percent-encoded);
#: its ``service.name`` is read after :data:`SERVICE_ENV_VAR`, as the SDK does.
RESOURCE_ATTRIBUTES_ENV_VAR: Final = "OTEL_RESOURCE_ATTRIBUTES"
_SERVICE_NAME: Final = "service.name"
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


def check_service(value: object) -> str | None:
    """``value`` as a sink's ``service=`` argument: None or non-empty text, else
    :class:`~cupellation.exceptions.InvalidTypeError` /
    :class:`~cupellation.exceptions.InvalidValueError` naming ``service``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidTypeError("service", value, "a string or None")
    if not value.strip():
        raise InvalidValueError("service", value, "must not be empty")
    return value


def resolve_service(value: str | None, provider: object = None) -> str | None:
    """The service a sink records for a run the application did not name one for.

    ``value`` (the sink's ``service=``) when given; else the ``service.name`` of
    ``provider``'s resource, when ``provider`` is an OpenTelemetry SDK tracer or
    logger provider (anything with ``resource.attributes``: the API's no-op and
    proxy providers have none); else ``OTEL_SERVICE_NAME``; else ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES``; else None (the run records no service).

    The provider comes before the variables because it is what the telemetry
    carries: the SDK builds a resource from those same variables, but a
    ``service.name`` the application passes to ``Resource.create`` wins over them,
    and that is the ``ServiceName`` the Collector writes. So a sink beside an SDK
    provider records exactly the Collector's ``ServiceName`` for the process.
    """
    if value is not None:
        return value
    resource = getattr(provider, "resource", None)
    attributes = getattr(resource, "attributes", None)
    if attributes is not None:
        try:
            named = attributes.get(_SERVICE_NAME)
        except Exception:  # a foreign object with an odd mapping: not a resource
            named = None
        if isinstance(named, str) and named:
            return named
    named = os.environ.get(SERVICE_ENV_VAR, "")
    if named:  # taken as it is, as the SDK takes it
        return named
    return _resource_service(os.environ.get(RESOURCE_ATTRIBUTES_ENV_VAR, ""))


def _resource_service(text: str) -> str | None:
    """``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES`` text, decoded as the SDK does
    (pairs split at ``,``, key and value at the first ``=``, both stripped, the value
    percent-decoded, the last pair of a key winning); None when absent or empty."""
    named = ""
    for pair in text.split(","):
        key, sep, raw = pair.partition("=")
        if sep and key.strip() == _SERVICE_NAME:
            named = unquote(raw.strip())
    return named or None
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

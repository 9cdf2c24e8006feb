"""Every environment variable cupellation reads, in one place, and the switch that
turns them all off.

Each variable is a constant here, described in :data:`VARIABLES` (which the
documentation's table is generated from), and read through one function,
:func:`read`: nothing else in cupellation or cupellation-exporters looks at the
environment. Three kinds are read:

- cupellation's own ``CUPELLATION_*`` variables (content capture, the digest key,
  the store's credentials, the CLI's tracebacks);
- OpenTelemetry's ``OTEL_*`` variables where cupellation interprets them itself: the
  service a run is recorded under, and what ``setup_otlp`` (cupellation-exporters)
  and the CLI's ``--otlp`` messages decide from the OTLP exporter's variables;
- tiktoken's cache folder, where a checked copy of the token rank files may be;
- the proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``), which the
  trace readers' HTTP client follows as :mod:`urllib` reads them (:func:`proxy_for`).

**Explicit configuration only.** An application that wants nothing taken from the
environment (a server whose sinks must behave the same wherever it is deployed)
calls ``use_environment(False)`` once at start-up, as httpx's ``trust_env=False``
does for a client: from then on :func:`read` answers None for every variable, so
every default is the documented one and only what the code passes applies.
``setup_otlp`` then hands the OpenTelemetry SDK explicit values for what it decides
(endpoint, timeout, compression, resource, metric interval); the SDK objects still
read their own variables for the options it leaves to them (the OTLP headers when
none are given, the log batch settings).

Rules, the same for every variable: a parameter always wins over the environment;
an empty variable counts as unset (but ``TIKTOKEN_CACHE_DIR=""``, which tiktoken
reads as "no cache"); an invalid value does what OpenTelemetry's SDK does with its
own variables: it warns once (through :mod:`warnings` and the ``cupellation``
logger) and the default applies, the program goes on. A parameter with an invalid
value raises, as any bad argument does.

.. versionadded:: 0.4
   This module, :func:`read` and :func:`use_environment`; the constants and
   ``resolve_*`` functions moved here from ``cupellation.events``,
   ``cupellation.logs`` and ``cupellation.otel`` (``resolve_capture`` stays in
   ``cupellation.events``, beside the content capture).
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.request
import warnings
from dataclasses import dataclass
from typing import Final, Literal, get_args
from urllib.parse import unquote

from .exceptions import InvalidTypeError, InvalidValueError

__all__ = [
    "CAPTURE_ENV_VAR",
    "DEBUG_ENV_VAR",
    "DIGEST_KEY_ENV_VAR",
    "HTTPS_PROXY_ENV_VAR",
    "HTTP_PROXY_ENV_VAR",
    "LOGS_EXPORTER_ENV_VAR",
    "METRICS_EXPORTER_ENV_VAR",
    "NO_PROXY_ENV_VAR",
    "OTLP_BSP_MAX_EXPORT_BATCH_SIZE_ENV_VAR",
    "OTLP_BSP_MAX_QUEUE_SIZE_ENV_VAR",
    "OTLP_BSP_SCHEDULE_DELAY_ENV_VAR",
    "OTLP_ENDPOINT_ENV_VAR",
    "OTLP_HEADERS_ENV_VAR",
    "OTLP_LOGS_HEADERS_ENV_VAR",
    "OTLP_LOGS_PROTOCOL_ENV_VAR",
    "OTLP_METRICS_HEADERS_ENV_VAR",
    "OTLP_METRICS_PROTOCOL_ENV_VAR",
    "OTLP_PROTOCOL_ENV_VAR",
    "OTLP_TIMEOUT_ENV_VAR",
    "OTLP_TRACES_ENDPOINT_ENV_VAR",
    "OTLP_TRACES_HEADERS_ENV_VAR",
    "OTLP_TRACES_PROTOCOL_ENV_VAR",
    "OTLP_TRACES_TIMEOUT_ENV_VAR",
    "RESOURCE_ATTRIBUTES_ENV_VAR",
    "SERVICE_ENV_VAR",
    "STORE_PASSWORD_ENV_VAR",
    "STORE_PASSWORD_FILE_ENV_VAR",
    "STORE_USER_ENV_VAR",
    "TIKTOKEN_CACHE_DIR_ENV_VAR",
    "TIKTOKEN_LEGACY_CACHE_DIR_ENV_VAR",
    "VARIABLES",
    "Variable",
    "check_service",
    "environment_used",
    "proxy_for",
    "read",
    "resolve_digest_key",
    "resolve_service",
    "resolve_store_credentials",
    "use_environment",
    "warn_invalid",
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
#: Set (to anything not empty) to see the traceback of the CLI's internal errors.
DEBUG_ENV_VAR: Final = "CUPELLATION_DEBUG"
#: OpenTelemetry's variable naming the service (the resource's ``service.name``): the
#: service a run is recorded under when nothing closer names it.
SERVICE_ENV_VAR: Final = "OTEL_SERVICE_NAME"
#: OpenTelemetry's resource attributes (``key=value,...``, values percent-encoded);
#: its ``service.name`` is read after :data:`SERVICE_ENV_VAR`, as the SDK does.
RESOURCE_ATTRIBUTES_ENV_VAR: Final = "OTEL_RESOURCE_ATTRIBUTES"
#: The OTLP base URL (``/v1/traces`` and the like appended over HTTP).
OTLP_ENDPOINT_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
#: The OTLP traces URL, used as it is; wins over :data:`OTLP_ENDPOINT_ENV_VAR`.
OTLP_TRACES_ENDPOINT_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
#: The OTLP protocol of every signal: ``http/protobuf`` or ``grpc``.
OTLP_PROTOCOL_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
#: The OTLP protocol of traces; wins over :data:`OTLP_PROTOCOL_ENV_VAR`.
OTLP_TRACES_PROTOCOL_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
#: The OTLP protocol of metrics; wins over :data:`OTLP_PROTOCOL_ENV_VAR`.
OTLP_METRICS_PROTOCOL_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
#: The OTLP protocol of log records; wins over :data:`OTLP_PROTOCOL_ENV_VAR`.
OTLP_LOGS_PROTOCOL_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
#: The OTLP export timeout in seconds (the Python SDK's reading).
OTLP_TIMEOUT_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_TIMEOUT"
#: The OTLP traces export timeout; wins over :data:`OTLP_TIMEOUT_ENV_VAR`.
OTLP_TRACES_TIMEOUT_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
#: OTLP request headers (``key=value,...``) of every signal.
OTLP_HEADERS_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_HEADERS"
#: OTLP request headers of traces; win over :data:`OTLP_HEADERS_ENV_VAR`.
OTLP_TRACES_HEADERS_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
#: OTLP request headers of metrics; win over :data:`OTLP_HEADERS_ENV_VAR`.
OTLP_METRICS_HEADERS_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
#: OTLP request headers of log records; win over :data:`OTLP_HEADERS_ENV_VAR`.
OTLP_LOGS_HEADERS_ENV_VAR: Final = "OTEL_EXPORTER_OTLP_LOGS_HEADERS"
#: The log exporters to use; ``otlp`` among them turns ``setup_otlp``'s logs on.
LOGS_EXPORTER_ENV_VAR: Final = "OTEL_LOGS_EXPORTER"
#: The metric exporters to use; ``otlp`` among them turns ``setup_otlp``'s metrics on.
METRICS_EXPORTER_ENV_VAR: Final = "OTEL_METRICS_EXPORTER"
#: The batch span processor's queue size.
OTLP_BSP_MAX_QUEUE_SIZE_ENV_VAR: Final = "OTEL_BSP_MAX_QUEUE_SIZE"
#: The batch span processor's largest export batch.
OTLP_BSP_MAX_EXPORT_BATCH_SIZE_ENV_VAR: Final = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
#: The batch span processor's delay between exports, in milliseconds.
OTLP_BSP_SCHEDULE_DELAY_ENV_VAR: Final = "OTEL_BSP_SCHEDULE_DELAY"
#: The proxy of ``http://`` requests (also ``http_proxy``), read as :mod:`urllib` does.
HTTP_PROXY_ENV_VAR: Final = "HTTP_PROXY"
#: The proxy of ``https://`` requests (also ``https_proxy``).
HTTPS_PROXY_ENV_VAR: Final = "HTTPS_PROXY"
#: Hosts reached without a proxy (also ``no_proxy``).
NO_PROXY_ENV_VAR: Final = "NO_PROXY"
#: tiktoken's cache folder ("" switches its cache off), searched for a checked copy of
#: a rank file the ``tokens`` extra does not ship.
TIKTOKEN_CACHE_DIR_ENV_VAR: Final = "TIKTOKEN_CACHE_DIR"
#: tiktoken's older name for its cache folder, read after :data:`TIKTOKEN_CACHE_DIR_ENV_VAR`.
TIKTOKEN_LEGACY_CACHE_DIR_ENV_VAR: Final = "DATA_GYM_CACHE_DIR"

Owner = Literal["cupellation", "OpenTelemetry", "tiktoken", "proxy"]
_OWNERS: Final = get_args(Owner)


@dataclass(frozen=True, slots=True, kw_only=True)
class Variable:
    """One environment variable cupellation reads: its name, whose convention it is,
    what it sets and which part of cupellation reads it."""

    name: str
    """The variable's name, as set in the environment."""
    owner: Owner
    """Whose variable it is: cupellation's own, or one it reads as its owner does."""
    meaning: str
    """What it sets, in one sentence."""
    read_by: str
    """The parts of cupellation that read it."""

    def __post_init__(self) -> None:
        for field in ("name", "meaning", "read_by"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise InvalidTypeError(field, value, "text")
            if not value.strip():
                raise InvalidValueError(field, value, "must not be empty")
        if self.owner not in _OWNERS:
            raise InvalidValueError("owner", self.owner, f"must be one of {_OWNERS}")


_SINKS = "sinks (AuditLog, StructlogSink, SpanCollector, LogRecordCollector)"
_FETCH = "the trace readers' HTTP client (report --from, store load --from)"
_OTLP = "setup_otlp, otlp_span_exporter, otlp_log_exporter, the CLI's --otlp"

#: Every variable cupellation reads, in the documentation's order. :func:`read`
#: refuses any other name, so a new variable is declared here or not read at all.
VARIABLES: Final[tuple[Variable, ...]] = (
    Variable(name=CAPTURE_ENV_VAR, owner="cupellation", read_by=_SINKS,
             meaning="The content capture (full, hash or none) of a sink built without "
                     "content_capture=."),
    Variable(name=DIGEST_KEY_ENV_VAR, owner="cupellation",
             read_by=f"{_SINKS}, every reader of runs",
             meaning="The key that makes run digests HMAC-SHA256 when no digest_key= "
                     "is given."),
    Variable(name=STORE_USER_ENV_VAR, owner="cupellation", read_by="cupellation.store",
             meaning="The user name of a ClickHouse server store."),
    Variable(name=STORE_PASSWORD_ENV_VAR, owner="cupellation", read_by="cupellation.store",
             meaning="The password of a ClickHouse server store (a store URL never "
                     "carries one)."),
    Variable(name=STORE_PASSWORD_FILE_ENV_VAR, owner="cupellation",
             read_by="cupellation.store",
             meaning="A file whose first line is the store's password; wins over "
                     "CUPELLATION_STORE_PASSWORD."),
    Variable(name=DEBUG_ENV_VAR, owner="cupellation", read_by="the cupellation command",
             meaning="Not empty: an internal error shows its traceback."),
    Variable(name=SERVICE_ENV_VAR, owner="OpenTelemetry",
             read_by=f"{_SINKS}, setup_otlp",
             meaning="The service a run is recorded under when neither the run, the sink "
                     "nor an SDK provider names one."),
    Variable(name=RESOURCE_ATTRIBUTES_ENV_VAR, owner="OpenTelemetry",
             read_by=f"{_SINKS}, setup_otlp, the CLI's --otlp",
             meaning="Its service.name, after OTEL_SERVICE_NAME; its "
                     "openinference.project.name in the CLI's read-back hint."),
    Variable(name=OTLP_ENDPOINT_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="The OTLP base URL."),
    Variable(name=OTLP_TRACES_ENDPOINT_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="The OTLP traces URL, used as it is."),
    Variable(name=OTLP_PROTOCOL_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="http/protobuf or grpc, for every signal."),
    Variable(name=OTLP_TRACES_PROTOCOL_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="The protocol of traces."),
    Variable(name=OTLP_METRICS_PROTOCOL_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="The protocol of metrics."),
    Variable(name=OTLP_LOGS_PROTOCOL_ENV_VAR, owner="OpenTelemetry",
             read_by="setup_otlp, otlp_log_exporter", meaning="The protocol of log records."),
    Variable(name=OTLP_TIMEOUT_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="The export timeout in seconds, bounding shutdown()."),
    Variable(name=OTLP_TRACES_TIMEOUT_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="The traces export timeout in seconds."),
    Variable(name=OTLP_HEADERS_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="Request headers (key=value,...) that given headers= are merged "
                     "over."),
    Variable(name=OTLP_TRACES_HEADERS_ENV_VAR, owner="OpenTelemetry", read_by=_OTLP,
             meaning="Request headers of traces."),
    Variable(name=OTLP_METRICS_HEADERS_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="Request headers of metrics."),
    Variable(name=OTLP_LOGS_HEADERS_ENV_VAR, owner="OpenTelemetry",
             read_by="setup_otlp, otlp_log_exporter", meaning="Request headers of log records."),
    Variable(name=LOGS_EXPORTER_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="otlp among its names: setup_otlp builds a LoggerProvider."),
    Variable(name=METRICS_EXPORTER_ENV_VAR, owner="OpenTelemetry", read_by="setup_otlp",
             meaning="otlp among its names: setup_otlp builds a MeterProvider."),
    Variable(name=OTLP_BSP_MAX_QUEUE_SIZE_ENV_VAR, owner="OpenTelemetry",
             read_by="DropCountingSpanProcessor", meaning="The span queue's size."),
    Variable(name=OTLP_BSP_MAX_EXPORT_BATCH_SIZE_ENV_VAR, owner="OpenTelemetry",
             read_by="DropCountingSpanProcessor", meaning="The largest export batch."),
    Variable(name=OTLP_BSP_SCHEDULE_DELAY_ENV_VAR, owner="OpenTelemetry",
             read_by="DropCountingSpanProcessor",
             meaning="Milliseconds between scheduled exports."),
    Variable(name=HTTP_PROXY_ENV_VAR, owner="proxy", read_by=_FETCH,
             meaning="The proxy of http:// requests (http_proxy too, as urllib reads it)."),
    Variable(name=HTTPS_PROXY_ENV_VAR, owner="proxy", read_by=_FETCH,
             meaning="The proxy of https:// requests (https_proxy too)."),
    Variable(name=NO_PROXY_ENV_VAR, owner="proxy", read_by=_FETCH,
             meaning="Hosts reached directly, not through the proxy (no_proxy too)."),
    Variable(name=TIKTOKEN_CACHE_DIR_ENV_VAR, owner="tiktoken",
             read_by="the chat token counter",
             meaning="tiktoken's cache folder, searched for a checked rank file."),
    Variable(name=TIKTOKEN_LEGACY_CACHE_DIR_ENV_VAR, owner="tiktoken",
             read_by="the chat token counter",
             meaning="tiktoken's older name for its cache folder."),
)

_DECLARED: Final = frozenset(variable.name for variable in VARIABLES)
_SERVICE_NAME: Final = "service.name"
#: Whether :func:`read` looks at the environment (one switch for the process).
_use_environment = [True]


def use_environment(enabled: bool) -> None:
    """Turn the reading of every variable in :data:`VARIABLES` on (the default) or
    off, for the whole process (like httpx's ``trust_env``): off, :func:`read`
    answers None and every default is the documented one.

    Raises :class:`~cupellation.exceptions.InvalidTypeError` unless ``enabled`` is a
    bool.
    """
    if not isinstance(enabled, bool):
        raise InvalidTypeError("enabled", enabled, "a bool")
    _use_environment[0] = enabled


def environment_used() -> bool:
    """Whether :func:`read` looks at the environment (see :func:`use_environment`)."""
    return _use_environment[0]


def read(name: str) -> str | None:
    """The value of the environment variable ``name`` (as set, not stripped), or None
    when it is unset or when environment reading is off.

    The one place cupellation reads the environment. Raises
    :class:`~cupellation.exceptions.InvalidValueError` for a name :data:`VARIABLES`
    does not declare, so that every variable read is documented.
    """
    if name not in _DECLARED:
        raise InvalidValueError("name", name, "is not a variable cupellation.settings "
                                "declares in VARIABLES")
    if not _use_environment[0]:
        return None
    return os.environ.get(name)


def proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL for a request to ``host`` over ``scheme`` (``http``/``https``)
    as the proxy variables name it (read by :mod:`urllib`, ``NO_PROXY`` honoured), or
    None: a direct connection. Always None with environment reading off."""
    if not _use_environment[0]:
        return None
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and urllib.request.proxy_bypass(host):
        return None
    return proxy or None


def _text(name: str) -> str:
    """:func:`read`, with unset as empty text."""
    return read(name) or ""


_logger = logging.getLogger("cupellation")
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def warn_invalid(variable: str, value: str, problem: str) -> None:
    """Warn once per (variable, value), through :mod:`warnings` and the ``cupellation``
    logger, that ``variable=value`` cannot be used (``problem`` says why and what
    applies instead): how every invalid variable is reported."""
    with _warned_lock:
        if (variable, value) in _warned:
            return
        _warned.add((variable, value))
    message = f"cupellation: {variable}={value!r} {problem}"
    warnings.warn(message, RuntimeWarning, stacklevel=4)
    _logger.warning("%s", message)


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
    text = _text(DIGEST_KEY_ENV_VAR)
    if not text:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        warn_invalid(DIGEST_KEY_ENV_VAR, "<not UTF-8>", "cannot be read as UTF-8; digests are "
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
    named = _text(SERVICE_ENV_VAR)
    if named:  # taken as it is, as the SDK takes it
        return named
    return _resource_service(_text(RESOURCE_ATTRIBUTES_ENV_VAR))


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
    user = _text(STORE_USER_ENV_VAR) or None
    path = _text(STORE_PASSWORD_FILE_ENV_VAR)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                first = handle.readline()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidValueError(STORE_PASSWORD_FILE_ENV_VAR, path,
                                    f"cannot be read ({type(exc).__name__})") from None
        return user, first.rstrip("\r\n") or None
    return user, _text(STORE_PASSWORD_ENV_VAR) or None

"""Opening a store: the URL, the credentials, the one chDB engine of a process, and the
tables created when absent."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from ..exceptions import (
    InvalidTypeError,
    InvalidValueError,
    StoreError,
    StoreInUseError,
)
from ..settings import (
    STORE_PASSWORD_ENV_VAR,
    STORE_PASSWORD_FILE_ENV_VAR,
    resolve_store_credentials,
)
from ._schema import LOGS_TABLE, TRACES_TABLE, check_columns, logs_ddl, traces_ddl

__all__ = ["StoreLocation", "StoreSession", "open_session", "parse_store_url", "short_error"]

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCHEMES: Final = ("chdb", "http", "https")
_INSTALL_HINT: Final = "the store needs clickhouse-connect: pip install 'cupellation[store]'"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreLocation:
    """Where a store is: ``scheme`` ``chdb`` (``path``: the embedded engine's
    directory) or ``http``/``https`` (``host``, ``port``); ``database`` holds the
    tables. ``url`` is the URL as given (it never holds a password)."""

    url: str
    scheme: str
    database: str
    path: str | None = None
    host: str | None = None
    port: int | None = None
    username: str | None = None

    @property
    def embedded(self) -> bool:
        """True for an in-process chDB store."""
        return self.scheme == "chdb"


def _database(name: str, url: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise InvalidValueError("url", url, f"names the database {name!r}: a database "
                                "name is letters, digits and underscores")
    return name


def parse_store_url(url: str, *, database: str | None = None) -> StoreLocation:
    """Read a store URL: ``chdb:///path/to/dir`` (``?database=NAME`` optional) or
    ``http(s)://host[:port]/database``. ``database`` wins over the URL's.

    Raises :class:`~cupellation.exceptions.InvalidValueError` naming ``url`` for
    another scheme, a missing path or host, a bad database name, or a URL carrying a
    password (credentials come from the environment only).
    """
    if not isinstance(url, str):
        raise InvalidTypeError("url", url, "a store URL (chdb:///dir or http(s)://host)")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidValueError("url", url, "must start chdb://, http:// or https://")
    if parts.password is not None:
        raise InvalidValueError("url", parts._replace(netloc="***").geturl(),
                                f"must not carry a password: set {STORE_PASSWORD_ENV_VAR} "
                                f"or {STORE_PASSWORD_FILE_ENV_VAR}")
    query = parse_qs(parts.query)
    if scheme == "chdb":
        path = (parts.netloc + parts.path) if parts.netloc else parts.path
        if not path:
            raise InvalidValueError("url", url, "names no directory (chdb:///path/to/dir)")
        name = database or (query.get("database") or ["default"])[0]
        return StoreLocation(url=url, scheme=scheme, database=_database(name, url),
                             path=os.path.abspath(path))
    if not parts.hostname:
        raise InvalidValueError("url", url, "names no host (http://host:8123/database)")
    try:
        port = parts.port or (8443 if scheme == "https" else 8123)
    except ValueError:
        raise InvalidValueError("url", url, "has a port that is not a number") from None
    name = database or parts.path.strip("/") or "default"
    return StoreLocation(url=url, scheme=scheme, database=_database(name, url),
                         host=parts.hostname, port=port, username=parts.username)


class _Engine:
    """The process's one chDB engine: the path open, and how many sessions use it."""

    lock = threading.Lock()
    path: str | None = None
    users = 0


def _claim_engine(path: str) -> None:
    real = os.path.realpath(path)
    with _Engine.lock:
        if _Engine.users and _Engine.path != real:
            raise StoreInUseError(path, _Engine.path or "")
        _Engine.path = real
        _Engine.users += 1


def _release_engine() -> None:
    with _Engine.lock:
        _Engine.users = max(0, _Engine.users - 1)
        if not _Engine.users:
            _Engine.path = None


def _connect(location: StoreLocation) -> Any:
    try:
        import clickhouse_connect  # noqa: PLC0415 - the store extra is optional
    except ImportError:  # pragma: no cover - the store extra installs it
        raise StoreError(_INSTALL_HINT) from None
    if location.embedded:
        try:
            os.makedirs(location.path or ".", exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open the store {location.url}: its directory cannot "
                             f"be made ({exc.strerror or exc})") from None
        return clickhouse_connect.get_client(dsn=f"chdb://{location.path}")
    user, password = resolve_store_credentials()
    return clickhouse_connect.get_client(
        host=location.host, port=location.port, interface=location.scheme,
        username=user or location.username or "default", password=password or "",
        database=location.database)


class StoreSession:
    """An open connection to a store's database (see :class:`~cupellation.store.Store`,
    which builds on it): SQL in, rows out, every driver error as a
    :class:`~cupellation.exceptions.StoreError`."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self.database = location.database
        self._closed = False
        self._version: tuple[int, ...] | None = None
        if location.embedded:
            _claim_engine(location.path or "")
        try:
            self.client = _connect(location)
        except StoreError:
            self._release()
            raise
        except Exception as exc:
            self._release()
            raise StoreError(f"cannot open the store {location.url}: {short_error(exc)}") from None

    def _release(self) -> None:
        if self.location.embedded and not self._closed:
            _release_engine()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def server_version(self) -> tuple[int, ...]:
        """The ClickHouse release the store runs, such as ``(26, 9, 2, 1)`` (asked once)."""
        if self._version is None:
            text = str(self.rows("SELECT version()")[0][0])
            self._version = tuple(int(part) for part in text.split(".") if part.isdigit())
        return self._version

    def table(self, name: str) -> str:
        """``database.name``, quoted."""
        return f"`{self.database}`.`{name}`"

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        """Run a statement (parameters bound by the server: ``{name:Type}``)."""
        self._check_open()
        try:
            return self.client.command(sql, parameters=dict(parameters or {}))
        except Exception as exc:
            raise StoreError(f"{self.location.url}: {short_error(exc)}") from None

    def rows(self, sql: str, parameters: Mapping[str, Any] | None = None
             ) -> Sequence[Sequence[Any]]:
        """The rows of a query (parameters bound by the server)."""
        self._check_open()
        try:
            result: Sequence[Sequence[Any]] = self.client.query(
                sql, parameters=dict(parameters or {})).result_rows
        except Exception as exc:
            raise StoreError(f"{self.location.url}: {short_error(exc)}") from None
        return result

    def insert(self, table: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]
               ) -> None:
        """Insert ``rows`` (values in ``columns`` order) into ``table`` of the database."""
        self._check_open()
        try:
            self.client.insert(table, rows, column_names=list(columns),
                               database=self.database)
        except Exception as exc:
            raise StoreError(f"{self.location.url}: {short_error(exc)}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.location.url} is closed")

    def ensure_tables(self) -> None:
        """Create the database, ``otel_logs`` and ``otel_traces`` when absent; refuse
        tables in another shape (:class:`~cupellation.exceptions.StoreSchemaError`)."""
        self.command(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        for table in (LOGS_TABLE, TRACES_TABLE):
            columns = self.rows("SELECT name, type FROM system.columns WHERE database = "
                                "{db:String} AND table = {t:String}",
                                {"db": self.database, "t": table})
            if columns:
                check_columns(table, [(str(n), str(t)) for n, t in columns])
            elif table == LOGS_TABLE:  # its text index depends on the server's release
                self.command(logs_ddl(self.table(table), version=self.server_version))
            else:
                self.command(traces_ddl(self.table(table)))

    def close(self) -> None:
        """Close the connection (and, for chDB, free the engine for another path)."""
        if self._closed:
            return
        with contextlib.suppress(Exception):  # a close that fails leaves nothing to undo
            self.client.close()
        self._release()

    def __enter__(self) -> StoreSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def open_session(url: str, *, database: str | None = None) -> StoreSession:
    """Open ``url`` (see :func:`parse_store_url`) and create the tables when absent."""
    session = StoreSession(parse_store_url(url, database=database))
    try:
        session.ensure_tables()
    except BaseException:
        session.close()
        raise
    return session


def short_error(exc: BaseException) -> str:
    """A driver error in one line (ClickHouse's messages carry a stack trace)."""
    text = " ".join(str(exc).split())
    cut = text.find(" Stack trace")
    text = text if cut < 0 else text[:cut]
    return text if len(text) <= 300 else text[:297] + "..."

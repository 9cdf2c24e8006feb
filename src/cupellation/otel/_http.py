"""The bounded HTTP(S) client under :func:`~cupellation.otel.fetch_spans`.

A fetch talks to one backend a user named, often with a credential, and reads
whatever that backend (or whoever answers in its place) sends back. So that the
answer cannot be turned against the user:

- **One deadline for the whole fetch.** Every socket operation (connect, each send,
  each receive of at most one buffer) first checks a monotonic deadline and gets the
  time left as its timeout, so a server sending one byte every few seconds is cut
  off when the fetch's time is up, not when each read's is.
- **Bounded answers.** A body is read in chunks and refused past ``max_body_bytes``
  (before reading, when its ``Content-Length`` says so); requests are counted and
  refused past ``max_requests``. Memory stays bounded by the limit.
- **Redirects within the origin only.** urllib's automatic redirects would carry the
  headers (the credential) to any host a ``Location`` names; here a redirect is
  followed only to the same scheme, host and port, or from ``http`` on its default
  port to ``https`` on its default port of the same host, at most
  :data:`MAX_REDIRECTS` times. Anything else is refused, naming the target, so no
  header is ever sent to another origin.
- **Only http and https**, TLS verified unless the caller says ``verify=False``.
- **Every malformed answer is one error**: ``http.client``'s exceptions (bad status
  line, HTTP/0.9, too many or too long headers, a short body, bad chunked encoding)
  become :class:`~cupellation.exceptions.MalformedAnswerError`.

A bound reached raises :class:`Stop`, which the fetch turns into a
:class:`~cupellation.exceptions.FetchLimitError` or, when part of the data was read,
a :class:`~cupellation.exceptions.PartialFetchError`.
"""

from __future__ import annotations

import base64
import http.client
import io
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from ..exceptions import BackendError, MalformedAnswerError, RedirectRefusedError
from ..settings import proxy_for

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_REQUESTS",
    "DEFAULT_TIMEOUT",
    "MAX_REDIRECTS",
    "Client",
    "Deadline",
    "Limits",
    "Stop",
    "redirect_allowed",
    "shown_url",
]

#: Seconds one whole fetch may take, by default.
DEFAULT_TIMEOUT: Final = 30.0
#: The largest answer read, by default (256 MiB).
DEFAULT_MAX_BODY_BYTES: Final = 256 * 1024 * 1024
#: The most requests one fetch makes, by default (pages, trace ids and redirects).
DEFAULT_MAX_REQUESTS: Final = 10_000
#: The most redirects followed for one request.
MAX_REDIRECTS: Final = 5
_CHUNK: Final = 64 * 1024
_HINT_BYTES: Final = 300
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: The most headers an answer may carry (http.client's default bound).
_MAX_HEADERS: Final = 100
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})


class Stop(Exception):
    """A bound of the fetch was reached: ``limit`` is ``"timeout"``,
    ``"max_body_bytes"`` or ``"max_requests"``; ``message`` says it in words."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The bounds of one fetch: its whole duration (seconds), one answer's size, the
    number of requests, whether TLS certificates are checked, and the clock the
    deadline is read from (monotonic seconds; injectable for tests)."""

    timeout: float
    max_body_bytes: int
    max_requests: int
    verify: bool
    clock: Callable[[], float]


class Deadline:
    """The moment a fetch must be over, on a monotonic ``clock``."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        """Seconds left; :class:`Stop` when none are."""
        left = self._end - self._clock()
        if left <= 0:
            raise Stop("timeout", f"the fetch ran past its deadline of {self.seconds:g} s "
                                  "(--timeout)")
        return left

    def passed(self) -> bool:
        """Whether the deadline is behind us."""
        return self._end - self._clock() <= 0


class _GuardedSocket:
    """A connected socket whose every send and receive first checks the deadline and
    takes the time left as its timeout; what http.client reads goes through it."""

    def __init__(self, sock: Any, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._deadline.remaining())
        self._sock.sendall(data)

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._deadline.remaining())
        return int(self._sock.recv_into(buffer))

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        # Buffered over a raw reader that is one guarded receive per call: readline and
        # read(n) loop over it, so the deadline is checked between every two receives.
        return io.BufferedReader(_GuardedReader(self))

    def close(self) -> None:
        # http.client closes its socket while the answer is still to be read from it
        # (a socket's own makefile keeps the descriptor open for the reader): the
        # descriptor is closed by release(), once the exchange is over.
        pass

    def release(self) -> None:
        """Close the socket for good."""
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _GuardedReader(io.RawIOBase):
    """The raw reader of a :class:`_GuardedSocket` (one receive per ``readinto``)."""

    def __init__(self, sock: _GuardedSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


class _Guarding:
    """What both connections add to http.client's: the connection is made within the
    deadline, and its socket is wrapped so that every read and write checks it."""

    _deadline: Deadline
    _guarded: _GuardedSocket | None
    timeout: float | None
    sock: Any

    def connect(self) -> None:
        self.timeout = self._deadline.remaining()
        super().connect()  # type: ignore[misc]
        self._guarded = _GuardedSocket(self.sock, self._deadline)
        self.sock = cast(Any, self._guarded)

    def release(self) -> None:
        """Close the connection and its socket for good."""
        self.close()  # type: ignore[attr-defined]
        if self._guarded is not None:
            self._guarded.release()


class _Plain(_Guarding, http.client.HTTPConnection):
    """An HTTP connection that connects within the deadline and guards its socket."""

    def __init__(self, host: str, port: int, deadline: Deadline) -> None:
        super().__init__(host, port, timeout=deadline.remaining())
        self._deadline = deadline
        self._guarded = None


class _Secure(_Guarding, http.client.HTTPSConnection):
    """The same over TLS (the handshake inside the deadline too)."""

    def __init__(self, host: str, port: int, deadline: Deadline,
                 context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=deadline.remaining(), context=context)
        self._deadline = deadline
        self._guarded = None


def shown_url(url: str) -> str:
    """``url`` without credentials in it (user:password@) or its query."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host += f":{parts.port}"
    except ValueError:  # a port that is not a number: show no host rather than fail
        return "(an invalid URL)"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def redirect_allowed(source: str, target: str) -> bool:
    """Whether a redirect from ``source`` to ``target`` (absolute URLs) is followed:
    the same origin (scheme, host, port), or ``http`` on its default port to ``https``
    on its default port of the same host. Only ``http`` and ``https`` targets."""
    try:
        was, will = _origin(source), _origin(target)
    except ValueError:  # a port that is not a number
        return False
    if will[0] not in _DEFAULT_PORTS or not will[1]:
        return False
    return was == will or (was == ("http", was[1], 80) and will == ("https", was[1], 443))


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    location: str | None
    body: bytes


class Client:
    """GETs and POSTs of JSON against one backend, within one fetch's :class:`Limits`;
    failures as one line (a :class:`~cupellation.exceptions.BackendError`)."""

    def __init__(self, backend: str, url: str, headers: Mapping[str, str],
                 limits: Limits) -> None:
        try:
            parts = urllib.parse.urlsplit(url)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            port_ok = False
        if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname or not port_ok:
            raise BackendError(f"{backend}: {shown_url(url)!r} is not an http:// or "
                               "https:// URL")
        self.backend = backend
        self.base = url.rstrip("/")
        self.headers = dict(headers)
        self.limits = limits
        self.deadline = Deadline(limits.timeout, limits.clock)
        self.requests = 0
        self._context = ssl.create_default_context()
        if not limits.verify:
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE

    def get(self, path: str, query: Mapping[str, str] | str | None = None, *,
            missing: Callable[[str], str] | None = None) -> bytes | None:
        """The answer's bytes; None for a 404 when ``missing`` is None (else the
        BackendError ``missing(body)`` words)."""
        text = urllib.parse.urlencode(query) if isinstance(query, Mapping) else query
        return self._send("GET", self.base + path + ("?" + text if text else ""), None,
                          missing)

    def post(self, path: str, body: Mapping[str, Any], *,
             missing: Callable[[str], str] | None = None) -> bytes | None:
        """The answer to a JSON POST, as :meth:`get`."""
        import json  # noqa: PLC0415 - only the POSTs need it

        return self._send("POST", self.base + path, json.dumps(body).encode("utf-8"),
                          missing)

    def _send(self, method: str, url: str, data: bytes | None,
              missing: Callable[[str], str] | None) -> bytes | None:
        """One request and the redirects it may follow; the answer judged."""
        for hop in range(MAX_REDIRECTS + 1):
            answer = self._exchange(method, url, data)
            if answer.status not in _REDIRECT_STATUSES:
                return self._judge(answer, shown_url(url), missing)
            if answer.location is None:
                raise MalformedAnswerError(f"{self.backend} at {shown_url(url)} answered "
                                           f"HTTP {answer.status} without a Location")
            target = urllib.parse.urljoin(url, answer.location.strip())
            shown = shown_url(target)
            if not redirect_allowed(url, target):
                raise RedirectRefusedError(
                    f"{self.backend} at {shown_url(url)} redirected to {shown}: refused "
                    "(redirects are followed within the same scheme, host and port only, "
                    "so that the headers never reach another server)", target=shown)
            if hop == MAX_REDIRECTS:
                raise RedirectRefusedError(
                    f"{self.backend} at {shown_url(url)} redirected more than "
                    f"{MAX_REDIRECTS} times (the last to {shown}): refused", target=shown)
            if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                method, data = "GET", None  # as browsers do; 307 and 308 keep the body
            url = target
        raise AssertionError("unreachable: the loop returns or raises")

    def _judge(self, answer: _Answer, where: str,
               missing: Callable[[str], str] | None) -> bytes | None:
        if 200 <= answer.status < 300:
            return answer.body
        hint = " ".join(answer.body.decode("utf-8", "replace").split())[:200]
        if answer.status in (401, 403):
            raise BackendError(
                f"{self.backend} at {where} refused the request (HTTP {answer.status}): "
                "give its credentials with --header NAME:VALUE")
        if answer.status == 404:
            if missing is None:
                return None
            raise BackendError(missing(hint))
        raise BackendError(f"{self.backend} at {where} answered HTTP {answer.status}"
                           + (f": {hint}" if hint else ""))

    def _count(self) -> None:
        if self.requests >= self.limits.max_requests:
            raise Stop("max_requests", f"the fetch needs more than "
                                       f"{self.limits.max_requests:,} requests "
                                       "(--max-requests)")
        self.requests += 1

    def _exchange(self, method: str, url: str, data: bytes | None) -> _Answer:
        """One request on a connection of its own, its answer read within bounds."""
        self._count()
        where = shown_url(url)
        connection, target, extra = self._connection(url)
        headers = {**self.headers, **extra, "Connection": "close"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            try:
                connection.request(method, target, body=data, headers=headers)
            except ssl.SSLError:  # a ValueError too, when it is the certificate's
                raise
            except (UnicodeError, ValueError, http.client.InvalidURL):
                raise BackendError(f"{self.backend}: a header or the URL holds characters "
                                   "an HTTP request cannot carry (headers are not shown)"
                                   ) from None
            answer = connection.getresponse()
            # http.client's own bound (100) is a module global that other libraries
            # raise on import (clickhouse-connect sets 10,000): keep ours here.
            if len(answer.headers) > _MAX_HEADERS:
                raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")
            location = answer.getheader("Location")
            if 200 <= answer.status < 300:
                body = self._body(answer, where)
            elif answer.status in _REDIRECT_STATUSES:
                body = b""
            else:
                body = _hint(answer)
            return _Answer(answer.status, location, body)
        except ssl.SSLCertVerificationError as error:
            raise BackendError(
                f"cannot reach {self.backend} at {where}: its TLS certificate is not "
                f"trusted ({error.verify_message}); --insecure skips the check, for a "
                "test server with a self-signed certificate") from None
        except (http.client.HTTPException, ValueError) as error:
            # ValueError: http.client's own for a chunk size that is not hexadecimal.
            raise MalformedAnswerError(
                f"{self.backend} at {where} sent a malformed answer "
                f"({type(error).__name__}: {_short(error)})") from None
        except OSError as error:
            if self.deadline.passed():
                raise Stop("timeout", f"the fetch ran past its deadline of "
                                      f"{self.deadline.seconds:g} s (--timeout)") from None
            raise BackendError(f"cannot reach {self.backend} at {where}: "
                               f"{_short(error)}") from None
        finally:
            connection.release()

    def _connection(self, url: str) -> tuple[_Plain | _Secure, str, dict[str, str]]:
        """A connection for ``url`` (through the proxy the environment names, if any),
        the request target to send on it and the headers the proxy needs."""
        parts = urllib.parse.urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        port = parts.port or _DEFAULT_PORTS[scheme]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        # The proxy variables are read at each request, as they are now (urlopen's
        # process-wide opener would keep the first ones it saw).
        proxy = proxy_for(scheme, host)
        if not proxy:
            if scheme == "https":
                return _Secure(host, port, self.deadline, self._context), target, {}
            return _Plain(host, port, self.deadline), target, {}
        through = urllib.parse.urlsplit(proxy if "//" in proxy else f"http://{proxy}")
        auth: dict[str, str] = {}
        if through.username is not None:
            pair = f"{urllib.parse.unquote(through.username)}:" \
                   f"{urllib.parse.unquote(through.password or '')}"
            auth["Proxy-Authorization"] = "Basic " + base64.b64encode(
                pair.encode("utf-8")).decode("ascii")
        proxy_host, proxy_port = through.hostname or "", through.port or 8080
        if scheme == "https":
            connection = _Secure(proxy_host, proxy_port, self.deadline, self._context)
            connection.set_tunnel(host, port, headers=auth)
            return connection, target, {}
        return _Plain(proxy_host, proxy_port, self.deadline), url, auth

    def _body(self, answer: http.client.HTTPResponse, where: str) -> bytes:
        """The whole body, read in chunks, refused past the size limit or short of
        its Content-Length."""
        limit = self.limits.max_body_bytes
        declared = answer.length
        if declared is not None and declared > limit:
            raise Stop("max_body_bytes", f"{where} answered {declared:,} bytes, more than "
                                         f"the limit of {limit:,} (--max-body-bytes)")
        body = bytearray()
        while chunk := answer.read(_CHUNK):
            body += chunk
            if len(body) > limit:
                raise Stop("max_body_bytes", f"{where} answered more than {limit:,} bytes "
                                             "(--max-body-bytes)")
        if declared is not None and len(body) < declared:
            # http.client's read(n) returns short at end of stream without a word.
            raise http.client.IncompleteRead(bytes(body[-20:]), declared - len(body))
        return bytes(body)


def _hint(answer: http.client.HTTPResponse) -> bytes:
    """The start of an error answer's body (only a hint for the message)."""
    try:
        return answer.read(_HINT_BYTES)
    except (http.client.HTTPException, OSError, ValueError):
        return b""


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."

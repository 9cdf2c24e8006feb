"""Loopback servers the remote-fetch tests start: a raw socket server that answers
whatever bytes a test gives it (malformed HTTP, a slow drip), and an HTTP(S) server
whose answers a test routes by path and that records every request it gets."""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["TLS_CERT", "TLS_KEY", "HttpServer", "RawServer", "Recorded", "Step", "drip",
           "raw_server"]

_TLS = Path(__file__).resolve().parent / "data" / "tls"
#: A self-signed certificate for 127.0.0.1 and localhost (tests only), and its key.
TLS_CERT = _TLS / "cert.pem"
TLS_KEY = _TLS / "key.pem"

#: What a raw server sends for a request path: pieces of bytes, each after a pause
#: (seconds), then the connection is closed.
Step = tuple[float, bytes]


def drip(head: bytes, body: bytes, every: float) -> list[Step]:
    """``head`` at once, then ``body`` one byte every ``every`` seconds."""
    return [(0.0, head), *((every, body[at:at + 1]) for at in range(len(body)))]


class RawServer:
    """A TCP server on 127.0.0.1 that reads each request's head and answers
    ``answer(path)`` byte for byte (no HTTP framing of its own), then closes.
    ``paths`` keeps the path of every request."""

    def __init__(self, answer: Callable[[str], Iterable[Step]]) -> None:
        self.answer = answer
        self.paths: list[str] = []
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            head = b""
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    piece = connection.recv(4096)
                    if not piece:
                        return
                    head += piece
                path = head.split(b" ", 2)[1].decode("latin-1") if b" " in head else ""
                self.paths.append(path)
                for pause, data in self.answer(path):
                    if self.stopped.wait(pause):
                        return
                    connection.sendall(data)
            except OSError:  # the client went away (cut off by its deadline)
                return

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.listener.close()


@contextmanager
def raw_server(answer: Callable[[str], Iterable[Step]]) -> Iterator[RawServer]:
    """A :class:`RawServer`, stopped on the way out."""
    server = RawServer(answer)
    try:
        yield server
    finally:
        server.close()


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request an :class:`HttpServer` got: the server's name, the Host header,
    the path and the headers (names lowercased)."""

    server: str
    host: str
    path: str
    headers: dict[str, str]


#: A route: the request path to (status, headers, body).
Route = Callable[[str], tuple[int, dict[str, str], bytes]]


class HttpServer:
    """An ``http.server`` on 127.0.0.1 (TLS with the test certificate when ``tls``)
    answering ``route(path)``; every request is appended to ``log``."""

    def __init__(self, name: str, route: Route, log: list[Recorded], *,
                 tls: bool = False) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                log.append(Recorded(name, self.headers.get("Host", ""),
                                    urllib.parse.urlsplit(self.path).path,
                                    {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = server.route(self.path)
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.do_GET()

            def log_message(self, *args: Any) -> None:
                pass

            def log_error(self, *args: Any) -> None:
                pass

        self.route = route
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(TLS_CERT, TLS_KEY)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

"""Fixtures of the chat tests: no network at all (every socket call fails), and each
test starting with select_messages' cache of conversations empty."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from cupellation.chat import clear_message_cache


class NetworkBlocked(OSError):
    """A test tried to reach the network."""


def _blocked(*args: Any, **kwargs: Any) -> Any:
    raise NetworkBlocked("the chat tests run with the network blocked")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every name lookup and connection fails, so a test passes only if nothing is
    fetched (tiktoken's download included)."""
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
        monkeypatch.setattr(socket, name, _blocked)
    for name in ("connect", "connect_ex", "sendto"):
        monkeypatch.setattr(socket.socket, name, _blocked)


@pytest.fixture(autouse=True)
def _fresh_conversations() -> Iterator[None]:
    """Each test reads its messages afresh (no conversation remembered from another)."""
    clear_message_cache()
    yield
    clear_message_cache()

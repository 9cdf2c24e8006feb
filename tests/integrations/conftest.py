"""Fixtures of the integration tests: each test starts with select_messages' cache of
conversations empty (the network is blocked by the chat tests' fixture, reused)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chat.conftest import no_network  # noqa: F401 - the fixture, used by every test here
from cupellation.chat import clear_message_cache


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    """Each test reads its messages afresh."""
    clear_message_cache()
    yield
    clear_message_cache()

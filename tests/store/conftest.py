"""The store tests' fixtures: one embedded (chDB) directory for the session — chDB runs
one engine per process — and a database of its own for each test, closed after it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from cupellation.store import Store, open_store

_COUNTER = itertools.count()


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's chDB directory."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def store_url(store_dir: Path) -> str:
    """A ``chdb://`` URL naming a fresh database in the session's directory."""
    return f"chdb://{store_dir}?database=t{next(_COUNTER)}"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on a fresh database, closed after the test."""
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()

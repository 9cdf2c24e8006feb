"""Shared fixtures for the pipeline, event and report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The wire format's JSON examples, vendored as fixtures (see its README.md).
SEEDS_DIR = Path(__file__).resolve().parents[1] / "data" / "seeds"


@pytest.fixture
def seeds_dir() -> Path:
    """The folder of the wire format's JSON examples inside the repository."""
    assert SEEDS_DIR.is_dir(), f"expected the vendored seed examples at {SEEDS_DIR}"
    return SEEDS_DIR

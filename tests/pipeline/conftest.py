"""Shared fixtures for the pipeline, event and report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DIR = Path(__file__).resolve().parents[3] / "shared"


@pytest.fixture
def shared_dir() -> Path:
    """The ``shared`` folder beside the repository (seeds and conformance vectors)."""
    assert SHARED_DIR.is_dir(), f"expected the shared folder at {SHARED_DIR}"
    return SHARED_DIR

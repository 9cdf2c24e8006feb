"""The required placing conformance vectors pass, one test per file."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli

from cupellation.conformance import run_vector_file
from cupellation.conformance._placing import build_placer, run_placing_vector
from cupellation.exceptions import ConfigurationError
from cupellation.placing import ChronologicalPlacer, UShapedPlacer

#: The specification's required placing vectors, vendored in tests/data.
PLACING_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required" / "placing"
VECTORS = sorted(PLACING_DIR.glob("*.toml"))


def test_vectors_are_present() -> None:
    """The vendored placing vectors are where the tests expect them (4 files)."""
    assert len(VECTORS) == 4


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.stem)
def test_placing_vector_passes(path: Path) -> None:
    """run_placing_vector accepts the vector (raises nothing) and the runner reports a pass."""
    with path.open("rb") as handle:
        run_placing_vector(tomli.load(handle))
    result = run_vector_file(path)
    assert result.passed, result.reason
    assert result.stage == "placing"


def test_build_placer_names() -> None:
    """build_placer maps the vector names (any ASCII case) to the built-ins."""
    assert build_placer("chronological") == ChronologicalPlacer()
    assert build_placer("U-Shaped") == UShapedPlacer()
    with pytest.raises(ConfigurationError, match="placer"):
        build_placer("random")

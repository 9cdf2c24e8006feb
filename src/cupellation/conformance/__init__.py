"""Running the Cupel conformance vectors (``spec/src/conformance``).

Each vector is a TOML 1.1 file with a ``[test]`` table naming its ``stage``
(``scoring``, ``slicing``, ``placing`` or ``pipeline``). Reading them needs
``tomli`` (``pip install 'cupellation[cli]'``).

>>> summary = run_paths(["conformance/required"])      # doctest: +SKIP
>>> print(f"{summary.passed} passed, {summary.failed} failed")  # doctest: +SKIP
"""

from __future__ import annotations

from ._errors import VectorFailure
from ._runner import (
    ConformanceSummary,
    VectorResult,
    collect_vector_files,
    run_paths,
    run_vector_file,
)

__all__ = [
    "ConformanceSummary",
    "VectorFailure",
    "VectorResult",
    "collect_vector_files",
    "run_paths",
    "run_vector_file",
]

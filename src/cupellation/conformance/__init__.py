"""Running the Cupel conformance vectors (``spec/src/conformance``).

Each vector is a TOML 1.1 file with a ``[test]`` table naming its ``stage``
(``scoring``, ``slicing``, ``placing`` or ``pipeline``). Reading them needs
``tomli`` (``pip install 'cupellation[cli]'``).

A key in a vector's ``[config]`` or ``[budget]`` that the runner does not
know fails that vector with :class:`UnsupportedConfigError` naming the key's
path, rather than being dropped (unknown keys elsewhere are ignored).

>>> summary = run_paths(["conformance/required"])      # doctest: +SKIP
>>> print(f"{summary.passed} passed, {summary.failed} failed")  # doctest: +SKIP
"""

from __future__ import annotations

from ._errors import UnsupportedConfigError, VectorFailure
from ._runner import (
    ConformanceSummary,
    VectorResult,
    collect_vector_files,
    run_paths,
    run_vector_file,
)

__all__ = [
    "ConformanceSummary",
    "UnsupportedConfigError",
    "VectorFailure",
    "VectorResult",
    "collect_vector_files",
    "run_paths",
    "run_vector_file",
]

"""The documentation site's hooks (``scripts/docs_hooks.py``, which mkdocs loads by
path, not as a package) loaded as a module for the tests that check what they write."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["docs_hooks"]

_HOOKS = Path(__file__).resolve().parent.parent / "scripts" / "docs_hooks.py"


def docs_hooks() -> Any:
    """``scripts/docs_hooks.py``, freshly loaded."""
    spec = importlib.util.spec_from_file_location("docs_hooks", _HOOKS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

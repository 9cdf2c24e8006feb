"""The conformance runner's own exceptions, and the key check every builder uses."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["UnsupportedConfigError", "VectorFailure", "check_keys"]


class VectorFailure(Exception):
    """A conformance vector's expectation did not hold; the message says which."""


class UnsupportedConfigError(Exception):
    """A vector's configuration has a key this runner does not know or cannot honour.

    Raised rather than dropping the key: a vector run without part of its
    configuration tests something else, and might pass for the wrong reason.
    ``path`` is where the key is (``config.scorers[0].children[1].wieght``),
    ``owner`` what it was given to (``a 'composite' child entry``) and
    ``known`` the keys that owner takes. Deliberately not a
    :class:`~cupellation.exceptions.ConfigurationError`, so that a vector
    expecting a construction error cannot pass because of it.
    """

    def __init__(self, path: str, owner: str, known: Collection[str],
                 problem: str | None = None) -> None:
        key = path.rpartition(".")[2]
        if problem is None:
            problem = f"is not a setting of {owner}"
            close = difflib.get_close_matches(key.lower(), [k.lower() for k in known], n=1)
            if close:
                suggestion = next(k for k in known if k.lower() == close[0])
                problem += f"; did you mean {suggestion!r}?"
        listed = ", ".join(sorted(known)) if known else "none"
        super().__init__(f"{path}: {problem} (known keys: {listed})")
        self.path = path
        self.owner = owner
        self.known = tuple(sorted(known))


def check_keys(table: Mapping[str, Any], known: Collection[str], path: str, owner: str) -> None:
    """Raise :class:`UnsupportedConfigError` for the first key of ``table`` not in ``known``.

    ``path`` is the table's own path (``config``, ``config.curve``); the key is
    appended to it in the error.
    """
    for key in table:
        if key not in known:
            raise UnsupportedConfigError(f"{path}.{key}", owner, known)

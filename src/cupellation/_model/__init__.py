"""The Cupel data model: ContextItem, ContextKind, ContextSource, ContextBudget,
OverflowStrategy and ScoredItem (``spec/src/data-model``).

Each concept has its module here (``item``, ``budget``, ``names``, ``scored``,
``jsondata``); this package's namespace gathers the names the rest of the
package imports. The wire shapes of ContextItem and ContextBudget are declared
once, in :mod:`cupellation._model.wire`.
"""

from __future__ import annotations

from .budget import ContextBudget, OverflowStrategy, effective_limits
from .item import ContextItem
from .jsondata import (
    EMPTY_METADATA,
    MAX_METADATA_DEPTH,
    check_finite,
    first_wide_int,
    fits_int64,
    format_timestamp,
    freeze_json,
    parse_timestamp,
    thaw_json,
)
from .names import ContextKind, ContextSource, ascii_fold, check_text, listed, tupled
from .scored import CountRequirementShortfall, ScoredItem, ScoredItems, items_tokens

__all__ = [
    "EMPTY_METADATA",
    "MAX_METADATA_DEPTH",
    "ContextBudget",
    "ContextItem",
    "ContextKind",
    "ContextSource",
    "CountRequirementShortfall",
    "OverflowStrategy",
    "ScoredItem",
    "ScoredItems",
    "ascii_fold",
    "check_finite",
    "check_text",
    "effective_limits",
    "first_wide_int",
    "fits_int64",
    "format_timestamp",
    "freeze_json",
    "items_tokens",
    "listed",
    "parse_timestamp",
    "thaw_json",
    "tupled",
]

"""KindScorer (``spec/src/scorers/kind.md``): a weight looked up by item kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self

from .._model import ContextItem, ContextKind
from .._tables import built, child, table
from ..exceptions import ConfigurationError, InvalidTypeError
from ._base import SCORERS, BuiltinScorer, Clock, check_weight

__all__ = ["DEFAULT_KIND_WEIGHTS", "KindScorer"]

#: The specification's default weight map, used when no weights are given.
DEFAULT_KIND_WEIGHTS: Mapping[ContextKind, float] = MappingProxyType({
    ContextKind.SYSTEM_PROMPT: 1.0,
    ContextKind.MEMORY: 0.8,
    ContextKind.TOOL_OUTPUT: 0.6,
    ContextKind.DOCUMENT: 0.4,
    ContextKind.MESSAGE: 0.2,
})


def _kind_key(raw: object) -> ContextKind:
    if isinstance(raw, ContextKind):
        return raw
    if not isinstance(raw, str):
        raise InvalidTypeError("weights key", raw, "a ContextKind or a kind name")
    if not raw.strip():
        raise ConfigurationError("weights key", raw, "must not be empty or whitespace-only")
    return ContextKind(raw)


@SCORERS.register
class KindScorer(BuiltinScorer):
    """The configured weight of an item's ``kind``, 0.0 for a kind not configured.

    ``weights`` maps kinds (``ContextKind`` or plain names) to non-negative
    finite weights; names are matched case-insensitively (ASCII folding), and
    weights above 1.0 are returned as they are. ``None`` (the default) means
    :data:`DEFAULT_KIND_WEIGHTS` (SystemPrompt 1.0, Memory 0.8, ToolOutput
    0.6, Document 0.4, Message 0.2). Absolute: other items do not matter.

    Raises :class:`~cupellation.exceptions.ConfigurationError` for a negative
    or non-finite weight, or two names that differ only in case.

    Table: ``{"type": "kind"}``, plus ``"weights": {kind name: weight}`` when
    they are not the defaults.
    """

    absolute = True
    __slots__ = ("_by_folded", "_unit_weights", "weights")
    type_name = "kind"
    settings = ("weights",)
    weights: Mapping[ContextKind, float]
    #: Whether every weight is at most 1.0 (the defaults are): then every score is a
    #: finite float in ``[0, 1]``, which the pipeline need not check (derived).
    _unit_weights: bool
    #: The weights by ASCII-folded kind name, the lookup ``score_all`` makes (derived).
    _by_folded: dict[str, float]

    def __init__(
        self, weights: Mapping[ContextKind, float] | Mapping[str, float] | None = None
    ) -> None:
        if weights is None:
            object.__setattr__(self, "weights", DEFAULT_KIND_WEIGHTS)
            self._derive()
            return
        if not isinstance(weights, Mapping):
            raise InvalidTypeError("weights", weights, "a mapping of kind to weight, or None")
        normalised: dict[ContextKind, float] = {}
        for raw_kind, raw_weight in weights.items():
            kind = _kind_key(raw_kind)
            if kind in normalised:
                raise ConfigurationError(
                    "weights", raw_kind, f"duplicates kind {kind.value!r} (names ignore case)"
                )
            normalised[kind] = check_weight(f"weights[{kind.value!r}]", raw_weight)
        object.__setattr__(self, "weights", MappingProxyType(normalised))
        self._derive()

    def _derive(self) -> None:
        object.__setattr__(self, "_unit_weights", all(
            weight <= 1.0 for weight in self.weights.values()))
        object.__setattr__(self, "_by_folded", {
            kind.folded: weight for kind, weight in self.weights.items()})

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's kind weight (0.0 when its kind is not configured)."""
        # ContextKind hashes and compares by its ASCII-folded name, so a lookup by
        # that name is the case-insensitive one the specification asks for. Why by
        # the name's string rather than the ContextKind: its hash is a Python method,
        # a str's is cached in C (82 items: 5-7 against 23-26 us).
        get = self._by_folded.get
        try:
            return [get(item.kind._folded, 0.0) for item in items]
        except AttributeError:  # a kind that is no ContextKind (an item subclass's)
            by_kind = self.weights.get
            return [by_kind(item.kind, 0.0) for item in items]

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "kind"}`` plus ``weights`` when they are not the defaults."""
        out: dict[str, Any] = {"type": self.type_name}
        if self.weights is not DEFAULT_KIND_WEIGHTS:
            out["weights"] = {kind.value: weight for kind, weight in self.weights.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The kind scorer a table describes (without ``weights``: the defaults)."""
        data = SCORERS.read(cls, data, path)
        weights = data.get("weights")
        if weights is not None:
            weights = table(weights, child(path, "weights"))
        return built(path, lambda: cls(weights))

    def _value(self) -> tuple[Any, ...]:
        # The defaults are a setting of their own: KindScorer() writes no weights.
        if self.weights is DEFAULT_KIND_WEIGHTS:
            return (None,)
        return (frozenset(self.weights.items()),)

    def __reduce__(self) -> tuple[type[KindScorer], tuple[dict[ContextKind, float] | None]]:
        # MappingProxyType cannot be pickled; rebuild from the weights instead.
        if self.weights is DEFAULT_KIND_WEIGHTS:
            return (KindScorer, (None,))
        return (KindScorer, (dict(self.weights),))

    def __repr__(self) -> str:
        if self.weights is DEFAULT_KIND_WEIGHTS:
            return "KindScorer()"
        shown = ", ".join(f"{kind.value!r}: {weight!r}" for kind, weight in self.weights.items())
        return f"KindScorer(weights={{{shown}}})"

"""MetadataTrustScorer and MetadataKeyScorer (``spec/src/scorers/metadata-trust.md``,
``spec/src/scorers/metadata-key.md``): scores read from an item's metadata."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

from .._model import ContextItem
from .._tables import built, child, text_value
from ..exceptions import InvalidTypeError
from ._base import SCORERS, BuiltinScorer, Clock, check_unit_interval, check_weight
from ._reflexive import clamp_unit

__all__ = ["TRUST_KEY", "MetadataKeyScorer", "MetadataTrustScorer"]

#: The reserved metadata key MetadataTrustScorer reads.
TRUST_KEY = "cupel:trust"

# Standard float64 text as Rust's str::parse::<f64> accepts it: optional
# sign, decimal digits with an optional point and exponent, or inf /
# infinity / nan in any case. Unlike Python's float(), no surrounding
# whitespace and no digit-group underscores.
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])"
)


def parse_trust(raw: Any) -> float | None:
    """The float64 a ``cupel:trust`` value stands for, or ``None`` when it is unusable.

    A string is parsed as decimal text; a real number (not a bool) is used as
    it is; anything else, unparseable text, and non-finite values are ``None``.
    """
    if isinstance(raw, str):
        if _FLOAT_TEXT.fullmatch(raw) is None:
            return None
        value = float(raw)
    elif isinstance(raw, numbers.Real) and not isinstance(raw, bool):
        try:
            value = float(raw)
        except (OverflowError, ValueError):
            return None
    else:
        return None
    return value if math.isfinite(value) else None


@SCORERS.register
class MetadataTrustScorer(BuiltinScorer):
    """The caller's trust value from ``metadata["cupel:trust"]``, clamped to ``[0.0, 1.0]``.

    The value may be decimal text (``"0.85"``, the wire format) or a number.
    A missing key, unparseable text (``"high"``, ``""``, ``" 0.5"``), another
    type, or a non-finite value (``"NaN"``, ``"inf"``) give ``default_score``.
    ``default_score`` must lie in ``[0.0, 1.0]``; it defaults to the neutral
    0.5. Absolute: other items do not matter. Table:
    ``{"type": "metadata_trust", "default_score": 0.5}``.
    """

    absolute = True
    __slots__ = ("default_score",)
    type_name = "metadata_trust"
    settings = ("default_score",)
    default_score: float

    def __init__(self, default_score: float = 0.5) -> None:
        object.__setattr__(
            self, "default_score", check_unit_interval("default_score", default_score)
        )

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's trust score."""
        default = self.default_score
        scores: list[float] = []
        append = scores.append
        for item in items:
            metadata = item.metadata
            if TRUST_KEY not in metadata:
                append(default)
                continue
            value = parse_trust(metadata[TRUST_KEY])
            append(default if value is None else clamp_unit(value))
        return scores

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``default_score``."""
        return {"type": self.type_name, "default_score": self.default_score}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The trust scorer a table describes (``default_score`` defaults to 0.5)."""
        data = SCORERS.read(cls, data, path)
        return built(path, lambda: cls(default_score=data.get("default_score", 0.5)))

    def _value(self) -> tuple[Any, ...]:
        return (self.default_score,)

    def __repr__(self) -> str:
        return f"MetadataTrustScorer(default_score={self.default_score!r})"


@SCORERS.register
class MetadataKeyScorer(BuiltinScorer):
    """A multiplier: ``boost`` when ``metadata[key] == value``, else 1.0.

    The comparison is string to string with no coercion: a metadata value that
    is not a string never matches. ``boost`` must be finite and strictly
    positive and is not clamped (it is meant for a composite scorer).
    Absolute: other items do not matter.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``boost`` when it is zero, negative or non-finite. Table:
    ``{"type": "metadata_key", "key": ..., "value": ..., "boost": ...}`` (all required).
    """

    absolute = True
    __slots__ = ("boost", "key", "value")
    type_name = "metadata_key"
    settings = ("key", "value", "boost")
    key: str
    value: str
    boost: float

    #: The score of an item that does not match (a fixed constant, not a parameter).
    DEFAULT_MULTIPLIER: ClassVar[float] = 1.0

    def __init__(self, key: str, value: str, boost: float) -> None:
        if not isinstance(key, str):
            raise InvalidTypeError("key", key, "a string")
        if not isinstance(value, str):
            raise InvalidTypeError("value", value, "a string")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "boost", check_weight("boost", boost, positive=True))

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's multiplier."""
        key, wanted, boost = self.key, self.value, self.boost
        neutral = self.DEFAULT_MULTIPLIER
        scores: list[float] = []
        append = scores.append
        for item in items:
            raw = item.metadata.get(key)
            append(boost if isinstance(raw, str) and raw == wanted else neutral)
        return scores

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``key``, ``value`` and ``boost``."""
        return {"type": self.type_name, "key": self.key, "value": self.value,
                "boost": self.boost}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The metadata-key scorer a table describes."""
        data = SCORERS.read(cls, data, path, required=cls.settings)
        key = text_value(data["key"], child(path, "key"))
        wanted = text_value(data["value"], child(path, "value"))
        return built(path, lambda: cls(key, wanted, data["boost"]))

    def _value(self) -> tuple[Any, ...]:
        return (self.key, self.value, self.boost)

    def __repr__(self) -> str:
        return (
            f"MetadataKeyScorer(key={self.key!r}, value={self.value!r}, boost={self.boost!r})"
        )

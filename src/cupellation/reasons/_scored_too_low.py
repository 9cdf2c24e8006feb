"""The exclusion reason ``ScoredTooLow``: reserved: the item scored below a selection threshold."""

from typing import ClassVar

from ._base import BaseExclusionReason, register_exclusion_reason

__all__ = ["ScoredTooLow"]


@register_exclusion_reason
class ScoredTooLow(BaseExclusionReason, frozen=True, kw_only=True):
    """Reserved: the item scored below a selection threshold."""

    reserved: ClassVar[bool] = True
    score: float
    threshold: float

    word: ClassVar[str] = "scored too low"
    budget_helps: ClassVar[bool] = False

    def sentence(self) -> str:
        """Its score against the threshold."""
        return f"its score {self.score:g} is below the threshold {self.threshold:g}"

    def counterfactual(self) -> str:
        """A lower threshold."""
        return f"it scored below the threshold {self.threshold:g}"

"""The exclusion reason ``NegativeTokens``: the item declared a negative token count (Classify)."""

from typing import ClassVar

from ._base import BaseExclusionReason, register_exclusion_reason

__all__ = ["NegativeTokens"]


@register_exclusion_reason
class NegativeTokens(BaseExclusionReason, frozen=True, kw_only=True):
    """The item declared a negative token count (Classify)."""

    tokens: int

    word: ClassVar[str] = "negative tokens"
    style: ClassVar[str] = "var(--bad)"
    tokens_field: ClassVar[str | None] = "tokens"
    budget_helps: ClassVar[bool] = False

    def sentence(self) -> str:
        """The negative count."""
        return f"its token count {self.tokens:,} is negative"

    def counterfactual(self) -> str:
        """Nothing: the count is invalid."""
        return "its token count is negative"

"""The exclusion reason ``QuotaCapExceeded``: reserved: the item's kind exceeded its quota cap."""

from typing import ClassVar

from ._base import BaseExclusionReason, Rivals, register_exclusion_reason

__all__ = ["QuotaCapExceeded"]


@register_exclusion_reason
class QuotaCapExceeded(BaseExclusionReason, frozen=True, kw_only=True):
    """Reserved: the item's kind exceeded its quota cap."""

    reserved: ClassVar[bool] = True
    kind: str
    cap: int
    actual: int

    word: ClassVar[str] = "quota cap"

    def sentence(self) -> str:
        """Its kind against the cap."""
        return f"its kind {self.kind} was at its quota cap ({self.actual} of {self.cap})"

    def counterfactual(self) -> str:
        """A higher cap."""
        return f"a higher quota cap for {self.kind} would let it in"

    def rivals(self) -> Rivals:
        """The included items of its kind that scored at least as high."""
        return Rivals(kind="same kind, higher score", higher_scored=True, same_kind=self.kind)

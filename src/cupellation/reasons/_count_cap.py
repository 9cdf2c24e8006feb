"""The exclusion reason ``CountCapExceeded``:
a count-quota slicer dropped the item: its kind already had ``cap`` items."""

from typing import ClassVar

from ._base import BaseExclusionReason, Rivals, register_exclusion_reason

__all__ = ["CountCapExceeded"]


@register_exclusion_reason
class CountCapExceeded(BaseExclusionReason, frozen=True, kw_only=True):
    """A count-quota slicer dropped the item: its kind already had ``cap`` items
    selected (``count`` of them), and the item would otherwise have fitted."""

    kind: str
    cap: int
    count: int

    word: ClassVar[str] = "count cap"
    style: ClassVar[str] = "#a0522d"

    def sentence(self) -> str:
        """Its kind was at its cap."""
        return (f"its kind {self.kind} already had {self.count} of at most {self.cap} "
                "items selected")

    def counterfactual(self) -> str:
        """A higher cap."""
        return f"a count cap above {self.cap} for {self.kind} would let it in"

    def rivals(self) -> Rivals:
        """The included items of its kind that scored at least as high."""
        return Rivals(kind="same kind, higher score", higher_scored=True, same_kind=self.kind)

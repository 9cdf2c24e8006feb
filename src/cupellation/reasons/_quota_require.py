"""The exclusion reason ``QuotaRequireDisplaced``:
reserved: displaced to satisfy another kind's quota requirement."""

from typing import ClassVar

from ._base import BaseExclusionReason, register_exclusion_reason

__all__ = ["QuotaRequireDisplaced"]


@register_exclusion_reason
class QuotaRequireDisplaced(BaseExclusionReason, frozen=True, kw_only=True):
    """Reserved: displaced to satisfy another kind's quota requirement."""

    reserved: ClassVar[bool] = True
    displaced_by_kind: str

    word: ClassVar[str] = "quota displaced"

    def sentence(self) -> str:
        """The kind that needed the room."""
        return f"it made room for the required kind {self.displaced_by_kind}"

    def counterfactual(self) -> str:
        """A smaller requirement."""
        return f"a smaller requirement for {self.displaced_by_kind} would leave it room"

"""The specification's analytics over a message list: the unit is what
:func:`~cupellation.select_messages` selects (a message, or a whole tool exchange;
the first system message and the current turn's start pinned; ``trim=`` applied),
and the answers name messages (indices into the list given, and the objects).

Each function reads the list as ``select_messages`` does (the chat layer's own
reading, cached the same way) and runs the same pipeline (the policy's, placing in
conversation order, without deduplication), so an answer is what ``select_messages``
would do at that budget or under that policy. They are dry runs: the options'
``collector`` is sent nothing. The spec's item functions keep their
signatures (a pipeline and items); these take the messages first and a
:class:`~cupellation.SelectOptions` (or its keywords), as ``select_messages`` does
(docs/decisions.md, "Analytics on messages").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack, cast

from .._model import ContextBudget
from .._pipeline import Pipeline
from ..chat._conversation import Conversation, Unit
from ..chat._options import SelectKeywords, SelectOptions, merged_options
from ..chat._select import MessageSelection, choice, choose, read_messages, selection
from ..exceptions import ConfigurationError, CupelError, InvalidTypeError, SpecArgumentError
from ..policy import Policy
from ._budget import get_marginal_items, scaled_budget, search_min_budget
from ._sensitivity import ItemStatus, checked_variants

__all__ = [
    "MessageBudgetPoint",
    "MessageSensitivityReport",
    "MessageSwing",
    "MessageUnit",
    "find_min_budget_for_message",
    "get_marginal_messages",
    "message_budget_sweep",
    "message_policy_sensitivity",
    "message_units",
]

_NOT_AN_ELEMENT = "targetItem must be an element of items"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageUnit:
    """What ``select_messages`` keeps or leaves out whole: one message, or a tool
    exchange (the call and its results). ``indices`` are the messages' positions in
    the list given and ``messages`` the objects given; ``tokens`` the unit's count
    (after ``trim=``); ``kind`` its ContextKind name; ``pinned`` whether it is always
    kept (the first system message, the current turn's start).

    .. versionadded:: 0.4
    """

    indices: tuple[int, ...]
    messages: tuple[Any, ...]
    tokens: int
    kind: str
    pinned: bool

    def to_dict(self) -> dict[str, object]:
        """JSON-native, without the message objects: ``{"indices", "tokens", "kind",
        "pinned"}``."""
        return {"indices": list(self.indices), "tokens": self.tokens, "kind": self.kind,
                "pinned": self.pinned}


def _unit(conversation: Conversation, unit: Unit) -> MessageUnit:
    span = unit.span
    return MessageUnit(indices=tuple(range(span.start, span.end)),
                       messages=tuple(conversation.objects[span.start:span.end]),
                       tokens=unit.item.tokens, kind=unit.item.kind.value,
                       pinned=unit.item.pinned)


def _read(messages: Any, options: SelectOptions | None, keywords: SelectKeywords,
          system: Any, now: datetime | None) -> tuple[Conversation, SelectOptions]:
    # The analytics' runs are dry runs, as the chapters' are: an options value's
    # collector (an audit log, spans) is not sent what was only simulated.
    merged = merged_options(options, keywords).replace(collector=None)
    return read_messages(messages, merged, system=system, now=now), merged


def message_units(messages: Any, options: SelectOptions | None = None, *,
                  system: Any = None, now: datetime | None = None,
                  **keywords: Unpack[SelectKeywords]) -> list[MessageUnit]:
    """The units ``select_messages(messages, options, ...)`` selects from, in
    conversation order (an Anthropic ``system`` passed apart is not among them: it
    is always kept). The arguments are ``select_messages``'s.

    .. versionadded:: 0.4
    """
    conversation, _ = _read(messages, options, keywords, system, now)
    return [_unit(conversation, unit) for unit in conversation.units]


def _target(conversation: Conversation, message: object) -> Unit:
    """The unit holding ``message``: an index into the list, or one of its objects."""
    if isinstance(message, bool):
        raise InvalidTypeError("message", message, "an index into messages or a message")
    if isinstance(message, int):
        index = message if 0 <= message < len(conversation.objects) else None
    else:
        index = next((k for k, obj in enumerate(conversation.objects) if obj is message),
                     None)
    unit = None if index is None else next(
        (u for u in conversation.units if u.span.start <= index < u.span.end), None)
    if unit is None:
        raise SpecArgumentError(_NOT_AN_ELEMENT, field="message", value=message)
    return unit


def find_min_budget_for_message(messages: Any, message: object,
                                search_ceiling: int | None = None,
                                options: SelectOptions | None = None, *, system: Any = None,
                                now: datetime | None = None,
                                **keywords: Unpack[SelectKeywords]) -> int | None:
    """The spec's ``FindMinBudgetFor`` on messages: the smallest ``max_tokens`` at
    which ``select_messages`` keeps ``message`` (an index into the list, or one of
    its objects by identity), or None within ``search_ceiling``.

    The budget is ``options``' (``max_tokens=``, ``budget=`` or the policy's); each
    budget tried is :func:`~cupellation.analytics.scaled_budget` of it, as
    :func:`~cupellation.analytics.find_min_budget_for` tries them, and the ceiling
    defaults to its ``max_tokens``. The search is over the message's unit: a tool
    result is kept with its whole exchange, so its answer is the exchange's. A
    budget at which the pinned messages alone do not fit keeps nothing.

    Raises :class:`~cupellation.exceptions.SpecArgumentError` with the chapter's
    messages (a message not in the list: ``"targetItem must be an element of
    items"``; a ceiling below the unit's tokens) and
    :class:`~cupellation.exceptions.NonMonotonicSlicerError` for a quota slicer,
    exactly as for items.

    .. versionadded:: 0.4
    """
    conversation, merged = _read(messages, options, keywords, system, now)
    how = choice(merged, want_report=False)
    unit = _target(conversation, message)
    return search_min_budget(how.pipeline, conversation.candidates, unit.item,
                             search_ceiling, budget=how.budget).budget


def get_marginal_messages(messages: Any, slack_tokens: int,
                          options: SelectOptions | None = None, *, system: Any = None,
                          now: datetime | None = None,
                          **keywords: Unpack[SelectKeywords]) -> list[MessageUnit]:
    """The spec's ``GetMarginalItems`` on messages: the units ``select_messages``
    keeps at ``options``' budget and leaves out at that budget less ``slack_tokens``
    (off ``max_tokens`` and ``target_tokens``), in conversation order.

    Raises what :func:`~cupellation.analytics.get_marginal_items` raises
    (:class:`~cupellation.exceptions.NonMonotonicSlicerError` for a QuotaSlice,
    ``InvalidValueError`` naming ``slack_tokens``), and
    :class:`~cupellation.exceptions.PinnedBudgetError` when the pinned messages do
    not fit the reduced budget.

    .. versionadded:: 0.4
    """
    conversation, merged = _read(messages, options, keywords, system, now)
    how = choice(merged, want_report=False)
    marginal = {id(item) for item in get_marginal_items(
        how.pipeline, conversation.candidates, how.budget, slack_tokens)}
    return [_unit(conversation, unit) for unit in conversation.units
            if id(unit.item) in marginal]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageBudgetPoint:
    """One budget of :func:`message_budget_sweep`: the budget tried, and what
    ``select_messages_with_report`` gives there (``selection``), or why it failed
    (``failure``: the pinned messages alone exceed it, ...).

    .. versionadded:: 0.4
    """

    budget: ContextBudget
    selection: MessageSelection[Any] | None
    failure: str | None


def message_budget_sweep(messages: Any, budgets: Sequence[int],
                         options: SelectOptions | None = None, *, system: Any = None,
                         now: datetime | None = None,
                         **keywords: Unpack[SelectKeywords]) -> list[MessageBudgetPoint]:
    """What ``select_messages_with_report`` keeps at each of ``budgets`` (values of
    ``max_tokens``, each :func:`~cupellation.analytics.scaled_budget` of ``options``'
    budget, or ``max_tokens`` alone when it gives none), in the order given. A
    budget at which the selection fails is a point with its ``failure``.

    .. versionadded:: 0.4
    """
    if isinstance(budgets, str | bytes) or not isinstance(budgets, Sequence):
        raise InvalidTypeError("budgets", budgets, "a sequence of int")
    conversation, merged = _read(messages, options, keywords, system, now)
    base: ContextBudget | None
    try:
        base = choice(merged, want_report=False).budget
    except ConfigurationError:
        base = None  # no budget given: each point is max_tokens = target_tokens
    points: list[MessageBudgetPoint] = []
    for size in budgets:
        budget = scaled_budget(ContextBudget(size, size) if base is None else base, size)
        how = choice(merged.replace(budget=budget, max_tokens=None, target_tokens=None),
                     want_report=True)
        try:
            chosen = choose(conversation, how)
        except CupelError as exc:
            points.append(MessageBudgetPoint(budget=budget, selection=None, failure=str(exc)))
            continue
        points.append(MessageBudgetPoint(
            budget=budget, selection=selection(conversation, chosen.kept, chosen),
            failure=None))
    return points


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSwing:
    """A unit the variants disagree on: kept by some, left out by others (one status
    per variant, in the variants' order).

    .. versionadded:: 0.4
    """

    unit: MessageUnit
    statuses: tuple[tuple[str, ItemStatus], ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-native: the unit's fields and ``statuses`` (``[{"label", "status"}]``)."""
        return {**self.unit.to_dict(), "statuses": [
            {"label": label, "status": status.value} for label, status in self.statuses]}


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSensitivityReport:
    """Each variant's selection (a :class:`~cupellation.MessageSelection`, input
    order) and the units that swing between kept and left out.

    .. versionadded:: 0.4
    """

    variants: tuple[tuple[str, MessageSelection[Any]], ...]
    diffs: tuple[MessageSwing, ...]


def message_policy_sensitivity(messages: Any,
                               variants: Sequence[tuple[str, Policy | Pipeline | str]],
                               options: SelectOptions | None = None, *, system: Any = None,
                               now: datetime | None = None,
                               **keywords: Unpack[SelectKeywords]
                               ) -> MessageSensitivityReport:
    """The spec's ``PolicySensitivity`` on messages: ``select_messages_with_report``
    under each ``(label, policy)`` (a Policy, a Pipeline or a preset name) at the one
    budget ``options`` gives (``max_tokens=`` or ``budget=``; a policy's own budget
    is not used), and the units on which they disagree, in conversation order. The
    units are the same under every policy (the reading does not depend on it), so
    they are matched as units, not by content.

    Raises :class:`~cupellation.exceptions.SpecArgumentError` with the chapter's
    message for fewer than two variants, ``InvalidValueError`` for a label given
    twice, :class:`~cupellation.exceptions.ConfigurationError` naming ``budget``
    when ``options`` gives none, and what ``select_messages`` raises.

    .. versionadded:: 0.4
    """
    pairs = checked_variants(variants, (Policy, Pipeline, str), "a Policy, Pipeline or preset")
    conversation, merged = _read(messages, options, keywords, system, now)
    if merged.budget is None and merged.max_tokens is None:
        raise ConfigurationError("budget", None, "the policies are compared at one budget: "
                                                 "pass max_tokens= or budget=")
    selections: list[tuple[str, MessageSelection[Any]]] = []
    kept: list[set[int]] = []
    for label, policy in pairs:
        chosen = choose(conversation, choice(
            merged.replace(policy=cast("Policy | Pipeline | str", policy)), want_report=True))
        selections.append((label, selection(conversation, chosen.kept, chosen)))
        kept.append({id(item) for item in chosen.placed})
    diffs = []
    for unit in conversation.units:
        flags = [id(unit.item) in chosen_ids for chosen_ids in kept]
        if any(flags) and not all(flags):
            diffs.append(MessageSwing(unit=_unit(conversation, unit), statuses=tuple(
                (label, ItemStatus.INCLUDED if flag else ItemStatus.EXCLUDED)
                for (label, _), flag in zip(pairs, flags, strict=True))))
    return MessageSensitivityReport(variants=tuple(selections), diffs=tuple(diffs))

"""The OpenAI Agents SDK: a ``call_model_input_filter`` that sends each model call the
items that fit the budget.

    from agents import Agent, RunConfig, Runner
    from cupellation.integrations.openai_agents import input_filter

    config = RunConfig(call_model_input_filter=input_filter(max_tokens=8000,
                                                            trim={"ToolOutput": 800}))
    result = await Runner.run(agent, "What's the weather in Oslo?", run_config=config)

The SDK calls the filter with the model input (``CallModelData``: the instructions
and the Responses input items) just before each model call, and sends what it
returns (``ModelInputData``). The filter selects from the input items as
:func:`~cupellation.select_messages` does with ``format="openai-responses"``: tool
calls and their outputs, and reasoning items and what they produced, are kept or
dropped together; the instructions, passed apart, are counted against the budget and
always kept (as a pinned system message that is taken off again); the latest user
message is pinned. The filter changes only what this call sends: the run's own items
(and a session's) are left as they were, so an item left out now can be sent later.

The budget counts the instructions and the items; tool definitions and the reply are
per request: keep room for them in ``output_reserve`` (a ``budget=``). Each call is
recorded: ``collector=`` receives its events, with the trace's ``group_id`` (the
SDK's conversation id, ``RunConfig(group_id=...)``) as the
:class:`~cupellation.RunInfo`'s ``conversation_id`` and the trace id as its
``session_id`` when the application gave none; :attr:`InputFilter.last` holds the
last call's :class:`~cupellation.chat.MessageSelection`.

Needs ``pip install 'cupellation[openai-agents]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Unpack

from agents.run_config import CallModelData, ModelInputData
from agents.tracing import get_current_trace

from ..chat import MessageSelection, SelectKeywords, SelectOptions, select_messages_with_report
from ._window import Window

__all__ = ["InputFilter", "input_filter"]


class InputFilter(Window):
    """A ``RunConfig.call_model_input_filter``: each model call's input, selected (see
    the module doc). Made by :func:`input_filter`; one filter may serve many runs."""

    __slots__ = ("_heads",)

    def __init__(self, options: SelectOptions | None = None, *,
                 on_select: Callable[[MessageSelection[Sequence[object]]], None] | None = None,
                 **keywords: Unpack[SelectKeywords]) -> None:
        super().__init__(options, on_select, {**keywords, "format": "openai-responses"})
        # One system item per instructions text, so that the list each call selects
        # from starts with the same object and select_messages reads only new items.
        self._heads: dict[str, dict[str, str]] = {}

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The input of this model call, selected: the kept items, and the
        instructions unchanged."""
        instructions = data.model_data.instructions
        items: list[Any] = list(data.model_data.input)
        head = None
        if instructions:
            head = self._heads.get(instructions)
            if head is None:
                if len(self._heads) >= 8:
                    self._heads.clear()
                head = self._heads[instructions] = {"role": "system", "content": instructions}
            items.insert(0, head)
        trace = get_current_trace()
        options = self.options_for(
            session_id=None if trace is None else trace.trace_id,
            conversation_id=None if trace is None else getattr(trace, "group_id", None))
        selection = select_messages_with_report(items, options)
        kept = list(selection.messages)
        if head is not None:
            # The first system message is pinned: always kept, always first (a copy
            # when trim= cut it: the instructions sent are then its text).
            instructions = kept.pop(0)["content"]
        self.record(selection)
        return ModelInputData(input=kept, instructions=instructions)


def input_filter(options: SelectOptions | None = None, *,
                 on_select: Callable[[MessageSelection[Sequence[object]]], None] | None = None,
                 **keywords: Unpack[SelectKeywords]) -> InputFilter:
    """A ``call_model_input_filter`` for ``RunConfig`` that sends each model call the
    input items that fit the budget (see the module doc). ``options`` and the
    keywords are :class:`~cupellation.chat.SelectOptions`' (the format is
    ``"openai-responses"``); ``on_select`` is called with each call's selection."""
    return InputFilter(options, on_select=on_select, **keywords)

"""LangChain v1: an agent middleware that sends each model call the messages that fit
the budget.

    from langchain.agents import create_agent
    from cupellation.integrations.langchain import WindowMiddleware

    agent = create_agent("openai:gpt-4o", tools=[get_weather],
                         system_prompt="You are a weather assistant.",
                         middleware=[WindowMiddleware(max_tokens=8000,
                                                      trim={"ToolOutput": 800})])

The middleware wraps each model call (``wrap_model_call``): it sees the request's
messages and its system message, which ``create_agent`` keeps apart from them, selects
as :func:`~cupellation.select_messages` does with LangChain messages (an AI message
with tool calls and the tool messages answering it kept or dropped together, the
latest human message pinned), counts the system message against the budget (it is
always sent), and hands the model a request with the kept messages. Only that call
changes: the agent's state (``messages``, a checkpointer's thread) keeps every
message, so a message left out now can be sent later. (A ``before_model`` hook
would rewrite the stored history and cannot see the system prompt.)

Each call is recorded: ``collector=`` receives its events, with the LangGraph
``thread_id`` as the :class:`~cupellation.RunInfo`'s ``conversation_id`` where the
application gave none; :attr:`WindowMiddleware.last` holds the last selection.
Counts are those of the OpenAI messages LangChain sends (``token_counter=``); tool
definitions and the reply are not counted: keep room for them in
``output_reserve`` (a ``budget=``).

Needs ``pip install 'cupellation[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Unpack

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import SystemMessage

from ..chat import MessageSelection, SelectKeywords, SelectOptions, select_messages_with_report
from ._window import Window

__all__ = ["WindowMiddleware"]


def _thread_id() -> str | None:
    """The LangGraph thread of the call being made, when there is one."""
    try:
        from langgraph.config import get_config  # noqa: PLC0415 - only inside a graph run
        configurable = get_config().get("configurable") or {}
    except (ImportError, RuntimeError):
        return None
    thread = configurable.get("thread_id")
    return thread if isinstance(thread, str) else None


class WindowMiddleware(AgentMiddleware[Any, Any]):
    """A ``create_agent`` middleware: each model call's messages, selected (see the
    module doc). ``options`` and the keywords are
    :class:`~cupellation.chat.SelectOptions`' (the format is ``"langchain"``);
    ``on_select`` is called with each call's selection."""

    def __init__(self, options: SelectOptions | None = None, *,
                 on_select: Callable[[MessageSelection[Sequence[object]]], None] | None = None,
                 **keywords: Unpack[SelectKeywords]) -> None:
        super().__init__()
        self.window = Window(options, on_select, {**keywords, "format": "langchain"})

    @property
    def last(self) -> MessageSelection[Sequence[object]] | None:
        """The last call's selection (None before the first call)."""
        return self.window.last

    def select(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """``request`` with the messages that fit the budget (its system message
        counted and kept)."""
        system = request.system_message
        given: list[Any] = list(request.messages)
        if system is not None:
            given.insert(0, system)
        options = self.window.options_for(conversation_id=_thread_id())
        selection = select_messages_with_report(given, options)
        kept = list(selection.messages)
        overrides: dict[str, Any] = {}
        if system is not None:
            # The first system message is pinned: always kept and first (a copy when
            # trim= cut it, which is then what is sent).
            first = kept.pop(0)
            if first is not system and isinstance(first, SystemMessage):
                overrides["system_message"] = first
        self.window.record(selection)
        return request.override(messages=kept, **overrides)

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
                        ) -> ModelResponse[Any]:
        """Call the model with the selected messages."""
        return handler(self.select(request))

    async def awrap_model_call(
            self, request: ModelRequest[Any],
            handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        """Call the model with the selected messages (async agents)."""
        return await handler(self.select(request))

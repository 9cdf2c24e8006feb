"""LangChain v1 ``create_agent`` with a middleware that fits the messages to a budget.

    python examples/langchain_middleware.py

``before_model`` (the successor of ``pre_model_hook``) runs before every model call.
Returning ``{"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]}`` replaces the
graph state's message list with the selection, so what is left out is gone for good
(the documented short-term-memory recipe). When the history should stay whole and only
the model's view be cut, use ``wrap_model_call`` instead: ``handler(
request.override(messages=kept))`` (shown too). Either way the selection keeps tool
exchanges whole, which ``trim_messages`` does not (langchain#33245).

A scripted chat model stands in for a provider (it records what it was sent), so the
script runs offline.
"""

from collections.abc import Callable
from typing import Any, ClassVar

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from cupellation import select_messages
from cupellation.chat import ordering_problems

BUDGET = 400


class ScriptedModel(GenericFakeChatModel):
    """Replays scripted replies and records the messages of every call."""

    calls: ClassVar[list[list[BaseMessage]]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self  # create_agent binds the tools; a scripted model needs none

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> Any:
        ScriptedModel.calls.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@tool
def search(query: str) -> str:
    """Search the documentation."""
    return f"Results for {query}: " + "a long passage of documentation. " * 40


def script() -> list[AIMessage]:
    replies = [AIMessage("", tool_calls=[
        {"name": "search", "args": {"query": f"topic {turn}a"}, "id": f"call_{turn}a",
         "type": "tool_call"},
        {"name": "search", "args": {"query": f"topic {turn}b"}, "id": f"call_{turn}b",
         "type": "tool_call"}]) for turn in range(3)]
    return [*replies, AIMessage("Here is what the documentation says.")]


class FitStateToBudget(AgentMiddleware):
    """before_model: the state keeps only what fits (tool exchanges whole)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        kept = select_messages(messages, max_tokens=BUDGET, trim={"ToolOutput": 120})
        if len(kept) == len(messages) and all(a is b for a, b in zip(kept, messages, strict=True)):
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]}


class FitRequestToBudget(AgentMiddleware):
    """wrap_model_call: the model sees what fits; the state keeps everything."""

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        kept = select_messages(request.messages, max_tokens=BUDGET, trim={"ToolOutput": 120})
        return handler(request.override(messages=kept))


for middleware in (FitStateToBudget(), FitRequestToBudget()):
    ScriptedModel.calls = []
    agent = create_agent(ScriptedModel(messages=iter(script())), tools=[search],
                         system_prompt="You answer from the documentation.",
                         middleware=[middleware])
    result = agent.invoke({"messages": [HumanMessage("What do the docs say about topics?")]})
    hook = type(middleware).__name__
    print(f"{hook}: {len(ScriptedModel.calls)} model calls; the final state holds "
          f"{len(result['messages'])} messages")
    for number, sent in enumerate(ScriptedModel.calls, 1):
        problems = ordering_problems(convert_to_openai_messages(sent))
        print(f"  call {number}: {len(sent)} messages "
              f"({', '.join(type(m).__name__.removesuffix('Message') for m in sent)}); "
              f"tool-call rules {'kept' if not problems else 'BROKEN: ' + problems[0]}")

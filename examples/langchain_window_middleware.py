"""LangChain v1 ``create_agent`` with cupellation's ``WindowMiddleware``: one line in
``middleware=``, and every model call is sent the messages that fit the budget, the
system prompt counted.

    python examples/langchain_window_middleware.py

The middleware wraps each model call (``wrap_model_call``): only the call's view is
cut; the agent's state keeps every message. A scripted chat model stands in for a
provider (it records what it was sent), so the script runs offline.
"""

from typing import Any, ClassVar

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from cupellation.chat import ordering_problems
from cupellation.integrations.langchain import WindowMiddleware

BUDGET = 600


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
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18C, light wind."


@tool
def logs(service: str) -> str:
    """A service's recent logs (long)."""
    return "\n".join(f"{service} worker-{k} served a request in {k % 97} ms"
                     for k in range(600))


def script(turns: int) -> list[AIMessage]:
    replies: list[AIMessage] = []
    for turn in range(turns):
        replies.append(AIMessage("", tool_calls=[
            {"name": "weather", "args": {"city": "Oslo"}, "id": f"w{turn}", "type": "tool_call"},
            {"name": "logs", "args": {"service": "api"}, "id": f"l{turn}", "type": "tool_call"}]))
        replies.append(AIMessage("All fine in Oslo."))
    return replies


def main() -> None:
    counts: list[int] = []
    middleware = WindowMiddleware(max_tokens=BUDGET, trim={"ToolOutput": 200},
                                  on_select=lambda selection: counts.append(selection.tokens))
    agent = create_agent(ScriptedModel(messages=iter(script(3))), tools=[weather, logs],
                         system_prompt="You are an operations assistant.",
                         middleware=[middleware])
    messages: list[Any] = []
    for turn in range(3):
        state = agent.invoke({"messages": [*messages, HumanMessage(f"Question {turn}")]})
        messages = state["messages"]
        selection = middleware.last
        assert selection is not None
        print(f"turn {turn}: the last call sent {len(selection.kept)} of "
              f"{len(selection.kept) + len(selection.dropped)} messages (system prompt "
              f"included), {selection.tokens} tokens; the state holds {len(messages)}")
    valid = all(ordering_problems(sent, format="langchain") == [] for sent in ScriptedModel.calls)
    print(f"{middleware.window.calls} model calls; every call within {BUDGET} tokens: "
          f"{max(counts) <= BUDGET}; tool-call rules kept: {valid}")


if __name__ == "__main__":
    main()

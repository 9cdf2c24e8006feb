"""LangChain v1's ``create_agent`` with the window middleware, over a fake chat model
that calls tools: parallel tool calls, a large tool output, several turns, and a
system prompt the middleware counts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from chat._signatures import anys_in, getter
from cupellation.chat import MessageSelection
from cupellation.integrations.langchain import WindowMiddleware

from ._loop import BIG, MAX_TOKENS, TRIM, Runs, check_call, logs, weather

SYSTEM_PROMPT = "You are an operations assistant. Answer in one sentence. " * 8


class ScriptedChat(GenericFakeChatModel):
    """GenericFakeChatModel that takes tools and keeps what each call was sent."""

    sent: list[list[BaseMessage]] = []  # noqa: RUF012 - replaced per instance below

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _script(turns: int) -> Iterator[AIMessage]:
    for turn in range(turns):
        yield AIMessage(content="", tool_calls=[
            {"name": "weather", "args": {"city": "Oslo"}, "id": f"c{turn}a", "type": "tool_call"},
            {"name": "logs", "args": {"service": "api"}, "id": f"c{turn}b", "type": "tool_call"}])
        yield AIMessage(content=f"Answer {turn}: all fine.")


def _loop(middleware: WindowMiddleware, turns: int) -> tuple[ScriptedChat, list[Any]]:
    model = ScriptedChat(messages=_script(turns))
    model.sent = []
    agent = create_agent(model, tools=[tool(weather), tool(logs)], system_prompt=SYSTEM_PROMPT,
                         middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "thread-7"}}
    state: Any = None
    for turn in range(turns):
        state = agent.invoke({"messages": [HumanMessage(f"Question {turn}: how is Oslo?")]},
                             config)
    return model, state["messages"]


def test_every_model_call_gets_a_valid_window_within_the_budget() -> None:
    """Four turns, each with two parallel tool calls, one returning ~13,000 tokens:
    every model call is sent messages OpenAI accepts (calls with their tool messages),
    with the system prompt counted, within the budget; the large output is trimmed
    for the call while the agent's state keeps it whole; each call's report explains
    it; the runs carry the thread id as the conversation."""
    runs = Runs()
    seen: list[MessageSelection[Sequence[object]]] = []
    middleware = WindowMiddleware(max_tokens=MAX_TOKENS, trim=TRIM, collector=runs,
                                  on_select=seen.append)
    model, stored = _loop(middleware, turns=4)
    assert len(model.sent) == 8 == middleware.window.calls == len(seen)
    for sent, selection in zip(model.sent, seen, strict=True):
        assert isinstance(sent[0], SystemMessage)
        check_call("langchain", sent, selection)
        assert all(len(str(m.content)) < len(BIG) // 10 for m in sent)
    assert middleware.last is not None
    assert middleware.last.dropped
    assert {run.conversation_id for run in runs.started} == {"thread-7"}
    # Only the calls changed: the agent's state keeps every message, whole.
    assert sum(len(str(m.content)) >= len(BIG) for m in stored) == 4


def test_the_system_prompt_counts_against_the_budget() -> None:
    """The system prompt, kept apart from request.messages by create_agent, is
    counted: its tokens are in every call's window, which still fits."""
    middleware = WindowMiddleware(max_tokens=MAX_TOKENS, trim=TRIM)
    _loop(middleware, turns=1)
    assert middleware.last is not None
    first = middleware.last.report.included[0]
    assert first.item.kind.value == "SystemPrompt"
    assert first.item.pinned
    assert first.item.tokens > 80
    assert middleware.last.tokens <= MAX_TOKENS


def test_the_middleware_signature_says_no_any() -> None:
    """WindowMiddleware's constructor (the options, on_select, the SelectKeywords
    sugar) holds no Any (issue 27); the framework's own hook methods keep the
    framework's types."""
    assert anys_in([("WindowMiddleware.__init__", WindowMiddleware.__init__),
                    ("WindowMiddleware.last", getter(WindowMiddleware, "last"))]) == {}

"""PydanticAI's ``ProcessHistory`` with the history processor, in real agent runs
with ``FunctionModel``: parallel tool calls, a large tool return, several turns."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from chat._signatures import anys_in
from cupellation.integrations.pydantic_ai import HistoryProcessor, history_processor

from ._loop import BIG, MAX_TOKENS, TRIM, Runs, logs, weather

INSTRUCTIONS = "You are an operations assistant. Answer in one sentence."


def _problems(messages: list[ModelMessage]) -> list[str]:
    """The OpenAI tool-call rules on PydanticAI messages (independent of the module):
    each response's tool calls answered in the next request, each tool return
    answering a call of the response just before it; the list ends with a request."""
    found: list[str] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            following = messages[index + 1] if index + 1 < len(messages) else None
            answered = set() if not isinstance(following, ModelRequest) else {
                p.tool_call_id for p in following.parts if p.part_kind == "tool-return"}
            if calls - answered:
                found.append(f"[{index}] unanswered {sorted(calls - answered)}")
        else:
            returns = {p.tool_call_id for p in message.parts if p.part_kind == "tool-return"}
            before = messages[index - 1] if index else None
            calls = set() if not isinstance(before, ModelResponse) else {
                p.tool_call_id for p in before.parts if isinstance(p, ToolCallPart)}
            if returns - calls:
                found.append(f"[{index}] orphan returns {sorted(returns - calls)}")
    if messages and not isinstance(messages[-1], ModelRequest):
        found.append("ends with a response")
    return found


class Scripted:
    """A FunctionModel's function: two parallel tool calls for a user prompt, text for
    tool returns; keeps what each request was sent."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        number = len(self.sent)
        last = messages[-1]
        if any(p.part_kind == "user-prompt" for p in last.parts):
            return ModelResponse(parts=[
                ToolCallPart("weather", {"city": "Oslo"}, tool_call_id=f"c{number}a"),
                ToolCallPart("logs", {"service": "api"}, tool_call_id=f"c{number}b")])
        return ModelResponse(parts=[TextPart(f"Answer {number}: all fine.")])


def _runs(processor: HistoryProcessor, turns: int) -> tuple[Scripted, list[ModelMessage]]:
    scripted = Scripted()
    agent = Agent(FunctionModel(scripted), instructions=INSTRUCTIONS,
                  tools=[weather, logs], capabilities=[ProcessHistory(processor)])
    history: list[ModelMessage] = []
    for turn in range(turns):
        result = agent.run_sync(f"Question {turn}: how is Oslo?", message_history=history,
                                conversation_id="conversation-7")
        history = result.all_messages()
    return scripted, history


def _tokens(messages: list[ModelMessage], ctx: Any) -> int:
    """The messages' count by the processor's reading, nothing left out."""
    recount = history_processor(max_tokens=10**9)
    assert recount(ctx, messages) == messages
    assert recount.last is not None
    return recount.last.tokens


def test_every_request_gets_valid_messages_within_the_budget() -> None:
    """Four runs, each with two parallel tool calls, one returning ~13,000 tokens:
    every request's messages keep the tool-call rules, fit the budget with the
    instructions counted, carry the large return trimmed, and are explained by the
    request's report; the runs carry PydanticAI's conversation id."""
    runs = Runs()
    processor = history_processor(max_tokens=MAX_TOKENS, trim=TRIM, collector=runs)
    scripted, history = _runs(processor, turns=4)
    assert len(scripted.sent) == 8 == processor.calls
    ctx = RunContext(deps=None, model=FunctionModel(Scripted()), usage=_usage())
    dropped = 0
    for sent in scripted.sent:
        assert _problems(sent) == []
        assert _tokens(sent, ctx) <= MAX_TOKENS
        for message in sent:
            for part in message.parts:
                if part.part_kind == "tool-return":
                    assert len(str(part.content)) < len(BIG) // 10
    assert processor.last is not None
    dropped = len(processor.last.dropped)
    assert dropped > 0
    assert all(entry.reason for entry in processor.last.report.excluded)
    assert {run.conversation_id for run in runs.started} == {"conversation-7"}
    # What the processor dropped is gone from the run's own history.
    assert sum(isinstance(m, ModelResponse) for m in history) < 8


def test_keep_full_history_keeps_every_message_for_the_next_run() -> None:
    """With keep_full_history=True, full_history(result.all_messages()) holds every
    message of the runs (the run's own list lost some), and each request, selected
    from the whole history, still fits and keeps the rules."""
    processor = history_processor(max_tokens=MAX_TOKENS, trim=TRIM, keep_full_history=True)
    scripted = Scripted()
    agent = Agent(FunctionModel(scripted), instructions=INSTRUCTIONS,
                  tools=[weather, logs], capabilities=[ProcessHistory(processor)])
    history: list[ModelMessage] = []
    for turn in range(3):
        result = agent.run_sync(f"Question {turn}", message_history=history)
        history = processor.full_history(result.all_messages())
    assert len(result.all_messages()) < len(history)  # the run's own list lost some
    responses = [m for m in history if isinstance(m, ModelResponse)]
    assert len(responses) == 6  # 3 runs x (calls, answer): every message kept
    assert len(processor.history) == len(history) - 1  # the last answer came after
    ctx = RunContext(deps=None, model=FunctionModel(Scripted()), usage=_usage())
    for sent in scripted.sent:
        assert _problems(sent) == []
        assert _tokens(sent, ctx) <= MAX_TOKENS


def _usage() -> Any:
    from pydantic_ai.usage import RunUsage  # noqa: PLC0415

    return RunUsage()


def test_the_processor_signatures_say_no_any() -> None:
    """history_processor and HistoryProcessor's constructor (the options,
    keep_full_history, on_select, the SelectKeywords sugar) hold no Any (issue 27)."""
    assert anys_in([("history_processor", history_processor),
                    ("HistoryProcessor.__init__", HistoryProcessor.__init__)]) == {}

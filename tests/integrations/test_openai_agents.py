"""The OpenAI Agents SDK's ``call_model_input_filter``, in a real ``Runner`` loop with
a scripted ``Model``: parallel tool calls, a large tool output, several turns."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    ModelSettings,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    set_trace_processors,
)
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from chat._signatures import anys_in, getter
from cupellation.chat import MessageSelection
from cupellation.integrations.openai_agents import InputFilter, input_filter

from ._loop import BIG, MAX_TOKENS, TRIM, Runs, check_call, logs, weather

INSTRUCTIONS = "You are an operations assistant. Answer in one sentence."


class ScriptedModel(Model):
    """Answers a user message with two parallel tool calls, and tool outputs with
    text; keeps what each call was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str | None, list[Any]]] = []

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           model_settings: ModelSettings, tools: list[Any],
                           output_schema: Any, handoffs: list[Any], tracing: Any, *,
                           previous_response_id: str | None, conversation_id: str | None,
                           prompt: Any, **_: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.sent.append((system_instructions, items))
        number = len(self.sent)
        last = items[-1]
        if last.get("role") == "user":
            output: list[Any] = [
                ResponseFunctionToolCall(id=f"fc_{number}a", call_id=f"call_{number}a",
                                         name="weather", arguments='{"city": "Oslo"}',
                                         type="function_call", status="completed"),
                ResponseFunctionToolCall(id=f"fc_{number}b", call_id=f"call_{number}b",
                                         name="logs", arguments='{"service": "api"}',
                                         type="function_call", status="completed")]
        else:
            output = [ResponseOutputMessage(
                id=f"msg_{number}", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(text=f"Answer {number}: all fine.",
                                            type="output_text", annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _loop(window: InputFilter, turns: int) -> ScriptedModel:
    """``turns`` user questions through the Runner, each answered after one round of
    parallel tool calls."""
    set_trace_processors([])  # traces are made (their ids recorded), never exported
    model = ScriptedModel()
    agent = Agent(name="ops", instructions=INSTRUCTIONS, model=model,
                  tools=[function_tool(weather), function_tool(logs)])
    config = RunConfig(call_model_input_filter=window, group_id="conversation-7")
    items: list[Any] = []

    async def run() -> None:
        nonlocal items
        for turn in range(turns):
            items = [*items, {"role": "user", "content": f"Question {turn}: how is Oslo?"}]
            result = await Runner.run(agent, items, run_config=config)
            items = result.to_input_list()

    asyncio.run(run())
    return model


def test_every_model_call_gets_a_valid_window_within_the_budget() -> None:
    """Four turns, each with two parallel tool calls, one returning ~13,000 tokens:
    every model call is sent Responses items the provider accepts (call and output
    together), with the instructions, within the budget by the configured counter;
    the large output is trimmed; old exchanges are left out; each call's report
    explains it; the runs carry the trace's group id as the conversation."""
    runs = Runs()
    seen: list[MessageSelection[Sequence[object]]] = []
    window = input_filter(max_tokens=MAX_TOKENS, trim=TRIM, collector=runs,
                          on_select=seen.append)
    model = _loop(window, turns=4)
    assert len(model.sent) == 8 == window.calls == len(seen)
    dropped = 0
    for (instructions, items), selection in zip(model.sent, seen, strict=True):
        assert instructions == INSTRUCTIONS
        check_call("openai-responses", [{"role": "system", "content": instructions}, *items],
                   selection)
        outputs = [item["output"] for item in items if item.get("type") == "function_call_output"]
        assert all(len(output) < len(BIG) // 10 for output in outputs)  # trimmed
        dropped += len(selection.dropped)
    assert dropped > 0  # the budget made the filter leave exchanges out
    assert window.last is seen[-1]
    assert {run.conversation_id for run in runs.started} == {"conversation-7"}
    assert all(run.session_id for run in runs.started)


def test_without_the_filter_the_same_loop_overruns_the_budget() -> None:
    """The control: the same loop with a filter given an unbounded budget sends every
    item, far over the budget (so the test above measures the filter's work)."""
    window = input_filter(max_tokens=10**9)
    model = _loop(window, turns=2)
    instructions, items = model.sent[-1]
    sent = [{"role": "system", "content": instructions}, *items]
    from cupellation import select_messages_with_report  # noqa: PLC0415

    assert select_messages_with_report(sent, format="openai-responses",
                                       max_tokens=10**9).tokens > MAX_TOKENS * 10


def test_the_filter_signatures_say_no_any() -> None:
    """input_filter and InputFilter's constructor (the options, on_select, the
    SelectKeywords sugar) hold no Any (issue 27)."""
    assert anys_in([("input_filter", input_filter), ("InputFilter.__init__", InputFilter.__init__),
                    ("InputFilter.last", getter(InputFilter, "last"))]) == {}

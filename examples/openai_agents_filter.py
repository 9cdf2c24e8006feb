"""The OpenAI Agents SDK with cupellation's ``call_model_input_filter``: one line in
the ``RunConfig``, and every model call is sent the items that fit the budget.

    python examples/openai_agents_filter.py

A scripted ``Model`` stands in for the API (it answers a question with two parallel
tool calls and tool outputs with text, and records what it was sent), so the script
runs offline; one tool returns a long log, which ``trim=`` cuts.
"""

import asyncio
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

from cupellation.chat import ordering_problems
from cupellation.integrations.openai_agents import input_filter

BUDGET = 600


@function_tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18C, light wind."


@function_tool
def logs(service: str) -> str:
    """A service's recent logs (long)."""
    return "\n".join(f"{service} worker-{k} served a request in {k % 97} ms"
                     for k in range(600))


class ScriptedModel(Model):
    """Calls both tools for a question, then answers; records each call's input."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           model_settings: ModelSettings, tools: list[Any],
                           output_schema: Any, handoffs: list[Any], tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        n = len(self.inputs)
        if items[-1].get("role") == "user":
            output: list[Any] = [
                ResponseFunctionToolCall(call_id=f"call_{n}{tool}", name=tool, arguments=args,
                                         type="function_call", id=f"fc_{n}{tool}")
                for tool, args in (("weather", '{"city": "Oslo"}'),
                                   ("logs", '{"service": "api"}'))]
        else:
            output = [ResponseOutputMessage(
                id=f"msg_{n}", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(text="All fine in Oslo.", type="output_text",
                                            annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main() -> None:
    set_trace_processors([])  # nothing exported: this script runs offline
    model = ScriptedModel()
    agent = Agent(name="ops", instructions="You are an operations assistant.", model=model,
                  tools=[weather, logs])
    counts: list[int] = []
    window = input_filter(max_tokens=BUDGET, trim={"ToolOutput": 200},
                          on_select=lambda selection: counts.append(selection.tokens))
    config = RunConfig(call_model_input_filter=window, group_id="conversation-1")
    items: list[Any] = []
    for turn in range(3):
        items = [*items, {"role": "user", "content": f"Question {turn}: how is Oslo?"}]
        result = await Runner.run(agent, items, run_config=config)
        items = result.to_input_list()
        selection = window.last
        assert selection is not None
        print(f"turn {turn}: the last call sent {len(selection.kept)} of "
              f"{len(selection.kept) + len(selection.dropped)} items (instructions "
              f"included), {selection.tokens} tokens ({selection.token_counter})")
    valid = all(ordering_problems(sent, format="openai-responses") == []
                for sent in model.inputs)
    print(f"{window.calls} model calls; every call within {BUDGET} tokens: "
          f"{max(counts) <= BUDGET}; "
          f"tool-call rules kept: {valid}")


if __name__ == "__main__":
    asyncio.run(main())

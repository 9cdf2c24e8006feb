"""PydanticAI with cupellation's history processor: one capability on the ``Agent``,
and every model request is sent the messages that fit the budget.

    python examples/pydantic_ai_processor.py

``FunctionModel`` stands in for a provider (it calls two tools for a question and
answers their returns), so the script runs offline; one tool returns a long log,
which ``trim=`` cuts. ``ProcessHistory`` replaces the run's messages with what the
processor returns, so ``keep_full_history=True`` keeps the whole conversation for
the next run (``processor.full_history(result.all_messages())``).
"""

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from cupellation.integrations.pydantic_ai import history_processor

BUDGET = 600


def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 18C, light wind."


def logs(service: str) -> str:
    """A service's recent logs (long)."""
    return "\n".join(f"{service} worker-{k} served a request in {k % 97} ms"
                     for k in range(600))


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls both tools for a question, then answers."""
    if any(part.part_kind == "user-prompt" for part in messages[-1].parts):
        return ModelResponse(parts=[
            ToolCallPart("weather", {"city": "Oslo"}, tool_call_id=f"w{len(messages)}"),
            ToolCallPart("logs", {"service": "api"}, tool_call_id=f"l{len(messages)}")])
    return ModelResponse(parts=[TextPart("All fine in Oslo.")])


def main() -> None:
    counts: list[int] = []
    processor = history_processor(max_tokens=BUDGET, trim={"ToolOutput": 200},
                                  keep_full_history=True,
                                  on_select=lambda selection: counts.append(selection.tokens))
    agent = Agent(FunctionModel(model), instructions="You are an operations assistant.",
                  tools=[weather, logs], capabilities=[ProcessHistory(processor)])
    history: list[ModelMessage] = []
    for turn in range(3):
        result = agent.run_sync(f"Question {turn}: how is Oslo?", message_history=history)
        history = processor.full_history(result.all_messages())
        selection = processor.last
        assert selection is not None
        print(f"turn {turn}: the last request sent {len(selection.kept)} of "
              f"{len(selection.kept) + len(selection.dropped)} messages (the system "
              f"prompt as one), {selection.tokens} tokens; the run kept "
              f"{len(result.all_messages())} messages, the full history {len(history)}")
    answers = sum(isinstance(message, ModelResponse) for message in history)
    print(f"{processor.calls} requests; every request within {BUDGET} tokens: "
          f"{max(counts) <= BUDGET}; responses in the full history: {answers}")


if __name__ == "__main__":
    main()

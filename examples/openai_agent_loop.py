"""An OpenAI SDK agent loop whose every request is cut to the budget by a MessageHistory.

    python examples/openai_agent_loop.py

The SDK builds and sends real requests (paths, headers, JSON bodies); an in-process
transport answers them instead of the API (httpx's MockTransport, or httpx2's for the
SDK releases built on it), so the script runs offline. The stand-in API refuses a list
that breaks OpenAI's tool-call rules with the API's own 400, as the real one does.

The loop appends each message to a ``MessageHistory`` as it arrives: what the SDK
returns (typed ``ChatCompletionMessage`` objects) and the tools' results as plain dicts.
Each message is read and counted when appended, so ``history.select_with_report(...)``
before each request only chooses: the same objects back, whole tool exchanges only.
(``select_messages(messages, ...)`` does the same from the whole list on every call.)
"""

import importlib
import json
from typing import Any

import openai

from cupellation.chat import MessageHistory, ordering_problems

_base = importlib.import_module(f"{openai.__name__}._base_client")
http: Any = importlib.import_module("httpx2" if hasattr(_base, "httpx2") else "httpx")

BUDGET = 600  # tokens for the messages of each request
CITIES = ["Paris", "Oslo", "Lima", "Perth", "Quito", "Tunis"]
sent: list[list[dict[str, Any]]] = []


def fake_api(request: Any) -> Any:
    """Answers /v1/chat/completions: two parallel tool calls per turn, then an answer."""
    body = json.loads(request.content)
    messages = body["messages"]
    sent.append(messages)
    problems = ordering_problems(messages)
    if problems:
        return http.Response(400, json={"error": {"message": problems[0],
                                                  "type": "invalid_request_error"}})
    turn = len(sent)
    if turn <= 3:
        calls = [{"id": f"call_{turn}_{k}", "type": "function",
                  "function": {"name": "get_weather",
                               "arguments": json.dumps({"city": CITIES[2 * turn - 2 + k]})}}
                 for k in range(2)]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "Done: six cities checked."}
        finish = "stop"
    return http.Response(200, json={
        "id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 1700000000,
        "model": body["model"], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                          "total_tokens": 2},
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]})


def get_weather(city: str) -> str:
    """A tool with a large answer (an hourly table)."""
    return json.dumps({"city": city, "hourly": [{"hour": h, "temp_c": 10 + h % 7}
                                                for h in range(48)]})


client = openai.OpenAI(api_key="sk-offline", base_url="http://api.invalid/v1", max_retries=0,
                       http_client=http.Client(transport=http.MockTransport(fake_api)))
history: MessageHistory[Any] = MessageHistory([  # dicts and the SDK's replies
    {"role": "system", "content": "You are a weather assistant. Call get_weather per city."},
    {"role": "user", "content": "What is the weather in six cities?"},
], trim={"ToolOutput": 150})
tools: Any = [{"type": "function", "function": {
    "name": "get_weather", "description": "Hourly weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

while True:
    selection = history.select_with_report(max_tokens=BUDGET)
    response = client.chat.completions.create(model="gpt-4o", messages=selection.messages,
                                              tools=tools)
    reply = response.choices[0].message  # a typed ChatCompletionMessage
    print(f"request {len(sent)}: sent {len(selection.kept)} of {len(history)} messages, "
          f"{selection.tokens} tokens ({selection.token_counter}); "
          f"trimmed {len(selection.trimmed)}, left out {len(selection.dropped)}")
    history.append(reply)
    if not reply.tool_calls:
        break
    for call in reply.tool_calls:
        arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
        history.append({"role": "tool", "tool_call_id": call.id,
                        "content": get_weather(arguments["city"])})

print("final answer:", history.messages[-1].content)
print("every request kept the tool-call rules:",
      all(ordering_problems(request) == [] for request in sent))

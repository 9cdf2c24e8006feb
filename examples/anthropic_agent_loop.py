"""An Anthropic SDK agent loop with extended thinking, its requests cut by select_messages.

    python examples/anthropic_agent_loop.py

The SDK builds and sends real requests; an in-process transport (httpx2's MockTransport
for anthropic 2.x, httpx's before) answers them, so the script runs offline. The
stand-in API refuses what Anthropic refuses: orphaned ``tool_use`` or ``tool_result``
blocks, and a final assistant turn that does not start with its thinking block.

The loop appends ``response.content`` (typed ``ThinkingBlock``, ``TextBlock`` and
``ToolUseBlock`` objects) as the assistant message, as Anthropic's docs do; the system
prompt is passed apart, and select_messages counts it without returning it. Anthropic
publishes no tokenizer, so the counts are estimates, and say so.
"""

import importlib
import json
from typing import Any

import anthropic

from cupellation.chat import ordering_problems, select_messages_with_report

_base = importlib.import_module(f"{anthropic.__name__}._base_client")
http: Any = importlib.import_module("httpx2" if hasattr(_base, "httpx2") else "httpx")

SYSTEM = "You are a research assistant. Read each file you are asked about."
FILES = ["notes.md", "plan.md", "budget.csv", "risks.md"]
requests: list[dict[str, Any]] = []


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def refusal(body: dict[str, Any]) -> str | None:
    """What Anthropic would answer with a 400, or None."""
    problems = ordering_problems(body["messages"], system=body.get("system"))
    if problems:
        return problems[0]
    last_user = max(k for k, m in enumerate(body["messages"]) if m["role"] == "user"
                    and any(b["type"] != "tool_result" for b in _blocks(m["content"])))
    turn = [m for m in body["messages"][last_user + 1:] if m["role"] == "assistant"]
    if turn and _blocks(turn[0]["content"])[0]["type"] != "thinking":
        return ("messages: a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks)")
    return None


def fake_api(request: Any) -> Any:
    """Answers /v1/messages: one file read per turn (thinking, text, tool_use), then done."""
    body = json.loads(request.content)
    requests.append(body)
    problem = refusal(body)
    if problem is not None:
        return http.Response(400, json={"type": "error", "error": {
            "type": "invalid_request_error", "message": problem}})
    step = sum(1 for m in body["messages"] if m["role"] == "assistant"
               and any(b["type"] == "tool_use" for b in _blocks(m["content"])))
    reads = len(requests)
    if reads <= len(FILES):
        content = [{"type": "thinking", "thinking": f"Next: {FILES[reads - 1]}.",
                    "signature": f"sig-{reads}"},
                   {"type": "text", "text": f"Reading {FILES[reads - 1]} (step {step + 1})."},
                   {"type": "tool_use", "id": f"toolu_{reads}", "name": "read_file",
                    "input": {"path": FILES[reads - 1]}}]
        stop = "tool_use"
    else:
        content = [{"type": "thinking", "thinking": "All read.", "signature": "sig-end"},
                   {"type": "text", "text": "Summary: four files read."}]
        stop = "end_turn"
    return http.Response(200, json={
        "id": f"msg_{reads}", "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}})


def read_file(path: str) -> str:
    """A tool whose answers are long."""
    return f"# {path}\n" + "".join(f"line {k} of {path}: some content here\n" for k in range(80))


client = anthropic.Anthropic(api_key="sk-ant-offline", base_url="http://api.invalid",
                             max_retries=0,
                             http_client=http.Client(transport=http.MockTransport(fake_api)))
messages: list[Any] = [  # MessageParam dicts, as the SDK's create() takes them
    {"role": "user", "content": "Read notes.md, plan.md, budget.csv and risks.md, then sum up."}]
tools: Any = [{"name": "read_file", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}}]

while True:
    selection = select_messages_with_report(messages, system=SYSTEM, max_tokens=1200,
                                            trim={"ToolOutput": 300})
    response = client.messages.create(
        model="claude-example", max_tokens=1024, system=SYSTEM, tools=tools,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=selection.messages)
    print(f"request {len(requests)}: sent {len(selection.kept)} of {len(messages)} messages, "
          f"about {selection.tokens} tokens ({selection.token_counter}, "
          f"estimate: {selection.token_estimates}); left out {list(selection.dropped)}")
    messages.append({"role": "assistant", "content": response.content})
    calls = [block for block in response.content if block.type == "tool_use"]
    if not calls:
        break
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": block.id,
         "content": read_file(str(block.input["path"]))}
        for block in calls]})

print("final answer:", " ".join(block.text for block in response.content
                                if isinstance(block, anthropic.types.TextBlock)))
print("thinking blocks went back unchanged:",
      any(isinstance(b, anthropic.types.ThinkingBlock) for m in messages
          if m["role"] == "assistant" for b in m["content"]))

"""The agent script of issue 14's "Why", rewritten with select_messages.

    python benchmarks/why_agent_script.py

The first version turned an OpenAI message list into items with chat_to_items, ran a
preset's pipeline and mapped the items back by hand: 6 tool calls were kept while their
results were dropped (a 400 from the provider), counts silently fell back to chars / 4
offline, and every large tool output was lost, the most recent one included. Here the
same conversation goes through one call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cupellation.chat import ordering_problems, select_messages_with_report


def tool_output(name: str, rows: int) -> str:
    return json.dumps([{"row": k, "source": name, "value": k * 17, "note": "ok"}
                       for k in range(rows)])


messages: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a billing support agent. Use the tools."},
    {"role": "user", "content": "My October invoice looks wrong. Can you check it?"},
]
for turn, (first, second) in enumerate([("invoice", "payments"), ("plan", "usage"),
                                        ("refunds", "audit_log")]):
    calls: list[dict[str, Any]] = [{"id": f"call_{turn}_{k}", "type": "function",
              "function": {"name": f"get_{name}", "arguments": json.dumps({"month": "10"})}}
             for k, name in enumerate((first, second))]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    for call, rows in zip(calls, (40 + 30 * turn, 12), strict=True):
        messages.append({"role": "tool", "tool_call_id": call["id"],
                         "content": tool_output(call["function"]["name"], rows)})
    messages.append({"role": "assistant", "content": f"Checked {first} and {second}."})
messages.append({"role": "user", "content": "So was I charged twice? Please explain."})

selection = select_messages_with_report(
    messages, max_tokens=2500, policy="tooluse", trim={"ToolOutput": 800},
    now=datetime(2026, 11, 20, 9, 0, tzinfo=UTC))

print(f"{len(messages)} messages; sent {len(selection.kept)}, left out "
      f"{len(selection.dropped)}, trimmed {len(selection.trimmed)}; {selection.tokens} tokens "
      f"counted with {selection.token_counter} (estimates: {selection.token_estimates})")
print(f"provider rules broken: {ordering_problems(selection.messages)}")
calls = [c["id"] for m in selection.messages for c in m.get("tool_calls") or ()]
results = [m["tool_call_id"] for m in selection.messages if m["role"] == "tool"]
print(f"tool calls sent: {len(calls)}, their results sent: {len(results)}, "
      f"orphans: {len(set(calls) ^ set(results))}")
print("\nThe report, unit by unit, in conversation order:")
for entry in selection.report.included:
    item = entry.item
    trimmed = (f", trimmed from {item.original_tokens:,} to {item.tokens:,} tokens"
               if item.original_tokens else "")
    print(f"  kept     {item.tokens:>5} tok  {entry.reason.name:<9} "
          f"{item.content.splitlines()[0][:60]}{trimmed}")
for excluded in selection.report.excluded:
    item = excluded.item
    print(f"  left out {item.tokens:>5} tok  {excluded.reason.name:<9} "
          f"{item.content.splitlines()[0][:60]}")

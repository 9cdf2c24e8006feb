"""An independent oracle for the providers' ordering rules (from the research notes,
kept apart from the library's own check): each function takes the wire form of a
message list (plain dicts, as the SDK would send them) and returns the errors the
provider would answer with a 400, worded like the provider's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RESPONSES_PAIRS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
_OUTPUT_TO_CALL = {v: k for k, v in RESPONSES_PAIRS.items()}


def check_openai_chat(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Tool messages follow their assistant ``tool_calls`` message (only tool messages
    between) and answer each call id."""
    errors: list[str] = []
    pending: dict[str, int] | None = None
    open_index = -1
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if pending is None or call_id not in pending:
                errors.append(f"messages.[{i}].role: messages with role 'tool' must be a "
                              "response to a preceeding message with 'tool_calls'.")
            else:
                pending.pop(call_id)
            continue
        if pending:
            errors.append(f"messages.[{open_index}]: tool_call_ids without response messages: "
                          + ", ".join(pending))
        pending = None
        if role == "assistant" and m.get("tool_calls"):
            pending = {tc["id"]: 1 for tc in m["tool_calls"]}
            open_index = i
    if pending:
        errors.append(f"messages.[{open_index}]: tool_call_ids without response messages: "
                      + ", ".join(pending))
    return errors


def check_openai_responses(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Calls and outputs pair by call_id (output after call); a reasoning item is followed
    by a call or an assistant message."""
    errors: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, it in enumerate(items):
        typ = it.get("type", "message")
        if typ in RESPONSES_PAIRS:
            calls[it["call_id"]] = i
        elif typ in _OUTPUT_TO_CALL:
            cid = it.get("call_id")
            if cid not in calls:
                errors.append(f"No tool call found for function call output with call_id {cid}.")
            answered.add(str(cid))
        elif typ == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else None
            ok = nxt is not None and (
                nxt.get("type") in RESPONSES_PAIRS or nxt.get("type") == "reasoning"
                or (nxt.get("type", "message") == "message" and nxt.get("role") == "assistant"))
            if not ok:
                errors.append(f"Item '{it.get('id')}' of type 'reasoning' was provided without "
                              "its required following item.")
    errors += [f"No tool output found for function call {cid}." for cid in calls
               if cid not in answered]
    return errors


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def check_anthropic(messages: Sequence[Mapping[str, Any]], *, thinking: bool = False
                    ) -> list[str]:
    """tool_use answered by tool_result blocks first in the next (user) message; every
    tool_result answers the previous message; the first message is the user's; with
    thinking, the final assistant turn starts with a thinking block."""
    errors: list[str] = []
    msgs = [m for m in messages if m.get("role") != "system"]
    if msgs and msgs[0].get("role") != "user":
        errors.append('messages: first message must use the "user" role')
    for i, m in enumerate(msgs):
        blocks = _blocks(m.get("content"))
        if m.get("role") == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if ids:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                got: list[str] = []
                if nxt is not None and nxt.get("role") == "user":
                    for b in _blocks(nxt.get("content")):
                        if b.get("type") != "tool_result":
                            break
                        got.append(str(b.get("tool_use_id")))
                missing = [x for x in ids if x not in got]
                if missing:
                    errors.append(f"messages.{i}: `tool_use` ids were found without "
                                  f"`tool_result` blocks immediately after: {', '.join(missing)}")
        elif m.get("role") == "user":
            prev = msgs[i - 1] if i > 0 else None
            prev_ids = ({b.get("id") for b in _blocks(prev.get("content"))
                         if b.get("type") == "tool_use"}
                        if prev is not None and prev.get("role") == "assistant" else set())
            for j, b in enumerate(blocks):
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev_ids:
                    errors.append(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                                  f"`tool_result` blocks: {b.get('tool_use_id')}")
    if thinking:
        start = 0
        for i, m in enumerate(msgs):
            if m.get("role") == "user" and any(
                    b.get("type") != "tool_result" for b in _blocks(m.get("content"))):
                start = i + 1
        turn = [(i, m) for i, m in enumerate(msgs[start:], start) if m.get("role") == "assistant"]
        if turn and any(b.get("type") == "tool_use" for _, m in turn
                        for b in _blocks(m.get("content"))):
            i, first = turn[0]
            first_type = (_blocks(first.get("content")) or [{}])[0].get("type")
            if first_type not in ("thinking", "redacted_thinking"):
                errors.append(f"messages.{i}.content.0.type: Expected `thinking` or "
                              f"`redacted_thinking`, but found `{first_type}`.")
    return errors


def wire(value: Any) -> Any:
    """What an SDK puts on the wire for ``value``: typed models dumped, the rest as is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {key: wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [wire(item) for item in value]
    return value


def problems(fmt: str, messages: Sequence[Any], *, thinking: bool = False) -> list[str]:
    """The oracle's errors for ``messages`` (any supported objects) in ``fmt``."""
    if fmt == "langchain":
        from langchain_core.messages import convert_to_openai_messages  # noqa: PLC0415

        return check_openai_chat(convert_to_openai_messages(list(messages)))
    data = [wire(message) for message in messages]
    if fmt == "openai":
        return check_openai_chat(data)
    if fmt == "openai-responses":
        return check_openai_responses(data)
    return check_anthropic(data, thinking=thinking)

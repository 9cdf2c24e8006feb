"""Conversations for the chat tests, written once as plain steps and rendered in every
format, as dicts or as the SDKs' own objects (mixed, as an agent loop appends them)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from anthropic.types import TextBlock, ThinkingBlock, ToolUseBlock
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)

FORMATS = ("openai", "openai-responses", "anthropic", "langchain")


def png(width: int, height: int) -> str:
    """A real (tiny-bodied) PNG of the given size, base64: its header carries the size."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + ihdr).decode()


@dataclass(frozen=True)
class Call:
    """One tool call and its result text."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class Step:
    """A user message, an assistant answer, or a tool exchange (parallel calls)."""

    kind: str  # "user" | "assistant" | "exchange"
    text: str = ""
    image: tuple[int, int] | None = None
    calls: tuple[Call, ...] = ()
    thinking: str | None = None  # Anthropic thinking / Responses reasoning summary
    text_after_results: str | None = None  # Anthropic: user text after the tool_results


@dataclass
class Rendered:
    """A conversation in one format: the messages, Anthropic's system apart, and which
    message each step became (their indices)."""

    messages: list[Any]
    system: str | None = None
    steps: list[list[int]] = field(default_factory=list)


def render(fmt: str, system: str, steps: list[Step], *, typed: bool) -> Rendered:
    """``steps`` as ``fmt`` messages; ``typed`` uses the SDK objects where an agent
    loop would have them (the model's own messages)."""
    out = Rendered([], system if fmt == "anthropic" else None)
    if fmt != "anthropic":
        out.messages.append(_system(fmt, system))
    for step in steps:
        start = len(out.messages)
        _RENDER[fmt](out.messages, step, typed)
        out.steps.append(list(range(start, len(out.messages))))
    return out


def _system(fmt: str, text: str) -> Any:
    if fmt == "langchain":
        return SystemMessage(text)
    if fmt == "openai-responses":
        return {"role": "developer", "content": text}
    return {"role": "system", "content": text}


def _openai(out: list[Any], step: Step, typed: bool) -> None:
    if step.kind == "user":
        content: Any = step.text
        if step.image is not None:
            content = [{"type": "text", "text": step.text},
                       {"type": "image_url", "image_url": {
                           "url": f"data:image/png;base64,{png(*step.image)}", "detail": "high"}}]
        out.append({"role": "user", "content": content})
    elif step.kind == "assistant":
        text = {"role": "assistant", "content": step.text}
        out.append(ChatCompletionMessage.model_validate(text) if typed else text)
    else:
        data: dict[str, Any] = {"role": "assistant", "content": step.text or None,
                                "tool_calls": [
            {"id": c.call_id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in step.calls]}
        out.append(ChatCompletionMessage.model_validate(data) if typed else data)
        out.extend({"role": "tool", "tool_call_id": c.call_id, "content": c.result}
                   for c in step.calls)


def _responses(out: list[Any], step: Step, typed: bool) -> None:
    if step.kind == "user":
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": step.text}]
        if step.image is not None:
            parts.append({"type": "input_image", "detail": "auto",
                          "image_url": f"data:image/png;base64,{png(*step.image)}"})
        out.append({"role": "user", "content": parts})
        return
    number = len(out)
    if step.thinking is not None:
        reasoning = {"type": "reasoning", "id": f"rs_{number}",
                     "summary": [{"type": "summary_text", "text": step.thinking}],
                     "encrypted_content": "opaque=="}
        out.append(ResponseReasoningItem.model_validate(reasoning) if typed else reasoning)
    if step.kind == "assistant" or step.text:
        message = {"type": "message", "id": f"msg_{number}", "role": "assistant",
                   "status": "completed",
                   "content": [{"type": "output_text", "text": step.text or "...",
                                "annotations": []}]}
        out.append(ResponseOutputMessage.model_validate(message) if typed else message)
    for call in step.calls:
        data = {"type": "function_call", "id": f"fc_{call.call_id}", "call_id": call.call_id,
                "name": call.name, "arguments": json.dumps(call.arguments),
                "status": "completed"}
        out.append(ResponseFunctionToolCall.model_validate(data) if typed else data)
    out.extend({"type": "function_call_output", "call_id": c.call_id, "output": c.result}
               for c in step.calls)


def _anthropic(out: list[Any], step: Step, typed: bool) -> None:
    if step.kind == "user":
        content: Any = step.text
        if step.image is not None:
            content = [{"type": "text", "text": step.text},
                       {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": png(*step.image)}}]
        out.append({"role": "user", "content": content})
        return
    blocks: list[Any] = []
    if step.thinking is not None:
        blocks.append(ThinkingBlock(type="thinking", thinking=step.thinking, signature="sig==")
                      if typed else {"type": "thinking", "thinking": step.thinking,
                                     "signature": "sig=="})
    if step.text:
        blocks.append(TextBlock(type="text", text=step.text) if typed
                      else {"type": "text", "text": step.text})
    for call in step.calls:
        blocks.append(ToolUseBlock(type="tool_use", id=call.call_id, name=call.name,
                                   input=call.arguments) if typed
                      else {"type": "tool_use", "id": call.call_id, "name": call.name,
                            "input": call.arguments})
    out.append({"role": "assistant", "content": blocks})
    if step.calls:
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": c.call_id, "content": c.result}
            for c in step.calls]
        if step.text_after_results:
            results.append({"type": "text", "text": step.text_after_results})
        out.append({"role": "user", "content": results})


def _langchain(out: list[Any], step: Step, typed: bool) -> None:
    message: BaseMessage
    if step.kind == "user":
        out.append(HumanMessage(step.text))
    elif step.kind == "assistant":
        out.append(AIMessage(step.text))
    else:
        message = AIMessage(step.text, tool_calls=[
            {"name": c.name, "args": c.arguments, "id": c.call_id, "type": "tool_call"}
            for c in step.calls])
        out.append(message)
        out.extend(ToolMessage(c.result, tool_call_id=c.call_id) for c in step.calls)


_RENDER = {"openai": _openai, "openai-responses": _responses, "anthropic": _anthropic,
           "langchain": _langchain}


def weather_conversation() -> list[Step]:
    """The golden conversation: a question, an exchange of two parallel calls (one
    large result), an answer, a follow-up, a single call, and a final question."""
    return [
        Step("user", "What is the weather in Paris and Oslo?"),
        Step("exchange", "Checking both cities.", thinking="Two cities: call the tool twice.",
             calls=(Call("call_1", "get_weather", {"city": "Paris"},
                         "Paris: 18C, light wind. " + "Hourly: 17C 18C 19C 18C. " * 60),
                    Call("call_2", "get_weather", {"city": "Oslo"}, "Oslo: 4C, rain."))),
        Step("assistant", "Paris is 18C and windy; Oslo is 4C with rain."),
        Step("user", "Should I take an umbrella to Oslo tomorrow?"),
        Step("exchange", thinking="Need the forecast.",
             calls=(Call("call_3", "get_forecast", {"city": "Oslo", "day": "tomorrow"},
                         "Oslo tomorrow: 80% rain, 6C."),)),
        Step("assistant", "Yes: 80% chance of rain in Oslo tomorrow."),
        Step("user", "Thanks. And Paris tomorrow?"),
    ]


_WORDS = st.sampled_from(["rain", "sun", "18C", "Oslo", "Paris", "wind", "é", "数据", "ok",
                          "{\"a\": 1}", "\n", "<|endoftext|>", "42"])


@st.composite
def _text(draw: st.DrawFn, most: int = 12) -> str:
    return " ".join(draw(st.lists(_WORDS, min_size=1, max_size=most)))


@st.composite
def conversations(draw: st.DrawFn) -> list[Step]:
    """Turns: a user message (perhaps with an image), then answers and exchanges."""
    steps: list[Step] = []
    serial = 0
    for _ in range(draw(st.integers(1, 5))):
        image = draw(st.none() | st.tuples(st.integers(16, 3000), st.integers(16, 3000)))
        steps.append(Step("user", draw(_text()), image=image))
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                calls = []
                for _ in range(draw(st.integers(1, 3))):  # parallel calls
                    serial += 1
                    size = draw(st.sampled_from([1, 5, 40, 200]))
                    calls.append(Call(f"call_{serial}", "lookup", {"n": serial},
                                      draw(_text(size))))
                steps.append(Step(
                    "exchange", draw(st.sampled_from(["", "Let me look."])),
                    thinking=draw(st.none() | _text(4)), calls=tuple(calls),
                    text_after_results=draw(st.none() | st.just("and a note"))))
            else:
                steps.append(Step("assistant", draw(_text()),
                                  thinking=draw(st.none() | _text(4))))
    _thinking_opens_each_turn(steps)
    return steps


def _thinking_opens_each_turn(steps: list[Step]) -> None:
    """A conversation with thinking on thinks in every answer: when any step thinks,
    every answer step does (a turn opened without thinking whose tool loop ends the
    list is a transcript Anthropic refuses, and a turn may open after any user
    message, the tool results with text included: a model with thinking on writes
    none of them)."""
    if not any(step.thinking for step in steps):
        return
    for k, step in enumerate(steps):
        if step.kind != "user" and step.thinking is None:
            steps[k] = replace(step, thinking="thinking first")

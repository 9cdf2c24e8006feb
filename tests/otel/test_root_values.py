"""The root span reads well in LLM trace tools: input.value / output.value as JSON
within their byte cap, content per the capture policy, and the application's session,
user and conversation ids from RunInfo or from OpenInference's context keys."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context

from cupellation import ContextBudget, ContextItem, GreedySlice, Pipeline, RunInfo
from cupellation.exceptions import InvalidValueError
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.scoring import CompositeScorer, PriorityScorer, RecencyScorer

from ._support import make_sdk, run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items

PIPELINE = Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                    GreedySlice())


def _budget(items: list[ContextItem], fraction: float) -> ContextBudget:
    target = int(sum(item.tokens for item in items) * fraction)
    return ContextBudget(max_tokens=2 * target, target_tokens=target)


def _root(collector_args: dict[str, Any], items: list[ContextItem],
          tier: str = "Full") -> tuple[dict[str, Any], Any]:
    sdk = make_sdk(limits=None)
    collector = SpanCollector(tracer_provider=sdk.tracer_provider, tier=tier,
                              **collector_args)
    traced = run_both(PIPELINE, items, _budget(items, 0.4), collector)
    (root,) = sdk.by_name("cupel.pipeline")
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert [(e.score, e.reason) for e in rebuilt.report.included] == [
        (e.score, e.reason) for e in traced.report.included]
    return dict(root.attributes or {}), traced


def _document(value: str) -> Any:
    """The JSON document after a root value's line in words and blank line."""
    words, _, document = value.partition("\n\n")
    assert words
    assert not words.startswith("{")
    return json.loads(document)


@pytest.mark.parametrize("size", [30, 5_000])
def test_input_and_output_values_are_json_under_2048_bytes(size: int) -> None:
    """Under the default capture (none): input.value has the budget and candidates,
    output.value the counts and every reason's count in full and the first items by
    score with kind, tokens, score and reason but no content; both text/plain (a line
    in words, a blank line, the JSON) and within 2,048 bytes, also for 5,000 candidates."""
    items = make_items(size, 4, pinned_index=1)
    attributes, traced = _root({}, items)
    assert attributes["input.mime_type"] == attributes["output.mime_type"] == "text/plain"
    for key in ("input.value", "output.value"):
        assert len(attributes[key].encode("utf-8")) <= 2048
    given = _document(attributes["input.value"])
    assert given["candidates"] == {"count": size,
                                   "tokens": sum(item.tokens for item in items)}
    assert given["budget"]["target_tokens"] == _budget(items, 0.4).target_tokens
    out = _document(attributes["output.value"])
    report = traced.report
    assert out["outcome"] == "completed"
    assert out["kept"]["count"] == len(report.included)
    assert out["dropped"]["count"] == len(report.excluded)
    reasons: dict[str, int] = {}
    for entry in report.excluded:
        reasons[entry.reason.name] = reasons.get(entry.reason.name, 0) + 1
    assert out["dropped"]["reasons"] == reasons
    kept, dropped = out["kept_items"], out["dropped_items"]
    assert (kept["of"], dropped["of"]) == (len(report.included), len(report.excluded))
    assert kept["shown"] == len(kept["items"]) > 0
    assert dropped["shown"] == len(dropped["items"]) > 0
    assert list(out).index("dropped_items") < list(out).index("kept_items")
    assert list(out)[-1] == "more"
    assert "cupellation report --from" in out["more"]
    best = max(entry.score for entry in report.included)
    assert kept["items"][0]["score"] == round(best, 3)
    largest = max(entry.item.tokens for entry in report.excluded)
    assert dropped["items"][0]["tokens"] == largest
    for shown in kept["items"] + dropped["items"]:
        assert {"index", "kind", "tokens", "score", "reason"} <= set(shown)
        assert "content" not in shown
        assert items[shown["index"]].tokens == shown["tokens"]


def test_full_capture_shows_content_and_the_cap_is_configurable() -> None:
    """Under full capture the shown items carry their content; value_cap=600 keeps
    output.value within 600 bytes; a cap under 256 is refused naming the value."""
    items = make_items(200, 9)
    attributes, _ = _root({"content_capture": "full", "value_cap": 600}, items)
    out = _document(attributes["output.value"])
    assert len(attributes["output.value"].encode("utf-8")) <= 600
    assert all(shown["content"] == items[shown["index"]].content[:160] + (
        "…" if len(items[shown["index"]].content) > 160 else "")
        for shown in out["kept_items"]["items"] + out["dropped_items"]["items"])
    with pytest.raises(InvalidValueError, match="value_cap"):
        SpanCollector(value_cap=100)


def test_a_trimmed_item_shows_what_it_counted_before_in_output_value() -> None:
    """A kept item trimmed before selection (``original_tokens`` set) shows it beside
    its tokens in output.value, so a trace view says "trimmed from N"; untrimmed items
    show no such key."""
    items = [*make_items(5, 5), ContextItem(content="head [...] tail", tokens=40,
                                             original_tokens=1450, priority=9)]
    attributes, _ = _root({}, items)
    out = _document(attributes["output.value"])
    shown = {entry["index"]: entry
             for entry in out["kept_items"]["items"] + out["dropped_items"]["items"]}
    assert shown[5]["tokens"] == 40
    assert shown[5]["original_tokens"] == 1450
    assert all("original_tokens" not in entry for index, entry in shown.items()
               if index != 5)


def test_session_user_and_conversation_ids_from_run_info_and_context() -> None:
    """RunInfo's ids become session.id, user.id and gen_ai.conversation.id on the root;
    without them, the OpenTelemetry context keys 'session.id' and 'user.id' (as
    OpenInference's using_session/using_user set them) are picked up."""
    items = make_items(10, 1)
    sdk = make_sdk()
    collector = sdk.collector()
    PIPELINE.run(items, _budget(items, 0.5), collector,
                 run_info=RunInfo(session_id="s-1", user_id="u-1", conversation_id="c-1"))
    token = otel_context.attach(otel_context.set_value(
        "user.id", "u-ctx", otel_context.set_value("session.id", "s-ctx")))
    try:
        PIPELINE.run(items, _budget(items, 0.5), collector)
    finally:
        otel_context.detach(token)
    first, second = (dict(s.attributes or {}) for s in sdk.by_name("cupel.pipeline"))
    assert (first["session.id"], first["user.id"], first["gen_ai.conversation.id"]) == (
        "s-1", "u-1", "c-1")
    assert (second["session.id"], second["user.id"]) == ("s-ctx", "u-ctx")
    assert "gen_ai.conversation.id" not in second

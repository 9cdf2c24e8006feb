"""Regressions from review: reasons that name the true cause, inputs that once
escaped the exception hierarchy, and hashes consistent with equality."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    CupelError,
    DiagnosticTraceCollector,
    FunctionScorer,
    GreedySlice,
    KnapsackSlice,
    Pipeline,
    QuotaSlice,
    RecencyScorer,
    SelectionReport,
    TraceDetailLevel,
    UShapedPlacer,
)
from cupellation.events import event_from_json, event_to_json
from cupellation.exceptions import DecodeError, InvalidTypeError, InvalidValueError
from cupellation.reasons import UnknownExclusionReason, exclusion_reason_from_dict
from cupellation.slicing import QuotaEntry
from cupellation.testing import assert_excluded

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _report(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget
            ) -> SelectionReport:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    pipeline.run(items, budget, collector)
    return collector.build_report()


def test_pinned_override_only_when_the_pins_took_the_room() -> None:
    """A message kept out by its kind's quota share is BudgetExceeded, not blamed
    on a 1-token pinned item whose removal would not bring it back."""
    slicer = QuotaSlice(GreedySlice(), [QuotaEntry("Message", require=0, cap=10)])
    items = [ContextItem("sys", 1, pinned=True, kind="SystemPrompt"),
             ContextItem("m", 200, timestamp=T0)]
    report = _report(Pipeline(RecencyScorer(), slicer), items, ContextBudget(1000, 1000))
    assert_excluded(report, "m", reason="BudgetExceeded", item_tokens=200)


def test_zero_valued_knapsack_exclusion_is_not_blamed_on_pins() -> None:
    """An item the knapsack leaves out for its zero value is not a PinnedOverride."""
    scorer = FunctionScorer(lambda item, _all: 0.0)
    items = [ContextItem("sys", 1, pinned=True), ContextItem("x", 10)]
    report = _report(Pipeline(scorer, KnapsackSlice()), items, ContextBudget(1000, 500))
    assert_excluded(report, "x", reason="BudgetExceeded")


def test_pinned_override_still_reported_when_pins_consumed_the_budget() -> None:
    """The vector's case: 80 tokens left out of 30 available, 150 without the pin."""
    items = [ContextItem("pin", 120, pinned=True), ContextItem("r", 80, timestamp=T0)]
    report = _report(Pipeline(RecencyScorer()), items, ContextBudget(1000, 150))
    assert_excluded(report, "r", reason="PinnedOverride", displaced_by="pin")


@pytest.mark.parametrize("strategy", [GreedySlice, UShapedPlacer])
def test_a_class_instead_of_an_instance_is_refused_at_construction(strategy: type) -> None:
    """Passing GreedySlice instead of GreedySlice() is a ConfigurationError with a hint."""
    kwargs: dict[str, Any] = {"slicer" if strategy is GreedySlice else "placer": strategy}
    with pytest.raises(InvalidValueError, match=r"pass an instance"):
        Pipeline(RecencyScorer(), **kwargs)


def test_a_non_collector_is_refused_naming_the_argument() -> None:
    """run(collector=<not a collector>) raises InvalidTypeError naming 'collector'."""
    with pytest.raises(InvalidTypeError, match="collector"):
        Pipeline(RecencyScorer()).run([ContextItem("a", 1)], ContextBudget(10, 5),
                                      TraceDetailLevel.ITEM)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", [5, -1, "verbose", "items", True])
def test_diagnostic_collector_refuses_unknown_levels(level: Any) -> None:
    """An unknown detail level is an InvalidValueError naming detail_level."""
    with pytest.raises(InvalidValueError, match="detail_level"):
        DiagnosticTraceCollector(level)


@pytest.mark.parametrize(("level", "expected"), [
    ("item", TraceDetailLevel.FULL), ("ITEM", TraceDetailLevel.FULL),
    ("stage", TraceDetailLevel.STAGE_ONLY), ("Full", TraceDetailLevel.FULL),
    ("StageAndExclusions", TraceDetailLevel.STAGE_AND_EXCLUSIONS),
    ("stage_and_exclusions", TraceDetailLevel.STAGE_AND_EXCLUSIONS),
    (1, TraceDetailLevel.STAGE_AND_EXCLUSIONS), (2, TraceDetailLevel.FULL),
])
def test_diagnostic_collector_accepts_tier_member_and_legacy_names(
        level: Any, expected: TraceDetailLevel) -> None:
    """The OpenTelemetry tier names, the member names and the legacy aliases
    (ITEM, STAGE) all name a level, in any case. Changed deliberately with the
    event stream: "item" used to be refused; it is now the legacy name of FULL."""
    assert DiagnosticTraceCollector(level).detail_level is expected


def test_stray_candidate_reported_by_classify_even_with_diagnostics() -> None:
    """A non-item among the candidates is named by index, diagnostics on or off."""
    class Fake:
        tokens = "many"

    with pytest.raises(InvalidTypeError, match=r"candidates\[1\]"):
        Pipeline(RecencyScorer()).run([ContextItem("a", 1), Fake()],  # type: ignore[list-item]
                                      ContextBudget(10, 5), DiagnosticTraceCollector())


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"tokens": 2**63}, "tokens"),
    ({"tokens": 1, "priority": -(2**63) - 1}, "priority"),
    ({"tokens": 1, "future_relevance_hint": 10**400}, "future_relevance_hint"),
])
def test_out_of_range_numbers_raise_from_the_hierarchy(kwargs: dict[str, Any],
                                                       field: str) -> None:
    """Integers beyond signed 64-bit and floats beyond float64 name their field."""
    with pytest.raises(InvalidValueError) as info:
        ContextItem("a", **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize(("wire", "field"), [
    ({"content": "a", "tokens": 1, "tags": "urgent"}, "tags"),
    ({"content": "a", "tokens": 1, "tags": 5}, "tags"),
    ({"content": "a", "tokens": 1, "metadata": [1]}, "metadata"),
    ({"content": "a", "tokens": 1, "futureRelevanceHint": "high"}, "futureRelevanceHint"),
])
def test_item_json_of_the_wrong_shape_is_a_decode_error(wire: dict[str, Any],
                                                       field: str) -> None:
    """A string where tags belong is not split into letters; it is refused by name."""
    with pytest.raises(DecodeError) as info:
        ContextItem.from_dict(wire)
    assert info.value.field == field
    with pytest.raises(DecodeError) as info:
        ContextItem.from_json(json.dumps(wire))
    assert info.value.field == field


@pytest.mark.parametrize("slots", [[1, 2], "ab"])
def test_budget_json_with_bad_reserved_slots_is_a_decode_error(slots: object) -> None:
    """reservedSlots must be an object, as a mapping or as JSON text."""
    wire = {"maxTokens": 10, "targetTokens": 5, "reservedSlots": slots}
    with pytest.raises(DecodeError, match="reservedSlots"):
        ContextBudget.from_dict(wire)
    with pytest.raises(DecodeError, match="reservedSlots"):
        ContextBudget.from_json(json.dumps(wire))


def test_reserved_slots_repeating_a_kind_in_another_case_is_refused() -> None:
    """{"Message": 1, "message": 3} is ambiguous, so it is refused."""
    with pytest.raises(InvalidValueError, match="reserved_slots key"):
        ContextBudget(10, 5, reserved_slots={"Message": 1, "message": 3})


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda r: r["excluded"][0].__setitem__("score", "abc"), "excluded"),
    (lambda r: r["events"][0].__setitem__("duration_ms", "x"), "events"),
    (lambda r: r.__setitem__("total_candidates", "many"), "total_candidates"),
    (lambda r: r.__setitem__("incomplete", "abc"), "incomplete"),
    (lambda r: r.__setitem__("included", None), "included"),
])
def test_damaged_report_json_is_a_decode_error(mutate: Any, field: str) -> None:
    """Each damaged member raises DecodeError naming where it was, from the mapping
    and from its JSON text; nothing is silently accepted or split into characters."""
    items = [ContextItem("a", 10, timestamp=T0), ContextItem("b", 90, timestamp=T0)]
    wire = _report(Pipeline(RecencyScorer()), items, ContextBudget(100, 50)).to_dict()
    mutate(wire)
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_dict(wire)
    assert info.value.field.startswith(field)
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_json(json.dumps(wire))
    assert info.value.field.startswith(field)


def test_report_text_that_is_not_json_is_a_decode_error() -> None:
    """from_json of text that is not JSON raises DecodeError, not msgspec's own error."""
    with pytest.raises(DecodeError):
        SelectionReport.from_json("{not json")


def test_non_finite_hint_is_written_as_valid_json_and_read_back() -> None:
    """NaN and infinite hints become strings in JSON (strict parsers accept the
    file) and decode to the same values, from the text and from the mapping."""

    def strict(name: str) -> object:
        raise AssertionError(f"{name} is not valid JSON")

    for hint in (float("nan"), float("inf"), float("-inf")):
        item = ContextItem("a", 1, future_relevance_hint=hint)
        text = item.to_json()
        assert isinstance(json.loads(text, parse_constant=strict)["futureRelevanceHint"], str)
        json.dumps(item.to_dict(), allow_nan=False)
        for back in (ContextItem.from_json(text), ContextItem.from_dict(item.to_dict())):
            assert repr(back.future_relevance_hint) == repr(hint)


def _full_run_events() -> tuple[Any, ...]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(RecencyScorer()).run([ContextItem("a", 1, timestamp=T0 + timedelta(days=1)),
                                   ContextItem("b", 9, timestamp=T0)],
                                  ContextBudget(10, 5), collector)
    return collector.events


def test_equal_decoded_events_are_equal() -> None:
    """Decoding the same event line twice gives equal events, for every event of a
    run (run_started with its pipeline mapping, inclusions, exclusions)."""
    for event in _full_run_events():
        line = event_to_json(event)
        assert event_from_json(line) == event_from_json(line.encode("utf-8")) == event


def test_equal_decoded_events_hash_equal() -> None:
    """Equal events (each decoded twice from its line) have equal hashes and
    collapse in a set, for every event of a run."""
    for event in _full_run_events():
        line = event_to_json(event)
        a, b = event_from_json(line), event_from_json(line)
        assert hash(a) == hash(b)
        assert len({a, b}) == 1


def test_unknown_reasons_hash() -> None:
    """An unknown reason holding a list is hashable, built by hand or decoded, and
    equal unknown reasons hash equal."""
    reason = UnknownExclusionReason(reason_name="X", fields={"a": [1]})
    decoded = exclusion_reason_from_dict({"reason": "X", "a": [1]})
    assert decoded == exclusion_reason_from_dict({"reason": "X", "a": [1]})
    assert isinstance(hash(reason), int)
    assert hash(decoded) == hash(exclusion_reason_from_dict({"reason": "X", "a": [1]}))


def test_run_started_pipeline_description_is_read_only() -> None:
    """An observer cannot tamper with the recorded configuration."""
    collector = DiagnosticTraceCollector()
    Pipeline(RecencyScorer()).run([], ContextBudget(10, 5), collector)
    started = collector.events[0]
    with pytest.raises(TypeError):
        started.pipeline["scorer"] = "tampered"  # type: ignore[union-attr,index]


def test_every_bad_input_here_is_a_cupel_error() -> None:
    """The regressions above all raise from the one documented hierarchy."""
    for bad in (lambda: ContextItem("a", 2**64),
                lambda: ContextItem.from_dict({"content": "a", "tokens": 1, "tags": 3}),
                lambda: ContextItem.from_json('{"content": "a", "tokens": 1, "tags": 3}'),
                lambda: DiagnosticTraceCollector(9)):
        with pytest.raises(CupelError):
            bad()

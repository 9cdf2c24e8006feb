"""A report rebuilt from an event stream is right, or says in ``incomplete`` what is
wrong — never a different report presented as whole."""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import (
    ContextBudget,
    ContextItem,
    Pipeline,
    RecencyScorer,
    ReportBuilder,
    TraceDetailLevel,
    build_report,
)
from cupellation.events import (
    ItemEventBatch,
    PipelineEvent,
    RunStarted,
    StageCompleted,
    event_from_json,
    event_to_dict,
    event_to_json,
    events_from_json_lines,
)
from cupellation.exceptions import DecodeError, InvalidValueError

from ._runs import T0, RecordedRun, record, runs

EVENT_TYPES = ["run_started", "stage_started", "stage_completed", "item_excluded",
               "item_included", "overflow", "count_shortfall", "run_completed", "run_failed",
               "mystery_event"]


def _lines(run: RecordedRun) -> list[str]:
    return [event_to_json(event) for event in run.events]


def _sample_run() -> RecordedRun:
    items = [ContextItem(content=f"m{i}", tokens=10 + i,
                         timestamp=T0.replace(day=1 + i)) for i in range(8)]
    items.append(ContextItem(content="sys", tokens=5, pinned=True))
    items.append(ContextItem(content="m1", tokens=3))
    items.append(ContextItem(content="bad", tokens=-2))
    pipeline = Pipeline(scorer=RecencyScorer(),
                        budget=ContextBudget(max_tokens=100, target_tokens=60))
    run = record(pipeline, items, pipeline.budget)  # type: ignore[arg-type]
    assert not run.failed
    assert run.report.is_complete
    return run


def _fold_lines(lines: list[str]) -> Any:
    return build_report(events_from_json_lines(lines))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[RecordedRun, list[str], str]:
    run = draw(runs)
    lines = _lines(run)
    kind = draw(st.sampled_from(["drop", "duplicate", "swap", "retype", "truncate"]))
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "drop":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(draw(st.integers(0, len(lines))), lines[i])
    elif kind == "swap":
        j = draw(st.integers(0, len(lines) - 1).filter(lambda j: j != i))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "retype":
        data = json.loads(lines[i])
        data["type"] = draw(st.sampled_from([t for t in EVENT_TYPES if t != data["type"]]))
        lines[i] = json.dumps(data)
    else:
        # A fraction, not a position: run ids and timings make line lengths vary
        # between the draws hypothesis replays.
        cut = draw(st.floats(0.0, 1.0, exclude_max=True))
        lines[i] = lines[i][:int(cut * len(lines[i]))]
    return run, lines, kind


def _check_mutation_is_detected(case: tuple[RecordedRun, list[str], str]) -> None:
    """The property: a mutated run's JSON lines give the identical report, a
    DecodeError, or a report whose ``incomplete`` says what is wrong."""
    run, lines, kind = case
    try:
        rebuilt = _fold_lines(lines)
    except DecodeError:
        return
    if run.failed:
        assert rebuilt.incomplete, kind
        return
    assert run.report.is_complete
    assert rebuilt == run.report or rebuilt.incomplete, (kind, rebuilt.incomplete)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_a_sample_of_single_mutations_of_an_event_file_is_detected(
        case: tuple[RecordedRun, list[str], str]) -> None:
    """Dropping, duplicating, swapping, retyping or truncating any one line of a
    run's JSON lines gives the identical report, a DecodeError, or a report whose
    ``incomplete`` says what is wrong (300 generated cases in the default run; the
    exhaustive run tries 10,000)."""
    _check_mutation_is_detected(case)


@pytest.mark.exhaustive
@settings(max_examples=int(os.environ.get("CUPELLATION_MUTATIONS", "10000")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_any_single_mutation_of_an_event_file_is_detected(case: tuple[RecordedRun, list[str],
                                                                      str]) -> None:
    """Dropping, duplicating, swapping, retyping or truncating any one line of a
    run's JSON lines gives the identical report, a DecodeError, or a report whose
    ``incomplete`` says what is wrong — never a different report presented as whole
    (10,000 generated cases, or ``CUPELLATION_MUTATIONS``; marked exhaustive)."""
    _check_mutation_is_detected(case)


@settings(max_examples=300, deadline=None)
@given(runs)
def test_the_json_lines_rebuild_the_in_process_report_exactly(run: RecordedRun) -> None:
    """Without damage, the report folded from a run's JSON lines equals the one
    folded in process, field for field."""
    assert _fold_lines(_lines(run)) == run.report


def test_a_gap_in_the_sequence_is_reported() -> None:
    """A missing event (here a stage_completed) shows as a sequence gap."""
    run = _sample_run()
    lines = _lines(run)
    index = next(k for k, line in enumerate(lines) if '"stage_completed"' in line)
    del lines[index]
    report = _fold_lines(lines)
    assert any("missing from the sequence" in p for p in report.incomplete)
    assert any("started but its completion is missing" in p for p in report.incomplete)


def test_a_repeated_event_is_ignored_and_reported() -> None:
    """A duplicated line is folded once, and the report says an event was repeated."""
    run = _sample_run()
    lines = _lines(run)
    at = next(k for k, line in enumerate(lines) if '"item_excluded"' in line)
    lines.insert(at + 1, lines[at])
    report = _fold_lines(lines)
    assert any("repeated" in p for p in report.incomplete)
    assert report.excluded == run.report.excluded


def test_reordered_events_are_reported() -> None:
    """Two swapped lines show as events out of order."""
    run = _sample_run()
    lines = _lines(run)
    lines[3], lines[4] = lines[4], lines[3]
    assert any("out of order" in p for p in _fold_lines(lines).incomplete)


def test_stage_counts_are_checked_against_item_events() -> None:
    """A stage_completed whose counts disagree with the item events is reported."""
    run = _sample_run()
    events = [msgspec.structs.replace(e, items_out=e.items_out + 1)
              if isinstance(e, StageCompleted) and str(e.stage) == "Slice" else e
              for e in run.events]
    report = build_report(events)
    assert any("stage Slice removed" in p for p in report.incomplete)


def test_run_completed_counts_are_checked() -> None:
    """A run_completed that counts other inclusions than recorded is reported."""
    run = _sample_run()
    last = run.events[-1]
    events = [*run.events[:-1], msgspec.structs.replace(
        last, included_count=last.included_count + 1)]  # type: ignore[union-attr]
    assert any("run_completed counts" in p for p in build_report(events).incomplete)


def test_a_candidate_both_included_and_excluded_is_reported() -> None:
    """An index that appears in an inclusion and an exclusion is reported."""
    run = _sample_run()
    data = [event_to_dict(e) for e in run.events]
    included = next(d for d in data if d["type"] == "item_included")
    excluded = next(d for d in data if d["type"] == "item_excluded")
    excluded["candidate_index"] = included["candidate_index"]
    report = build_report(event_from_json(json.dumps(d)) for d in data)
    assert any("both included and excluded" in p for p in report.incomplete)


def test_an_out_of_range_candidate_index_is_reported() -> None:
    """A candidate index beyond run_started's candidate count is reported."""
    run = _sample_run()
    data = [event_to_dict(e) for e in run.events]
    next(d for d in data if d["type"] == "item_excluded")["candidate_index"] = 999
    report = build_report(event_from_json(json.dumps(d)) for d in data)
    assert any("out of range" in p for p in report.incomplete)


def test_a_candidate_with_no_decision_is_reported() -> None:
    """A Full-level run that lost an item event reports an undecided candidate."""
    run = _sample_run()
    events = list(run.events)
    k = next(k for k, e in enumerate(events) if e.type == "item_included")
    del events[k]
    report = build_report(events)
    assert any("have no decision" in p for p in report.incomplete)


def test_repeated_run_started_and_run_completed_are_reported() -> None:
    """A second run_started or run_completed (with its own seq) is reported."""
    run = _sample_run()
    n = len(run.events)
    extra_start = msgspec.structs.replace(run.events[0], seq=n)
    extra_end = msgspec.structs.replace(run.events[-1], seq=n + 1)
    report = build_report([*run.events, extra_start, extra_end])
    assert any("run_started appears 2 times" in p for p in report.incomplete)
    assert any("appears 2 times" in p and "end" in p for p in report.incomplete)


def test_an_unknown_event_type_is_kept_and_reported() -> None:
    """An event of a type this version does not know decodes as UnknownEvent, and the
    report says it was not understood."""
    run = _sample_run()
    data = event_to_dict(run.events[-1])
    data.update(type="future_thing", seq=len(run.events), extra={"a": 1})
    unknown = event_from_json(json.dumps(data))
    assert unknown.event_type == "future_thing"  # type: ignore[union-attr]
    report = build_report([*run.events, unknown])
    assert any("unknown type 'future_thing'" in p for p in report.incomplete)


@pytest.mark.parametrize("schema", [1, 4, 99, "2", "3", None])
def test_an_unknown_schema_version_is_a_decode_error(schema: object) -> None:
    """Only schemas 2 and 3 decode; anything else names the schema field."""
    data = event_to_dict(_sample_run().events[0])
    data["schema"] = schema
    with pytest.raises(DecodeError, match="schema"):
        event_from_json(json.dumps(data))


@pytest.mark.parametrize(("field", "value", "text"), [
    ("score", float("nan"), "NaN"), ("score", float("inf"), "Infinity"),
    ("score", None, None), ("score", "0.5", None), ("reason.item_tokens", None, None),
    ("reason.item_tokens", 1.5, None), ("candidate_index", True, None),
    ("item.tokens", "7", None), ("seq", -1, None), ("item.tags", "x", None),
])
def test_bad_values_are_decode_errors_naming_field_and_line(field: str, value: Any,
                                                            text: str | None) -> None:
    """NaN, infinities, null and wrongly typed fields raise DecodeError naming the
    field and the line; none decodes to be written back out as invalid JSON."""
    run = _sample_run()
    lines = _lines(run)
    at = next(k for k, line in enumerate(lines)
              if '"BudgetExceeded"' in line)
    data = json.loads(lines[at])
    if text is None:
        data[field] = value
        lines[at] = json.dumps(data)
    else:
        data[field] = "@@"
        lines[at] = json.dumps(data).replace('"@@"', text)
    with pytest.raises(DecodeError) as caught:
        list(events_from_json_lines(lines))
    assert caught.value.line == at + 1
    if text is None:
        assert caught.value.field == field


def test_a_nan_score_cannot_be_projected() -> None:
    """An event built by hand with a NaN score is refused by the flat mapping rather
    than written out as invalid JSON."""
    event = next(e for e in _sample_run().events if e.type == "item_excluded")
    with pytest.raises(InvalidValueError, match="score"):
        event_to_json(msgspec.structs.replace(event, score=float("nan")))


def test_report_builder_folds_interleaved_runs_separately() -> None:
    """One ReportBuilder per run id folds two interleaved runs into each run's own
    report, equal to the in-process reports."""
    first, second = _sample_run(), _sample_run()
    builders: dict[str, ReportBuilder] = {}
    for a, b in zip(first.events, second.events, strict=False):
        for event in (a, b):
            builders.setdefault(event.run_id, ReportBuilder(event.run_id)).add(event)
    for event in first.events[len(second.events):] + second.events[len(first.events):]:
        builders[event.run_id].add(event)
    assert builders[first.events[0].run_id].result() == first.report
    assert builders[second.events[0].run_id].result() == second.report
    assert all(builder.finished for builder in builders.values())


def test_a_builder_refuses_another_runs_events() -> None:
    """A builder pinned to one run refuses an event of another run."""
    first, second = _sample_run(), _sample_run()
    builder = ReportBuilder(first.events[0].run_id)
    with pytest.raises(InvalidValueError, match="run_id"):
        builder.add(second.events[0])


def test_batches_and_expanded_events_fold_identically() -> None:
    """A collector's batches and the same events one by one fold to one report."""
    run = _sample_run()
    assert any(isinstance(entry, ItemEventBatch) for entry in run.entries)
    assert build_report(run.entries) == build_report(run.events) == run.report


def test_hashed_content_makes_a_report_incomplete() -> None:
    """A stream whose run_started records hash capture yields a report that says its
    content is not the original."""
    run = _sample_run()
    started = run.events[0]
    assert isinstance(started, RunStarted)
    events: list[PipelineEvent] = [msgspec.structs.replace(started, content_capture="hash"),
                                   *run.events[1:]]
    assert any("captured as 'hash'" in p for p in build_report(events).incomplete)


@pytest.mark.parametrize(("level", "note"), [
    (TraceDetailLevel.STAGE_ONLY, "StageOnly"),
    (TraceDetailLevel.STAGE_AND_EXCLUSIONS, "StageAndExclusions"),
])
def test_lower_detail_levels_say_what_they_leave_out(level: TraceDetailLevel,
                                                     note: str) -> None:
    """Reports folded below Full say which decisions their level does not record."""
    items = [ContextItem(content=f"m{i}", tokens=30) for i in range(5)]
    pipeline = Pipeline(scorer=RecencyScorer())
    run = record(pipeline, items, ContextBudget(max_tokens=100, target_tokens=70), level)
    assert any(note in p for p in run.report.incomplete)


def test_a_seq_far_ahead_costs_one_gap_not_memory() -> None:
    """A damaged seq of 2**62 is one reported gap (kept as a range), and a late event
    that fills part of a gap is accepted once, then refused as a repeat."""
    run = _sample_run()
    events = list(run.events)
    builder = ReportBuilder()
    for event in events[:3]:
        builder.add(event)
    builder.add(msgspec.structs.replace(events[3], seq=2**62))
    builder.add(events[4])
    builder.add(events[4])
    report = builder.result()
    assert any("missing from the sequence" in p and "in all" in p for p in report.incomplete)
    assert any("out of order" in p for p in report.incomplete)
    assert any("repeated" in p for p in report.incomplete)

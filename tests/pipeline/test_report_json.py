"""The report's fast JSON writer says exactly what ``to_dict`` says."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import MappingProxyType

import msgspec
import pytest
from hypothesis import given, settings

from cupellation import (
    ContextBudget,
    ContextItem,
    Pipeline,
    RecencyScorer,
    SelectionReport,
    build_report,
)
from cupellation._report import ExcludedItem, IncludedItem, writer
from cupellation.events import event_from_json, event_to_json
from cupellation.reasons import InclusionReason, UnknownExclusionReason

from ._runs import RecordedRun, runs


@settings(max_examples=300, deadline=None)
@given(runs)
def test_report_json_text_decodes_to_to_dict(run: RecordedRun) -> None:
    """For random runs, ``json.loads(report.to_json())`` equals ``report.to_dict()``,
    and the text decodes back to the same report."""
    text = run.report.to_json()
    assert json.loads(text) == run.report.to_dict()
    assert SelectionReport.from_json(text) == run.report


def test_unusual_items_and_reasons_are_written_like_to_dict() -> None:
    """Nested metadata, a non-finite hint, a non-default source, unknown reasons and
    microsecond timestamps all come out as to_dict has them."""
    item = ContextItem(content="x\u2028\"<", tokens=0, source="chat", tags=("a",),
                       metadata={"n": {"deep": [1, 2.5, None]}},
                       future_relevance_hint=float("nan"), pinned=True, original_tokens=3,
                       timestamp=datetime(2026, 1, 1, 0, 0, 0, 5, tzinfo=UTC))
    report = SelectionReport(
        events=(), total_candidates=2, total_tokens_considered=0,
        included=(IncludedItem(item, 0.0, InclusionReason(
            name="Later", fields=MappingProxyType({"k": [1]}))),),
        excluded=(ExcludedItem(item, 0.5, UnknownExclusionReason(
            reason_name="Future", fields=MappingProxyType({"why": "x"}))),),
        incomplete=("a note",))
    assert json.loads(report.to_json(indent=2)) == report.to_dict()
    budget = ContextBudget(max_tokens=5, target_tokens=5)
    assert json.loads(budget.to_json()) == budget.to_dict()


@settings(max_examples=100, deadline=None)
@given(runs)
def test_report_json_of_a_rebuilt_report_equals_the_original(run: RecordedRun) -> None:
    """A report rebuilt from decoded events (whose strings are new objects, not the
    interned literals of the original) writes the same JSON text as the original —
    a default source "Chat" is left out either way."""
    rebuilt = build_report(event_from_json(event_to_json(e)) for e in run.events)
    assert json.loads(rebuilt.to_json()) == rebuilt.to_dict()
    if not run.failed:
        assert rebuilt.to_json() == run.report.to_json()


def test_items_met_again_are_written_from_their_cached_json() -> None:
    """Reports over the same items (an agent loop's history) are written from each
    item's JSON kept by identity from the second report on, and still say exactly what
    to_dict says; a cached entry for another object at the same id is never used."""
    items = [ContextItem(f"c{k}", 5 + k, metadata={"k": {"n": k}}, tags=("t",),
                         timestamp=datetime(2026, 1, 1, k, tzinfo=UTC)) for k in range(6)]
    pipeline = Pipeline(RecencyScorer())
    budget = ContextBudget(100, 20)
    for _ in range(3):
        report = pipeline.dry_run(items, budget)
        assert json.loads(report.to_json()) == report.to_dict()
    assert all(isinstance(writer._ITEM_JSON[id(i)][1], msgspec.Raw) for i in items)
    writer._ITEM_JSON[id(items[0])] = (ContextItem("other", 1), msgspec.Raw(b'{"bogus":1}'))
    report = pipeline.dry_run(items, budget)
    assert json.loads(report.to_json()) == report.to_dict()


def test_the_item_json_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its byte bound the writer's cache starts again, so it never keeps more than
    about the bound's worth of items alive: with a bound of 100 bytes, items of 200
    characters are never held across two reports, and the JSON is still to_dict's."""
    monkeypatch.setattr(writer, "_ITEM_JSON_BYTES_LIMIT", 100)
    pipeline = Pipeline(RecencyScorer())
    first = [ContextItem("a" * 200 + str(k), 5) for k in range(4)]
    report = pipeline.dry_run(first, ContextBudget(100, 10))
    assert json.loads(report.to_json()) == report.to_dict()
    second = [ContextItem("b" * 200 + str(k), 5) for k in range(4)]
    report = pipeline.dry_run(second, ContextBudget(100, 10))
    assert json.loads(report.to_json()) == report.to_dict()
    assert not any(id(i) in writer._ITEM_JSON for i in first)


def test_a_report_larger_than_the_item_cache_leaves_it_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A report of more items than the writer's cache holds is written without it (it
    would clear the cache on every call and never be written from it): the items of a
    smaller report stay cached and are still written from their JSON, none of the
    large report's items is remembered, and both texts say exactly what to_dict says."""
    monkeypatch.setattr(writer, "_ITEM_JSON_LIMIT", 8)
    monkeypatch.setattr(writer, "_ITEM_JSON", {})
    pipeline = Pipeline(RecencyScorer())
    small = [ContextItem(f"s{k}", 5, timestamp=datetime(2026, 1, 1, k, tzinfo=UTC))
             for k in range(3)]
    for _ in range(2):
        report = pipeline.dry_run(small, ContextBudget(100, 10))
        assert json.loads(report.to_json()) == report.to_dict()
    held = dict(writer._ITEM_JSON)
    assert all(isinstance(held[id(i)][1], msgspec.Raw) for i in small)
    large = [ContextItem(f"l{k}", 5, metadata={"k": k}) for k in range(9)]
    for _ in range(2):
        report = pipeline.dry_run(large, ContextBudget(100, 20))
        assert json.loads(report.to_json()) == report.to_dict()
    assert held == writer._ITEM_JSON

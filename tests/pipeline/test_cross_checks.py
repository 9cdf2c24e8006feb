"""The fold's cross-checks from the stream itself, the report entries a log reader
defers, one sink contract, and the environment variables resolved in one place."""

from __future__ import annotations

import copy
import logging
import pickle
import warnings
from pathlib import Path
from typing import Any

import msgspec
import pytest

import cupellation
import cupellation.events._records as records_module
from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    EventCollector,
    FanOutCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
    build_report,
    settings,
)
from cupellation._model.item import trusted_item
from cupellation.events import (
    ContentCapture,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunStarted,
    StageCompleted,
    StageStarted,
)
from cupellation.logs import AuditLog, StructlogSink, read_runs
from cupellation.otel import SpanCollector
from cupellation.reasons import BudgetExceeded

ITEMS = [ContextItem(f"c{k}", 5 + k, metadata={"n": k}) for k in range(10)]
BUDGET = ContextBudget(40, 30)


def _events() -> list[PipelineEvent]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(RecencyScorer()).run(ITEMS, BUDGET, collector)
    return list(collector.events)


def _replace(events: list[PipelineEvent], index: int, **changes: Any) -> list[PipelineEvent]:
    out = list(events)
    out[index] = msgspec.structs.replace(out[index], **changes)
    return out


def test_candidate_tokens_are_checked_against_the_decided_items() -> None:
    """run_started's candidate_tokens must equal the decided items' tokens when every
    candidate was decided; an item's tokens changed on the way are caught so."""
    events = _events()
    assert build_report(events).is_complete
    started = events[0]
    assert isinstance(started, RunStarted)
    report = build_report(_replace(events, 0, candidate_tokens=started.candidate_tokens + 1))
    assert any("candidate tokens" in note for note in report.incomplete)


def test_a_reason_s_tokens_are_checked_against_its_item() -> None:
    """BudgetExceeded.item_tokens must be the item's tokens."""
    events = _events()
    k = next(k for k, e in enumerate(events) if isinstance(e, ItemExcluded)
             and isinstance(e.reason, BudgetExceeded))
    event = events[k]
    assert isinstance(event, ItemExcluded)
    assert isinstance(event.reason, BudgetExceeded)
    bad = _replace(events, k, reason=BudgetExceeded(
        item_tokens=event.reason.item_tokens + 1,
        available_tokens=event.reason.available_tokens))
    assert any("count other tokens than their items" in n for n in build_report(bad).incomplete)


def test_positions_must_be_a_permutation() -> None:
    """Placed positions must be 0..n-1 each once: a repeated or missing position is named."""
    events = _events()
    included = [k for k, e in enumerate(events) if isinstance(e, ItemIncluded)]
    bad = _replace(events, included[0], position=7)
    assert any("included positions are not 0.." in n for n in build_report(bad).incomplete)


def test_an_unknown_stage_name_is_flagged_not_a_silent_sixth_stage() -> None:
    """A stage event naming a stage the pipeline has not (decoded from elsewhere) is
    kept, and the report says so."""
    events = _events()
    k = next(k for k, e in enumerate(events) if isinstance(e, StageStarted))
    j = next(j for j, e in enumerate(events) if isinstance(e, StageCompleted))
    bad = _replace(_replace(events, k, stage="Classifyy"), j, stage="Classifyy")
    report = build_report(bad)
    assert any("'Classifyy' is not a stage of the pipeline" in n for n in report.incomplete)


def test_entries_read_from_a_log_build_their_items_only_when_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report rebuilt from an audit log builds no ContextItem until an entry's item is
    read; then the entries equal the in-process ones, in equality, hash, repr, pickling
    and deep copies."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    path = tmp_path / "a.jsonl"
    with AuditLog(path) as audit:
        Pipeline(RecencyScorer()).run(ITEMS, BUDGET, FanOutCollector(collector, audit))
    expected = collector.build_report()
    built: list[int] = []
    trusted = trusted_item  # what the records build their items with

    def counting(*values: Any) -> ContextItem:
        built.append(1)
        return trusted(*values)

    monkeypatch.setattr(records_module, "trusted_item", counting)
    (run,) = read_runs(path)
    assert built == []
    report = run.report
    assert report == expected
    assert len(built) == len(ITEMS)
    for ours, theirs in zip(report.excluded, expected.excluded, strict=True):
        assert hash(ours) == hash(theirs)
        assert repr(ours) == repr(theirs)
        assert pickle.loads(pickle.dumps(ours)) == theirs
        assert type(pickle.loads(pickle.dumps(ours))) is type(theirs)
        assert copy.deepcopy(ours) == theirs
    assert report.to_json() == expected.to_json()


def test_every_sink_has_flush_and_close_and_fan_out_passes_them_on(tmp_path: Path) -> None:
    """The sink contract: flush() and close() on every library collector; FanOutCollector
    calls them on its children (skipping those without them); a closed AuditLog or
    SpanCollector is disabled."""
    calls: list[str] = []

    class Plain:
        is_enabled = True
        detail_level = TraceDetailLevel.STAGE_ONLY

        def record(self, events: Any, /) -> None:
            """Keeps nothing."""

    class Counting(EventCollector):
        def on_event(self, event: PipelineEvent, /) -> None:
            """Keeps nothing."""

        def flush(self) -> None:
            calls.append("flush")

        def close(self) -> None:
            calls.append("close")

    audit = AuditLog(tmp_path / "a.jsonl")
    spans = SpanCollector()
    fan = FanOutCollector(Counting(), Plain(), audit, DiagnosticTraceCollector())
    fan.flush()
    fan.close()
    assert calls == ["flush", "close"]
    assert not audit.is_enabled
    for sink in (StructlogSink(), spans, DiagnosticTraceCollector(), cupellation.NULL_COLLECTOR):
        sink.flush()
        sink.close()
    assert not spans.is_enabled


def test_an_invalid_capture_variable_warns_once_and_the_default_applies(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """CUPELLATION_CAPTURE_CONTENT is resolved in one place, the same for every sink:
    an invalid value warns once (warnings and the cupellation logger) and each sink's
    own default applies (full for logs, none for spans); a parameter still raises."""
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "everything")
    with pytest.warns(RuntimeWarning, match="CUPELLATION_CAPTURE_CONTENT='everything'"):
        assert AuditLog(tmp_path / "a").content_capture is ContentCapture.FULL
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second sink does not warn again
        with caplog.at_level(logging.WARNING, logger="cupellation"):
            assert SpanCollector().content_capture is ContentCapture.NONE
            assert StructlogSink().content_capture is ContentCapture.FULL
    with pytest.raises(ValueError, match="content_capture"):
        AuditLog(tmp_path / "b", content_capture="everything")
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "HASH")
    assert SpanCollector().content_capture is ContentCapture.HASH


def test_the_digest_key_comes_from_the_parameter_then_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """resolve_digest_key: the parameter (text as UTF-8), else CUPELLATION_DIGEST_KEY,
    else None; an empty value is no key."""
    monkeypatch.delenv("CUPELLATION_DIGEST_KEY", raising=False)
    assert settings.resolve_digest_key(None) is None
    assert settings.resolve_digest_key("é") == "é".encode()
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", "k")
    assert settings.resolve_digest_key(None) == b"k"
    assert settings.resolve_digest_key(b"p") == b"p"
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", "")
    assert settings.resolve_digest_key(None) is None
    with pytest.raises(TypeError, match="digest_key"):
        settings.resolve_digest_key(3)  # type: ignore[arg-type]

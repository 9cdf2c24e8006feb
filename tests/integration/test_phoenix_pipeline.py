"""Real selections sent to a real Arize Phoenix, through SpanCollector and setup_otlp
over OTLP/HTTP and gRPC at each tier, and replayed from an audit log with
``cupellation export``: read back through Phoenix's REST API and rebuilt by
cupellation.otel, every report equals the original or says what it lacks.

Measured with Phoenix 20.26.1 (the version scripts/install-phoenix.sh pins): every
tier survives whole, with full content capture, over both protocols (PHOENIX_KEEPS).
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    ContextBudget,
    ContextItem,
    GreedySlice,
    Pipeline,
    RecencyScorer,
    SelectionReport,
)
from cupellation.cli import _export
from cupellation.logs import AuditLog
from cupellation.otel import RebuiltRun, SpanCollector, runs_from_spans
from cupellation_exporters import OtlpProtocol, OtlpProviders, setup_otlp, spans_from_events

from .backend_runs import LAYOUTS, span_collector
from .phoenix import (
    PHOENIX_PROJECT_ATTRIBUTE,
    PROJECT_HEADER,
    Phoenix,
    Span,
)
from .selections import TIERS, Selection, run_selections, shifted

pytestmark = [pytest.mark.slow, pytest.mark.phoenix]

PHOENIX_KEEPS: dict[str, bool] = {"StageOnly": True, "StageAndExclusions": True, "Full": True}
"""Does a run at this tier (full content capture) come back from Phoenix whole? The
measured answer, for the README's telemetry table."""
RUNS = 10
LAST_WEEK = timedelta(days=-7)


def _project(label: str) -> str:
    return f"cupel-{label.replace('/', '-').lower()}-{uuid.uuid4().hex[:8]}"


def _providers(protocol: OtlpProtocol, phoenix: Phoenix, project: str) -> OtlpProviders:
    """setup_otlp aimed at Phoenix's project: the header over HTTP, the resource
    attribute over gRPC (Phoenix's gRPC receiver ignores headers)."""
    if protocol == "grpc":
        return setup_otlp(protocol="grpc", endpoint=phoenix.grpc_endpoint, metrics=False,
                          timeout=10, resource_attributes={PHOENIX_PROJECT_ATTRIBUTE: project})
    return setup_otlp(protocol="http/protobuf", endpoint=phoenix.http_base_endpoint,
                      headers={PROJECT_HEADER: project}, metrics=False, timeout=10)


def _rebuilt(stored: list[Span]) -> dict[str, RebuiltRun]:
    """Phoenix's spans, read by cupellation's Phoenix reader, through the decoder."""
    return {run.run_id: run for run in runs_from_spans(stored)}


def _equal_or_says_incomplete(rebuilt: RebuiltRun, original: SelectionReport) -> bool:
    """True when the rebuilt report is the original; otherwise it must say it lacks
    something the original did not (asserted), and False is returned."""
    if rebuilt.report == original:
        return True
    assert rebuilt.problems or not rebuilt.report.is_complete, rebuilt.report
    assert set(original.incomplete) < set(rebuilt.report.incomplete), (
        rebuilt.report.incomplete, original.incomplete)
    return False


def _send(protocol: OtlpProtocol, tier: str, phoenix: Phoenix, project: str,
          selections_seed: str, layout: str = "events"
          ) -> tuple[list[Selection], list[ReadableSpan]]:
    otlp = _providers(protocol, phoenix, project)
    memory = InMemorySpanExporter()
    otlp.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    collector = span_collector(otlp.tracer_provider, tier, layout)
    selections = run_selections(RUNS, selections_seed, also=[collector])
    otlp.shutdown()
    assert otlp.dropped_spans == 0
    return selections, list(memory.get_finished_spans())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_pipeline_runs_come_back_from_phoenix(protocol: OtlpProtocol, tier: str, layout: str,
                                             phoenix: Phoenix) -> None:
    """Ten real runs (one failing in its scorer, odd contents, metadata, count caps)
    traced by SpanCollector at the tier with full content capture, sent by setup_otlp
    over the protocol, read back from Phoenix's REST API and rebuilt: each report
    equals the in-process report at that tier (and the one rebuilt from the spans
    as sent), or says what it lacks; that every run comes back whole is the
    measured PHOENIX_KEEPS, and the root spans keep their times to the microsecond."""
    project = _project(f"{protocol}-{tier}-{layout}")
    selections, sent = _send(protocol, tier, phoenix, project, f"phoenix-{tier}", layout)
    assert any(s.error is not None for s in selections)
    stored = phoenix.spans(project, expect=len(sent))
    assert len(stored) == len(sent)
    rebuilt = _rebuilt(stored)
    as_sent = {run.run_id: run.report for run in runs_from_spans(sent)}
    whole = [_equal_or_says_incomplete(rebuilt[s.run_id], s.reports[tier]) for s in selections]
    assert all(as_sent[s.run_id] == s.reports[tier] for s in selections)
    assert all(whole) is PHOENIX_KEEPS[tier]
    times = {span.span_id: span.start_ns for span in stored}
    for span in sent:
        assert span.context is not None
        assert span.start_time is not None
        start = times[format(span.context.span_id, "016x")]
        assert start is not None
        assert abs(start - span.start_time) <= 1_000


def test_a_loss_on_the_way_is_still_reported_after_phoenix(phoenix: Phoenix) -> None:
    """A run in the events layout with more exclusions than the SDK's 128 events a
    span (setup_otlp keeps the default limits) loses events before Phoenix; the report
    rebuilt from Phoenix's copy says so, as the one rebuilt from the spans as sent does
    (the columns layout, the default, loses nothing: the live tests above)."""
    project = _project("lossy")
    otlp = _providers("http/protobuf", phoenix, project)
    memory = InMemorySpanExporter()
    otlp.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    collector = SpanCollector(tracer_provider=otlp.tracer_provider, tier="Full",
                              content_capture="full", layout="events")
    items = [ContextItem(f"candidate {k}", 20 + k % 7) for k in range(400)]
    Pipeline(RecencyScorer(), GreedySlice()).run(
        items, ContextBudget(max_tokens=2_000, target_tokens=1_000), collector)
    otlp.shutdown()
    sent = memory.get_finished_spans()
    [as_sent] = runs_from_spans(sent)
    assert not as_sent.is_complete
    [back] = _rebuilt(phoenix.spans(project, expect=len(sent))).values()
    assert not back.is_complete
    assert back.problems
    assert len(back.report.excluded) == len(as_sent.report.excluded) < 400


def _microseconds(nanoseconds: int | None) -> int:
    """A time Phoenix returns (microseconds it stored, sent back through a float: off
    by a few hundred nanoseconds) as whole microseconds."""
    assert nanoseconds is not None
    return round(nanoseconds / 1000)


def _audit(path: Path, selections: Sequence[Selection]) -> None:
    with AuditLog(path) as log:
        for selection in selections:
            log.record(shifted(selection.events["Full"], LAST_WEEK))


def _export_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="cupellation")
    _export.add_export_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export", *argv])
    return _export.run_export(args)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_replayed_audit_log_keeps_its_times_and_is_not_duplicated(
        protocol: OtlpProtocol, phoenix: Phoenix, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit log (written by AuditLog) of runs started a week ago, replayed with
    ``cupellation export --to otlp``: in Phoenix every span starts and ends exactly at
    its replayed time, a whole microsecond (the roots at run_started.started_at), the
    reports rebuilt from Phoenix's copy equal the in-process ones, and replaying the
    same log again leaves exactly one copy (Phoenix ignores a span id it has)."""
    project = _project(f"replay-{protocol}")
    selections = run_selections(RUNS, f"phoenix-replay-{protocol}")
    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections)
    if protocol == "grpc":
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{PHOENIX_PROJECT_ATTRIBUTE}={project}")
        argv = ["--protocol", "grpc", "--endpoint", phoenix.grpc_endpoint]
    else:
        argv = ["--endpoint", phoenix.http_base_endpoint, "--header",
                f"{PROJECT_HEADER}={project}"]
    command = [str(audit), "--to", "otlp", *argv, "--content-capture", "full", "--quiet"]
    assert _export_cli(*command) == 0

    replayed = [span for s in selections
                for span in spans_from_events(shifted(s.events["Full"], LAST_WEEK),
                                              content_capture="full")]
    stored = phoenix.spans(project, expect=len(replayed))
    assert len(stored) == len(replayed)
    by_id = {span.span_id: span for span in stored}
    for span in replayed:
        assert span.context is not None
        assert span.start_time is not None
        assert span.end_time is not None
        back = by_id[format(span.context.span_id, "016x")]
        assert back.trace_id == format(span.context.trace_id, "032x")
        assert _microseconds(back.start_ns) * 1000 == span.start_time
        assert _microseconds(back.end_ns) * 1000 == span.end_time
    for selection in selections:
        root = next(s for s in replayed if s.name == "cupel.pipeline"
                    and s.attributes is not None
                    and s.attributes["cupel.run.id"] == selection.run_id)
        assert root.start_time is not None
        started = selection.started.started_at + LAST_WEEK
        assert root.start_time == (
            int(started.timestamp()) * 1_000_000 + started.microsecond) * 1000
    rebuilt = _rebuilt(stored)
    for selection in selections:
        assert rebuilt[selection.run_id].report == selection.reports["Full"]

    assert _export_cli(*command) == 0
    again = phoenix.spans(project, expect=len(replayed), settle=1.5)
    assert len(again) == len(replayed)

"""Spans carry the run digest on the root span and every reader of spans checks it; a
cupel.* attribute the encoder never writes is flagged, not silently ignored."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
from cupellation.events import Verification
from cupellation.otel import (
    SpanData,
    SpanEventData,
    runs_from_spans,
    spans_from_jaeger_json,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)

from ._support import jaeger_document, make_sdk, otlp_document, otlp_proto_bytes, run_both

ITEMS = [ContextItem(f"item {k}", 10 + k, kind="Document" if k % 2 else "Message")
         for k in range(8)]
BUDGET = ContextBudget(60, 40)


def _traced(capture: str = "hash", key: str | None = None, layout: str = "columns"
            ) -> tuple[Any, Any]:
    sdk = make_sdk()
    collector = sdk.collector("Full", capture, layout=layout)
    if key is not None:
        from cupellation.otel import SpanCollector  # noqa: PLC0415

        collector = SpanCollector(tracer_provider=sdk.tracer_provider, tier="Full",
                                  content_capture=capture, digest_key=key)
    traced = run_both(Pipeline(RecencyScorer()), ITEMS, BUDGET, collector)
    return sdk, traced


def _data(spans: Any) -> list[SpanData]:
    from cupellation.otel._spans import span_data  # noqa: PLC0415

    return [span_data(span) for span in spans]


def test_the_root_span_carries_the_digest_and_every_format_verifies_it() -> None:
    """cupel.run.digest is on the root span; SDK spans, OTLP/JSON, Jaeger JSON and OTLP
    protobuf all rebuild a verified run (whose only note is the hashed content)."""
    sdk, _ = _traced()
    (root,) = sdk.by_name("cupel.pipeline")
    assert str((root.attributes or {})["cupel.run.digest"]).startswith("sha256:")
    decoded = [sdk.spans, spans_from_otlp_json(json.dumps(otlp_document(sdk.spans))),
               spans_from_jaeger_json(json.dumps(jaeger_document(sdk.spans))),
               spans_from_otlp_proto(otlp_proto_bytes(sdk.spans))]
    for spans in decoded:
        (run,) = runs_from_spans(spans)
        assert run.verification is Verification.VERIFIED
        assert run.report.incomplete == ("item content was captured as 'hash': contents and "
                                         "metadata are not the originals",)


def test_a_changed_attribute_value_is_a_digest_mismatch() -> None:
    """A score changed on one exclusion event: the rebuilt report looks whole to the
    fold, and the digest says the run was changed."""
    sdk, _ = _traced(layout="events")
    spans = _data(sdk.spans)
    for k, span in enumerate(spans):
        events = list(span.events)
        for j, event in enumerate(events):
            if event.name == "cupel.exclusion":
                events[j] = replace(event, attributes={**event.attributes,
                                                       "cupel.exclusion.score": 0.123})
                spans[k] = replace(span, events=tuple(events))
                break
        else:
            continue
        break
    (run,) = runs_from_spans(spans)
    assert run.verification is Verification.MISMATCH
    assert any(n.startswith("digest mismatch") for n in run.report.incomplete)


def test_a_keyed_span_digest_needs_the_key() -> None:
    """digest_key makes the span digest an HMAC: verified with the key, 'key missing'
    without it."""
    sdk, _ = _traced(key="secret")
    assert runs_from_spans(sdk.spans, digest_key="secret")[0].verification is (
        Verification.VERIFIED)
    assert runs_from_spans(sdk.spans)[0].verification is Verification.KEY_MISSING


def test_an_unknown_cupel_attribute_is_flagged() -> None:
    """cupel.item.tagz on an event, or cupel.run.weird on the root, is named in
    incomplete: an attribute the encoder never writes is not silently dropped."""
    sdk, _ = _traced(layout="events")
    spans = _data(sdk.spans)
    root_at = next(k for k, s in enumerate(spans) if s.name == "cupel.pipeline")
    spans[root_at] = replace(spans[root_at], attributes={**spans[root_at].attributes,
                                                         "cupel.run.weird": 1})
    stage_at = next(k for k, s in enumerate(spans)
                    if any(e.name == "cupel.exclusion" for e in s.events))
    first, *rest = spans[stage_at].events
    spans[stage_at] = replace(spans[stage_at], events=(
        SpanEventData(first.name, {**first.attributes, "cupel.item.tagz": ["x"]},
                      first.timestamp_ns), *rest))
    (run,) = runs_from_spans(spans)
    notes = " ".join(run.report.incomplete)
    assert "cupel.run.weird" in notes
    assert "cupel.item.tagz" in notes


def test_a_name_attribute_of_the_wrong_type_is_reported_not_raised() -> None:
    """A reason or an outcome that arrives as a list (a mangled document) makes no
    decoder raise: the run is rebuilt and says what it could not read (found by the
    mutation campaign)."""
    sdk, _ = _traced(layout="events")
    spans = _data(sdk.spans)
    root_at = next(k for k, s in enumerate(spans) if s.name == "cupel.pipeline")
    root = spans[root_at]
    events = list(root.events)
    included_at = next(k for k, e in enumerate(events) if e.name == "cupel.item.included")
    events[included_at] = SpanEventData(events[included_at].name, {
        **events[included_at].attributes, "cupel.item.reason": ["Scored"]})
    spans[root_at] = replace(root, events=tuple(events), attributes={
        **root.attributes, "cupel.run.outcome": ["completed"]})
    stage_at = next(k for k, s in enumerate(spans)
                    if any(e.name == "cupel.exclusion" for e in s.events))
    first, *rest = spans[stage_at].events
    spans[stage_at] = replace(spans[stage_at], events=(SpanEventData(
        first.name, {**first.attributes, "cupel.exclusion.reason": [1, 2]}), *rest))
    (run,) = runs_from_spans(spans)
    assert not run.report.is_complete
    assert any("could not be decoded" in note for note in run.report.incomplete)

"""Spans carry the run digest on the root span and every reader of spans checks it; a
cupel.* attribute the encoder never writes is flagged, not silently ignored."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

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


@pytest.mark.parametrize(("layout", "form"), [("columns", "sha256-columns:"),
                                               ("events", "sha256:")])
def test_the_root_span_carries_the_digest_and_every_format_verifies_it(layout: str,
                                                                      form: str) -> None:
    """cupel.run.digest is on the root span, in the columns form for the columns layout
    and the line form for the events layout; SDK spans, OTLP/JSON, Jaeger JSON and OTLP
    protobuf all rebuild a verified run (whose only note is the hashed content)."""
    sdk, _ = _traced(layout=layout)
    (root,) = sdk.by_name("cupel.pipeline")
    assert re.fullmatch(re.escape(form) + "[0-9a-f]{64}",
                        str((root.attributes or {})["cupel.run.digest"]))
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
    """digest_key makes the span digest an HMAC (hmac-sha256-columns: under the columns
    layout): verified with the key, 'key missing' without it, a mismatch with another
    key."""
    sdk, _ = _traced(key="secret")
    (root,) = sdk.by_name("cupel.pipeline")
    assert str((root.attributes or {})["cupel.run.digest"]).startswith("hmac-sha256-columns:")
    assert runs_from_spans(sdk.spans, digest_key="secret")[0].verification is (
        Verification.VERIFIED)
    assert runs_from_spans(sdk.spans)[0].verification is Verification.KEY_MISSING
    assert runs_from_spans(sdk.spans, digest_key="other")[0].verification is (
        Verification.MISMATCH)


def _chunked(spans: list[SpanData]) -> int:
    """The index of the first stage span carrying column chunks."""
    return next(k for k, s in enumerate(spans)
                if s.name.startswith("cupel.stage.") and "cupel.columns.0" in s.attributes)


def test_a_value_changed_inside_a_column_chunk_is_a_digest_mismatch() -> None:
    """One score changed inside a chunk (same length, still valid JSON): the fold finds
    the run whole, and the columns digest says it was changed."""
    sdk, _ = _traced()
    spans = _data(sdk.spans)
    at = _chunked(spans)
    chunk = str(spans[at].attributes["cupel.columns.0"])
    match = re.search(r'"cupel\.exclusion\.score":\[(-?[0-9])', chunk)
    assert match is not None
    digit = match.group(1)[-1]
    changed = chunk[:match.end(1) - 1] + ("1" if digit != "1" else "2") + chunk[match.end(1):]
    spans[at] = replace(spans[at], attributes={**spans[at].attributes,
                                               "cupel.columns.0": changed})
    (run,) = runs_from_spans(spans)
    assert run.verification is Verification.MISMATCH
    assert run.report.incomplete[0].startswith("item content was captured as 'hash'")
    assert run.report.incomplete[1].startswith("digest mismatch")
    assert len(run.report.incomplete) == 2


def test_swapped_chunks_and_moved_columns_are_digest_mismatches() -> None:
    """Columns moved from one stage span to another, or an item event added as a span
    event to a columns trace, change what the digest covers: mismatch."""
    sdk, _ = _traced()
    spans = _data(sdk.spans)
    at = _chunked(spans)
    other = next(k for k, s in enumerate(spans) if k != at and s.name.startswith(
        "cupel.stage.") and "cupel.columns.0" not in s.attributes)
    moved = {k: v for k, v in spans[at].attributes.items() if k.startswith("cupel.columns.")}
    swapped = list(spans)
    swapped[at] = replace(spans[at], attributes={
        k: v for k, v in spans[at].attributes.items() if k not in moved})
    swapped[other] = replace(spans[other], attributes={**spans[other].attributes, **moved})
    assert runs_from_spans(swapped)[0].verification is Verification.MISMATCH
    events_sdk, _ = _traced(layout="events")
    extra = next(e for s in _data(events_sdk.spans) for e in s.events
                 if e.name == "cupel.exclusion")
    added = list(spans)
    added[at] = replace(spans[at], events=(*spans[at].events, extra))
    assert runs_from_spans(added)[0].verification is Verification.MISMATCH


def test_a_lost_part_span_is_named_and_a_mismatch() -> None:
    """A run large enough for .part spans: losing one part names it in incomplete and
    the digest does not verify; the whole trace verifies."""
    sdk = make_sdk()
    collector = sdk.collector("Full", "full")
    items = [ContextItem(f"item {k} " + "x" * 40, 10 + k % 7) for k in range(2000)]
    run_both(Pipeline(RecencyScorer()), items, ContextBudget(500, 400), collector)
    spans = _data(sdk.spans)
    assert runs_from_spans(spans)[0].verification is Verification.VERIFIED
    part = next(k for k, s in enumerate(spans) if s.name.endswith(".part"))
    (run,) = runs_from_spans(spans[:part] + spans[part + 1:])
    assert run.verification is Verification.MISMATCH
    notes = " ".join(run.report.incomplete)
    assert "lost part spans 0 of 1 (cupel.stage.slice.part)" in notes
    assert "digest mismatch" in notes


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

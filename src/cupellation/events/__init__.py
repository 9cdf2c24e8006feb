"""The pipeline's event stream: every decision a run makes, as typed, sequenced events.

The SelectionReport, OpenTelemetry spans, log records and files are all
projections of this one stream, and decoders turn spans and logs back into it.

Most programs never import this module: a collector
(:class:`~cupellation.DiagnosticTraceCollector`, :mod:`cupellation.otel`,
:mod:`cupellation.logs`) turns the events into what it needs. Import it to write
a sink of your own, to read or write event files yourself, or to choose a
run's detail level (:class:`TraceDetailLevel`) and content capture
(:class:`ContentCapture`).

- **Declared once.** Events are frozen, slotted ``msgspec`` structs, built by
  keyword and read by name. ``msgspec`` was chosen over plain slotted classes
  for speed that matters at 100,000 candidates: construction runs in C, and
  ``gc=False`` keeps a run's event objects out of the cyclic garbage collector
  (events hold no reference cycles).
- **Sequenced.** Every event carries its ``run_id`` and a ``seq`` (0, 1, 2, ...
  within the run), so a consumer can see gaps, duplicates and reordering.
- **Items by index.** Item events refer to candidates by their index in the
  candidate list and carry the item; reasons that point at another candidate
  hold its index (see :mod:`cupellation.reasons`).
- **One flat mapping.** :func:`event_to_dict` turns any event into a flat
  dictionary with dotted keys (``item.content``, ``reason.name``,
  ``reason.item_tokens``) whose values are strings, numbers, booleans or lists
  of them — exactly what a span attribute, a log record field or a JSON member
  can hold — and :func:`event_from_dict` turns it back, validating every field.
  The mapping is derived from the declarations (the events', and the item's,
  budget's and reasons' wire declarations); JSON (:func:`event_to_json`), log
  records and span attributes are thin adapters over it.
- **One content policy.** :func:`apply_content_capture` is the one place where
  content is kept, hashed or dropped; every projection calls it, and the policy
  in force is recorded in the stream's ``run_started``.
- **One digest per run.** Sinks that store a run (the audit log, event files,
  spans) write a :class:`RunDigest` of its canonical lines into its end event;
  every decoder recomputes it, and a mismatch is listed in the rebuilt report's
  ``incomplete`` (the decisions page says what it covers).
  The plain ``sha256:`` form detects corruption; only the keyed
  ``hmac-sha256:`` form also detects tampering. Columns-layout spans carry
  ``sha256-columns:`` / ``hmac-sha256-columns:``, a digest over their column chunks.
  Whether a run is clean given the reader's key is decided in one place,
  ``digest_verdict`` (the one digest rule).

Schema: every dictionary carries ``type`` and ``schema``
(:data:`EVENT_SCHEMA_VERSION`, 3; version 2 still decodes, as unverified).
Decoding rejects another schema version, null or mistyped fields, non-finite
numbers, and unknown keys inside cupellation's namespaces (``item.*``,
``budget.*``, ``pipeline.*``, ``reason.*``) with
:class:`~cupellation.exceptions.DecodeError` naming the field (and the line,
for files). Other keys are ignored. An event of an unknown ``type`` is kept as
:class:`UnknownEvent` with its fields; an unknown reason or stage name is kept
too (the specification asks for it; the digest catches a name changed on the
way).

Environment variables: ``CUPELLATION_CAPTURE_CONTENT`` (a sink's content
capture when not given) and ``CUPELLATION_DIGEST_KEY`` (the digests' HMAC key
when not given); an invalid value warns once and the default applies.
``OTEL_SERVICE_NAME`` (then ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``)
names the service a sink records in ``run_started`` when neither the run's
:class:`RunInfo`, the sink's ``service=`` nor its SDK provider's resource does
(:func:`cupellation.settings.resolve_service`).
"""

from ._batch import ItemEventBatch
from ._capture import apply_content_capture, content_digest, stamp_service
from ._digest import RunDigest, Verification
from ._flat import (
    EVENT_SCHEMA_VERSION,
    READABLE_SCHEMAS,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
    events_from_json_lines,
)
from ._levels import ContentCapture, TraceDetailLevel, resolve_capture
from ._lines import RunLineEncoder
from ._types import (
    PIPELINE_KEYS,
    CountShortfall,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunInfo,
    RunStarted,
    StageCompleted,
    StageName,
    StageStarted,
    UnknownEvent,
    event_type_name,
)

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "PIPELINE_KEYS",
    "READABLE_SCHEMAS",
    "ContentCapture",
    "CountShortfall",
    "ItemEventBatch",
    "ItemExcluded",
    "ItemIncluded",
    "Overflow",
    "PipelineEvent",
    "PipelineStage",
    "RunCompleted",
    "RunDigest",
    "RunFailed",
    "RunInfo",
    "RunLineEncoder",
    "RunStarted",
    "StageCompleted",
    "StageName",
    "StageStarted",
    "TraceDetailLevel",
    "UnknownEvent",
    "Verification",
    "apply_content_capture",
    "content_digest",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "event_type_name",
    "events_from_json_lines",
    "resolve_capture",
    "stamp_service",
]

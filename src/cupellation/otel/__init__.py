"""OpenTelemetry for cupellation: live spans and metrics from a run's event stream,
and runs rebuilt from spans.

Send a run's decisions to the application's OpenTelemetry pipeline beside the
in-process report::

    from cupellation import DiagnosticTraceCollector, FanOutCollector
    from cupellation.otel import SpanCollector

    spans = SpanCollector(tier="StageAndExclusions")      # one instance, many runs
    diagnostics = DiagnosticTraceCollector()
    pipeline.run(candidates, budget, FanOutCollector(diagnostics, spans))

Rebuild the reports later from the spans, wherever they went::

    from cupellation.otel import read_trace_file
    for run in read_trace_file("traces.jsonl"):   # OTLP/JSON, Jaeger JSON, OTLP protobuf
        print(run.run_id, run.report.is_complete, run.report.incomplete)

Only the OpenTelemetry API is used: the application owns the SDK and its
providers. Names follow the specification's OpenTelemetry chapter (which is
pre-stable); the instrumentation scope is ``cupellation``.

**Spans.** ``cupel.pipeline`` (a child of the span current when the run starts)
with ``cupel.stage.{classify,score,deduplicate,slice,place}`` children; Sort,
internal, has no span (its timing is a ``cupel.stage.sort`` event on the root).
A stage span is current while its stage runs.

**Root attributes.** ``cupel.budget.max_tokens``, ``cupel.verbosity`` (the
chapter), then ``cupel.run.id``, ``cupel.schema``, ``cupel.budget.target_tokens``,
``cupel.budget.output_reserve``, ``cupel.budget.utilization`` (included tokens /
target), ``cupel.run.candidate_count``, ``cupel.run.candidate_tokens``,
``cupel.run.included_count``, ``cupel.run.included_tokens``,
``cupel.run.excluded_count``, ``cupel.run.duration_ms``, ``cupel.run.outcome``,
``cupel.run.started_at``, ``cupel.run.content_capture``,
``cupel.run.pipeline.{scorer,slicer,placer,deduplication,overflow_strategy}``,
``cupel.run.start_seq``/``end_seq``, the run information when given
(``cupel.run.session_id``, ``user_id``, ``conversation_id``, ``token_counter``,
``token_estimates``, ``service``: the run's, else the collector's ``service=``, else
the tracer provider's resource ``service.name``, else ``OTEL_SERVICE_NAME``), and
``cupel.run.digest``: the run's digest (see
:class:`~cupellation.events.RunDigest`) over the line form of the events the spans
carry, after content capture; on failure ``cupel.run.stage``,
``cupel.run.error_type``, ``cupel.run.error_text``, the exception recorded and an
ERROR status.

**Stage attributes.** ``cupel.stage.name`` (lowercase),
``cupel.stage.item_count_in``, ``cupel.stage.item_count_out`` (the chapter), and
``cupel.exclusion.count`` from StageAndExclusions up; then ``cupel.run.id``,
``cupel.stage.start_seq``/``end_seq`` and ``cupel.stage.duration_ms``: the
stage's duration as the pipeline measured it (float milliseconds), so a rebuilt
report's ``duration_ms`` is exact. This is an extension: the chapter leaves the
duration to the span's timestamps, but those are taken around the stage (they
include the sink's own work) and backends round them (Jaeger and Phoenix keep
microseconds). A stage name lowercasing would not give back (one this version
does not know) is also kept as ``cupel.stage.exact_name``.

**Layouts.** Per-item decisions travel in one of two layouts, named on the root
as ``cupel.layout`` (``SpanCollector(layout=...)``, :class:`SpanLayout`).
``columns`` (the default): each span's item events are one compact JSON object of
columns (the events' attribute names, one entry per item, ``null`` for absent), cut
into ``cupel.columns.<k>`` string attributes of at most 2,048 bytes, with
``cupel.columns.{chunk_count,part_count,byte_count}``; chunks past 64 go on child
spans ``<span name>.part`` (``cupel.columns.part``). This survives the SDK's default
limits and Tempo's 2,048-byte truncation at any size. ``events``: the chapter's one
span event per item, below. The root also carries ``input.value`` /
``output.value`` (``text/plain``: a line in words, a blank line, the JSON document;
at most ``value_cap`` bytes) and the
application's ``session.id``, ``user.id``, ``gen_ai.conversation.id``.

**Span events.** ``cupel.exclusion`` (StageAndExclusions and Full) on the stage
span that made the decision: ``cupel.exclusion.reason``,
``cupel.exclusion.item_kind``, ``cupel.exclusion.item_tokens`` (the chapter),
``cupel.exclusion.candidate_index``, ``cupel.exclusion.score``,
``cupel.exclusion.seq``, the reason's own fields as ``cupel.exclusion.<field>``
(``available_tokens``, ``deduplicated_against`` and ``displaced_by`` as candidate
indices, ``cap``, ``count``, ``kind``, ...; a field whose name is taken goes under
``cupel.exclusion.reason.<field>``) and the item's other fields as
``cupel.item.<field>``. ``cupel.item.included`` (Full) on the root span once
Place has completed, as the chapter says: ``cupel.item.kind``,
``cupel.item.tokens``, ``cupel.item.score`` (the chapter),
``cupel.item.candidate_index``, ``cupel.item.position``, ``cupel.item.seq``,
``cupel.item.reason`` and ``cupel.item.<field>``. ``cupel.overflow`` and
``cupel.count_shortfall`` on the stage span where they happened, with their
fields under the event's name.

**Backends.** Every span carries ``gen_ai.operation.name`` =
``select_context`` (Langfuse keeps only spans with a ``gen_ai.*`` attribute) and
``openinference.span.kind`` = ``CHAIN`` (so Phoenix shows them), and
``cupel.check.attribute_count``/``cupel.check.text_length``: how many ``cupel.*``
attributes, and how many characters of string values, were written on the span
and its events, from which a decoder tells attributes dropped or truncated on
the way even where nothing says so.

**Content.** Item content is absent by default (``content_capture="none"``;
``CUPELLATION_CAPTURE_CONTENT=full|hash|none`` when the parameter is not given),
and metadata is dropped unless capture is ``full``: see :class:`SpanCollector`.

**Metrics.** ``cupel.runs`` (``outcome``, and ``error.type`` for failures),
``cupel.candidates``, ``cupel.exclusions`` (``cupel.stage.name``, and
``cupel.exclusion.reason`` from the StageAndExclusions tier up: StageOnly knows
only how many items each stage removed), ``cupel.budget.utilization`` (unit
``1``), ``cupel.run.duration`` and ``cupel.stage.duration`` (unit ``s``, by
``cupel.stage.name``). Metrics need no tracer: a SpanCollector with only a meter
provider records them alone.

**Rebuilding.** :func:`runs_from_spans`, :func:`events_from_spans`,
:func:`reports_from_spans` take SDK spans or :class:`SpanData`;
:func:`parse_trace`, :func:`read_trace` and :func:`read_trace_file` read OTLP/JSON (lines or one
object, hex or base64 ids), Tempo's ``/api/traces`` (``batches``) and ``/api/v2/traces``
(``trace``), Jaeger's v1 JSON and v3 ``result``, the pages of Phoenix's REST API
(``/spans`` and ``/spans/otlpv1``, merged however they were saved), MLflow's
``batchGet`` JSON and ``Trace.to_json()``, and OTLP protobuf (with ``pip install
'cupellation[otlp]'``). :func:`spans_from_mlflow_traces` reads the ``Trace`` objects of
``mlflow.search_traces(return_type="list")``. :func:`fetch_spans` asks Phoenix, MLflow,
Jaeger or Tempo over HTTP(S) for a trace, a run or the runs since a time (``cupellation
report --from BACKEND URL`` on the command line), within one deadline for the whole
fetch, a size limit per answer and a request limit, following redirects only within
the URL's origin so that its headers never reach another server; what it raises
(:class:`~cupellation.exceptions.BackendError` and its subclasses) is in
:mod:`cupellation.exceptions`. With ``full``
capture, the Full tier and span limits large enough, a rebuilt report equals the in-process one;
otherwise its ``incomplete`` says what is missing. Every reader recomputes the
run's digest from the rebuilt events (``RebuiltRun.verification``: ``verified``,
``mismatch`` — also listed in ``incomplete`` — ``unverified``, ``key missing`` or
``unkeyed``), and flags any ``cupel.*`` attribute the encoder never writes. The plain
``sha256:`` digest detects corruption, not tampering; a key (``digest_key=`` or
``CUPELLATION_DIGEST_KEY``) makes it an HMAC that also detects tampering. The columns
layout's digest is ``sha256-columns:`` (``hmac-sha256-columns:``), computed over the
column chunks exactly as written and the lines of the run and stage events (the
decisions page gives its canonical form); the events layout's is the line
form, ``sha256:`` (``hmac-sha256:``). Readers tell the form by its prefix. A reader
holding a key lists a run not signed with it (no digest, a plain form) in
``incomplete``; one without a key lists a keyed run as "signature not checked".

.. versionchanged:: 0.4
   The fetch errors are imported from :mod:`cupellation.exceptions` only.
"""

from __future__ import annotations

from ._backends import spans_from_mlflow_json, spans_from_mlflow_traces, spans_from_phoenix_json
from ._collector import SpanCollector
from ._columns import SpanLayout
from ._decode import (
    RebuiltRun,
    events_from_spans,
    parse_trace,
    read_trace,
    read_trace_file,
    reports_from_spans,
    runs_from_spans,
)
from ._fetch import (
    BACKENDS,
    DEFAULT_PHOENIX_PROJECT,
    fetch_spans,
)
from ._jaeger import spans_from_jaeger_json
from ._names import SCOPE_NAME
from ._spans import SpanData, SpanEventData, spans_from_otlp_json, spans_from_otlp_proto

__all__ = [
    "BACKENDS",
    "DEFAULT_PHOENIX_PROJECT",
    "SCOPE_NAME",
    "RebuiltRun",
    "SpanCollector",
    "SpanData",
    "SpanEventData",
    "SpanLayout",
    "events_from_spans",
    "fetch_spans",
    "parse_trace",
    "read_trace",
    "read_trace_file",
    "reports_from_spans",
    "runs_from_spans",
    "spans_from_jaeger_json",
    "spans_from_mlflow_json",
    "spans_from_mlflow_traces",
    "spans_from_otlp_json",
    "spans_from_otlp_proto",
    "spans_from_phoenix_json",
]

"""Rebuilding runs from their spans: spans -> the event stream -> the SelectionReport.

The decoder reads only what :mod:`._names` says the encoder writes, through the
inverse functions there, then folds the events with the events module's
:class:`~cupellation.ReportBuilder`, which checks the stream's integrity. What
spans lose that the fold cannot see in the events themselves (events or
attributes a span limit dropped, truncated strings, a missing stage span, a
stage span that is not the root's child) is added to the report's
``incomplete`` list, so a rebuilt report is either whole or says what it lacks.

One span's events and columns are decoded in :mod:`._spandecode`; this module
gathers each run's spans, checks what only the whole run shows (missing stage
spans, part spans without a carrier, the digest), folds the events, and reads
trace documents and files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from os import PathLike
from pathlib import Path
from typing import Any

from msgspec.structs import replace as replace_struct

from .._report import ReportBuilder, SelectionReport
from ..events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunFailed,
)
from ..events._digest import (
    COLUMNS_HMAC_PREFIX,
    COLUMNS_SHA256_PREFIX,
    DigestCheck,
    Verification,
    check_digest,
    digest_verdict,
)
from ..events._lines import LineEncoder, verify_events
from ..exceptions import DecodeError
from ..settings import resolve_digest_key
from ._backends import backend_of, documents_in, merged_spans, spans_from_backend_document
from ._columns import COLUMN_ATTRIBUTES, LAYOUT, PART_INDEX, PART_SUFFIX
from ._digest import columns_digest
from ._jaeger import is_jaeger_document, spans_from_jaeger_json
from ._names import (
    ALL_STAGES,
    CHECK_COUNT,
    CHECK_TEXT,
    OUTCOME,
    ROOT_ATTRIBUTES,
    ROOT_SPAN,
    RUN_ID,
    SPAN_STAGES,
    STAGE_ATTRIBUTES,
    STAGE_NAME,
    STAGE_PREFIX,
    run_flat,
    stage_flat,
    stage_from_label,
    stage_span_name,
)
from ._spandecode import (
    Parts,
    RunDecoding,
    check_losses,
    decode_columns,
    decode_span_events,
    span_label,
    unknown_attributes,
)
from ._spans import (
    OTLP_EXTRA,
    SpanData,
    is_otlp_document,
    span_data,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)

__all__ = [
    "RebuiltRun",
    "events_from_spans",
    "parse_trace",
    "read_trace",
    "read_trace_file",
    "reports_from_spans",
    "runs_from_spans",
]

_ROOT_KNOWN: frozenset[str] = ROOT_ATTRIBUTES | COLUMN_ATTRIBUTES | {LAYOUT}
_STAGE_KNOWN: frozenset[str] = STAGE_ATTRIBUTES | COLUMN_ATTRIBUTES
_PART_KNOWN: frozenset[str] = frozenset({RUN_ID, PART_INDEX, CHECK_COUNT, CHECK_TEXT})


@dataclass(frozen=True, slots=True)
class RebuiltRun:
    """One run rebuilt from its spans.

    ``report`` is the SelectionReport folded from ``events``; its ``incomplete``
    lists what the events lack and then ``problems``, what the decoder found lost
    on the way (dropped events or attributes, truncated values, missing spans,
    ``cupel.*`` attributes this version does not write). ``trace_id`` is the trace
    the root span belongs to, when known. ``verification`` is what checking the
    run's digest (the root's ``cupel.run.digest``) against the rebuilt events found
    (see :class:`~cupellation.events.Verification`); ``digest`` the one recorded.
    A run not clean given the reader's key (not signed with it, or signed while the
    reader has none) says so first in ``incomplete``. ``span_count`` is how many spans
    the run was rebuilt from (its root, stage and part spans).
    """

    run_id: str
    report: SelectionReport
    events: tuple[PipelineEvent, ...]
    trace_id: str | None = None
    problems: tuple[str, ...] = ()
    verification: Verification = Verification.UNVERIFIED
    digest: str | None = None
    span_count: int = 0

    @property
    def is_complete(self) -> bool:
        """True when the report holds the whole run."""
        return self.report.is_complete


def _check_parts(run: RunDecoding, parts: Parts, carriers: list[SpanData]) -> None:
    """Losses on part spans, and part spans whose carrier is missing."""
    known = {(s.name, s.span_id) for s in carriers}
    for (name, parent), found in parts.items():
        for part in found:
            check_losses(run, part)
            unknown_attributes(run, f"the {part.name} span", part.attributes, _PART_KNOWN)
        if (name, parent) not in known:
            run.problems.append(f"{len(found)} {name}{PART_SUFFIX} spans have no {name} "
                                "span: the decisions they carry cannot be read")


def _expected_stages(root: SpanData) -> list[str]:
    """The chapter stages whose spans a run with this root must have."""
    outcome = root.attributes.get(OUTCOME)
    if outcome == "completed":
        return [stage.value for stage in SPAN_STAGES]
    if outcome == "failed":
        failed_at = root.attributes.get("cupel.run.stage")
        reached = []
        for stage in ALL_STAGES:
            if stage in SPAN_STAGES:
                reached.append(stage.value)
            if stage.value == failed_at:
                return reached
        return []  # failed before the first stage, or at a stage this version does not know
    return []


def _decode_roots(run: RunDecoding, roots: list[SpanData], parts: Parts) -> None:
    if not roots:
        run.problems.append(f"the root span {ROOT_SPAN} is missing: the run's start, end "
                            "and included items are unknown")
    elif len(roots) > 1:
        run.problems.append(f"{len(roots)} {ROOT_SPAN} spans carry run id {run.run_id}")
    for root in roots:
        capture = root.attributes.get("cupel.run.content_capture")
        if isinstance(capture, str):
            run.capture = capture
    if roots and run.capture is None:
        run.capture = "full"  # a root without the member: nothing says content was dropped
    for root in roots:
        check_losses(run, root)
        unknown_attributes(run, f"the {ROOT_SPAN} span", root.attributes, _ROOT_KNOWN)
        for flat in run_flat(root.attributes):
            flat.setdefault("run_id", run.run_id)
            run.decode(flat, f"the {ROOT_SPAN} span")
        decode_span_events(run, root, None)
        decode_columns(run, root, parts, None)


def _decode_stages(run: RunDecoding, roots: list[SpanData], stages: list[SpanData],
                   parts: Parts) -> None:
    root_ids = {r.span_id for r in roots if r.span_id is not None}
    seen: set[str] = set()
    for span in stages:
        check_losses(run, span)
        label = span.attributes.get(STAGE_NAME)
        if not isinstance(label, str):
            label = span.name[len(STAGE_PREFIX):]
        seen.add(stage_from_label(label))
        if root_ids and span.parent_span_id not in root_ids:
            run.problems.append(f"{span_label(span)} is not a child of the run's "
                                f"{ROOT_SPAN} span")
        unknown_attributes(run, f"the {span.name} span", span.attributes, _STAGE_KNOWN)
        for flat in stage_flat(span.attributes, run.run_id):
            run.decode(flat, f"the {span.name} span")
        decode_span_events(run, span, stage_from_label(label))
        decode_columns(run, span, parts, stage_from_label(label))
    if len(roots) == 1:
        for stage in _expected_stages(roots[0]):
            if stage not in seen:
                run.problems.append(f"the stage span {stage_span_name(stage)} is missing")


def _rebuild(run_id: str, spans: list[SpanData], digest_key: bytes | None) -> RebuiltRun:
    run = RunDecoding(run_id, spans)
    roots = [s for s in spans if s.name == ROOT_SPAN]
    parts: Parts = {}
    for span in spans:
        if span.name.endswith(PART_SUFFIX):
            parts.setdefault((span.name[:-len(PART_SUFFIX)], span.parent_span_id),
                             []).append(span)
    stages = [s for s in spans if s.name != ROOT_SPAN and not s.name.endswith(PART_SUFFIX)]
    _decode_roots(run, roots, parts)
    _decode_stages(run, roots, stages, parts)
    _check_parts(run, parts, roots + stages)
    failed = sum(run.failures.values())
    if failed:
        run.problems.append(f"{failed} events could not be decoded and are missing: "
                            + "; ".join(run.failure_notes)
                            + ("; ..." if failed > len(run.failure_notes) else ""))
    run.events.sort(key=_SEQ)
    builder = ReportBuilder(run_id)
    _fold(builder, run.events)
    end = builder.end_event
    recorded = None if end is None else end.digest
    check = digest_verdict(_checked(run, recorded, digest_key), recorded,
                           key_present=digest_key is not None)
    builder.set_digest_check(check)
    report = builder.result()
    problems = tuple(dict.fromkeys(run.problems))
    if problems:
        # The loss first: what the spans lost on the way (with its cause and fix) comes
        # before what the fold finds missing as a consequence; a signature not checked
        # or missing comes before both (it concerns the trust in all of them).
        lead = (check.note,) if check.leading and check.note is not None else ()
        report = replace(report, incomplete=lead + problems + tuple(
            note for note in report.incomplete if note not in problems + lead))
    trace_id = next((r.trace_id for r in roots if r.trace_id), None) or next(
        (s.trace_id for s in spans if s.trace_id), None)
    return RebuiltRun(run_id=run_id, report=report, events=tuple(run.events),
                      span_count=len(spans),
                      trace_id=trace_id, problems=problems, verification=check.status,
                      digest=recorded)


_SEQ = attrgetter("seq")
_INDEX = attrgetter("candidate_index")
_ITEM = attrgetter("item")
_SCORE = attrgetter("score")
_REASON = attrgetter("reason")
_POSITION = attrgetter("position")


def _fold(builder: ReportBuilder, events: list[PipelineEvent]) -> None:
    """Fold ``events`` (in seq order) into ``builder``, each run of item events of one
    run and kind (exclusions: of one stage) numbered ``s, s + 1, ...`` after a seq
    below ``s`` as ONE ItemEventBatch: the fold accepts exactly the seqs those events
    one by one would have (after a lower seq, its next expected seq is at most ``s``)
    and extends its columns with the same entries in the same order. The 1,000
    decisions of benchmarks/bench_otel.py's rebuild fold in 0.5 ms this way, where
    one event at a time took 1.24 ms."""
    add = builder.add
    k = 0
    while k < len(events):
        first = events[k]
        end = _run_end(events, k)
        if end - k == 1:
            add(first)
        else:
            group = events[k:end]
            stage = first.stage if isinstance(first, ItemExcluded) else None
            add(ItemEventBatch(
                run_id=first.run_id, first_seq=first.seq, stage=stage,
                candidate_indices=map(_INDEX, group), items=map(_ITEM, group),
                scores=map(_SCORE, group), reasons=map(_REASON, group),
                positions=None if stage is not None else map(_POSITION, group)))
        k = end


def _run_end(events: list[PipelineEvent], k: int) -> int:
    """Where the run of item events that :func:`_fold` batches from ``events[k]`` ends
    (``k + 1``: no run)."""
    first = events[k]
    kind = type(first)
    if (kind is not ItemExcluded and kind is not ItemIncluded) or (
            k and events[k - 1].seq == first.seq):
        return k + 1
    stage = first.stage if isinstance(first, ItemExcluded) else None
    end = k + 1
    while end < len(events):
        event = events[end]
        if (type(event) is not kind or event.seq != events[end - 1].seq + 1
                or event.run_id != first.run_id
                or (isinstance(event, ItemExcluded)
                    and (type(event.stage) is not type(stage) or event.stage != stage))):
            break
        end += 1
    return end


def _checked(run: RunDecoding, recorded: str | None, digest_key: bytes | None
             ) -> DigestCheck:
    """The check of the run's recorded digest against its rebuilt events. Spans made
    in process may hold text no line can (a lone surrogate in the run id or a stage
    name, which only the spans' attributes carry unchecked): their digest cannot be
    computed, and the run reads as a mismatch that says so, never a crash."""
    if recorded is None:
        return DigestCheck(Verification.UNVERIFIED)
    try:
        if recorded.startswith((COLUMNS_SHA256_PREFIX, COLUMNS_HMAC_PREFIX)):
            return _check_columns(run, recorded, digest_key)
        return verify_events(run.events, digest_key)
    except UnicodeEncodeError as exc:
        return DigestCheck(Verification.MISMATCH, (
            "the run digest cannot be checked: its events hold text that is not Unicode "
            f"({exc.object[exc.start:exc.end]!r}, as in a run id or stage name written "
            "to the spans): they are not what was written"))


def _check_columns(run: RunDecoding, recorded: str, digest_key: bytes | None) -> DigestCheck:
    """Check a columns-form digest (see ._digest): the lines of the events that are not
    column rows, in seq order, and the block digests of the chunks received."""
    encoder = LineEncoder(ContentCapture.FULL)
    lines = hashlib.sha256()
    for event in run.events:
        if id(event) in run.column_events:
            continue
        if isinstance(event, RunCompleted | RunFailed):
            event = replace_struct(event, digest=None)  # noqa: PLW2901
        lines.update(encoder.event_line(event))
    hashed = lines.digest()
    return check_digest(recorded, columns_digest(hashed, run.blocks),
                        columns_digest(hashed, run.blocks, digest_key) if digest_key else None)


def _is_ours(span: SpanData) -> bool:
    run_id = span.attributes.get(RUN_ID)
    return isinstance(run_id, str) and bool(run_id) and (
        span.name in (ROOT_SPAN, ROOT_SPAN + PART_SUFFIX) or span.name.startswith(STAGE_PREFIX))


def runs_from_spans(spans: Iterable[Any], *, digest_key: bytes | str | None = None
                    ) -> list[RebuiltRun]:
    """Rebuild every cupellation run found among ``spans``.

    ``spans`` holds SDK ``ReadableSpan`` objects (as an ``InMemorySpanExporter``
    returns them) or :class:`SpanData` (as the readers of OTLP and Jaeger JSON
    return them), in any order, from any number of traces; spans that are not
    cupellation's are ignored. Runs are told apart by ``cupel.run.id``, so runs
    interleaved in one trace come apart. Each run's digest (``cupel.run.digest``) is
    checked against the rebuilt events, keyed ones with ``digest_key`` (or the
    ``CUPELLATION_DIGEST_KEY`` environment variable). Returns one :class:`RebuiltRun` per run,
    in the order the runs started; an empty list for no spans. Raises
    :class:`~cupellation.exceptions.DecodeError` for spans none of which are
    cupellation's, or for an object that is not a span.
    """
    data = [span_data(span) for span in spans]
    groups: dict[str, list[SpanData]] = {}
    for span in data:
        if _is_ours(span):
            groups.setdefault(span.attributes[RUN_ID], []).append(span)
    if data and not groups:
        names = sorted({span.name for span in data})
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise DecodeError("spans", f"{len(data)} spans ({shown})",
                          f"hold no cupellation run: no {ROOT_SPAN} or {STAGE_PREFIX}* span "
                          f"carries {RUN_ID}")
    key = resolve_digest_key(digest_key)
    runs = [_rebuild(run_id, group, key) for run_id, group in groups.items()]

    def started(run: RebuiltRun) -> tuple[int, int]:
        starts = [s.start_ns for s in groups[run.run_id]
                  if s.name == ROOT_SPAN and s.start_ns is not None]
        return (0, min(starts)) if starts else (1, 0)

    return sorted(runs, key=started)


def events_from_spans(spans: Iterable[Any]) -> list[list[PipelineEvent]]:
    """The event stream of each run found among ``spans`` (see :func:`runs_from_spans`),
    in seq order. Events that did not survive are simply absent: fold them with
    :func:`~cupellation.build_report` and the report says what is missing, or use
    :func:`runs_from_spans` to also learn what the spans themselves lost."""
    return [list(run.events) for run in runs_from_spans(spans)]


def reports_from_spans(spans: Iterable[Any]) -> list[SelectionReport]:
    """The SelectionReport of each run found among ``spans`` (see :func:`runs_from_spans`)."""
    return [run.report for run in runs_from_spans(spans)]


# -- files -------------------------------------------------------------------------------------


def parse_trace(data: str | bytes) -> list[SpanData]:
    """The spans of a trace document, its format recognised from its content: OTLP/JSON
    (one object, or JSON lines as the collector's file exporter writes; Tempo's
    ``batches``), Jaeger's JSON (``{"data": [...]}``), or OTLP protobuf bytes.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the problem for
    anything else.
    """
    raw: bytes | None = None
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _parse_proto(raw)
    elif isinstance(data, str):
        text = data
    else:
        raise DecodeError("trace", type(data).__name__, "must be text or bytes")
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise DecodeError("trace", "", "is empty")
    if stripped[0] not in "{[":
        if raw is not None:
            return _parse_proto(raw)
        raise DecodeError("trace", stripped[:40], "is not JSON (OTLP/JSON or Jaeger JSON)")
    try:
        whole = json.loads(stripped)
    except (ValueError, RecursionError):
        return _parse_lines(stripped)
    documents = whole if isinstance(whole, list) else [whole]
    spans: list[SpanData] = []
    for k, document in enumerate(documents):
        if backend_of(document) is not None:
            where = "trace" if not isinstance(whole, list) else f"trace[{k}]"
            spans.extend(spans_from_backend_document(document, where))
        elif is_jaeger_document(document):
            spans.extend(spans_from_jaeger_json(document))
        elif is_otlp_document(document):
            spans.extend(spans_from_otlp_json(document))
        else:
            shown = sorted(document)[:8] if isinstance(document, Mapping) else type(
                document).__name__
            where = "trace" if not isinstance(whole, list) else f"trace[{k}]"
            raise DecodeError(where, shown, _NOT_A_TRACE)
    return merged_spans(spans) if any(backend_of(d) for d in documents) else spans


#: What a trace document may be, for the error naming one that is none of them.
_NOT_A_TRACE = ("is not a trace: expected OTLP/JSON (resourceSpans), Tempo's (batches, or "
                "trace.resourceSpans), Jaeger's (data[].spans, or v3's result.resourceSpans), "
                "a page of Phoenix's REST API (data[] and next_cursor) or MLflow's trace JSON "
                "(traces[].trace_info and spans)")


def _parse_lines(text: str) -> list[SpanData]:
    """Several JSON documents (lines, or written back to back): pages of Phoenix or
    MLflow answers, Jaeger v3's stream of results, or OTLP/JSON lines (as the
    collector's file exporter writes them, read by :func:`spans_from_otlp_json`)."""
    try:
        documents = list(documents_in(text))
    except DecodeError:
        documents = []
    if not documents or backend_of(documents[0][1]) is None:
        return spans_from_otlp_json(text)  # JSON lines (or a clear error naming the line)
    spans: list[SpanData] = []
    for line, document in documents:
        if backend_of(document) is None:
            shown = sorted(document)[:8] if isinstance(document, Mapping) else type(
                document).__name__
            raise DecodeError("trace", shown, _NOT_A_TRACE, line=line)
        try:
            spans.extend(spans_from_backend_document(document))
        except DecodeError as exc:
            raise DecodeError(exc.field, exc.value, exc.problem, line=line) from None
    return merged_spans(spans)


def _parse_proto(raw: bytes) -> list[SpanData]:
    try:
        return spans_from_otlp_proto(raw)
    except ImportError:
        raise DecodeError("trace", f"{len(raw)} bytes", "is not JSON; if it is OTLP protobuf, "
                          f"reading it needs pip install '{OTLP_EXTRA}'") from None


def read_trace(data: str | bytes, *, digest_key: bytes | str | None = None
               ) -> list[RebuiltRun]:
    """Rebuild the runs in a trace document (any format :func:`parse_trace` reads).

    Raises :class:`~cupellation.exceptions.DecodeError` naming the problem for
    data that is not a trace or holds no cupellation run.
    """
    spans = parse_trace(data)
    if not spans:
        raise DecodeError("trace", f"{len(data)} characters or bytes", "holds no spans")
    return runs_from_spans(spans, digest_key=digest_key)


def read_trace_file(path: str | PathLike[str], *, digest_key: bytes | str | None = None
                    ) -> list[RebuiltRun]:
    """Rebuild the runs in a trace file: OTLP/JSON lines, one OTLP/JSON or Tempo
    object, Jaeger's downloaded JSON, or OTLP protobuf (recognised from the content),
    plain or gzip-compressed (as ``store load`` and the log reader take them).

    Returns one :class:`RebuiltRun` (``run_id``, ``report``, ``events``) per run, in
    the order they started. Raises :class:`~cupellation.exceptions.DecodeError`
    naming the file and the problem for a file that is not a trace or holds no
    cupellation run (and :class:`OSError` for a file that cannot be read).
    """
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DecodeError(str(path), f"{len(data)} bytes",
                              f"is not a readable gzip file ({exc})") from None
    try:
        return read_trace(data, digest_key=digest_key)
    except DecodeError as exc:
        field = str(path) if exc.field == "trace" else f"{path}: {exc.field}"
        raise DecodeError(field, exc.value, exc.problem, line=exc.line) from None

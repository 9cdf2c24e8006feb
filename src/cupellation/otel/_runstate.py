"""One run's state inside a :class:`~cupellation.otel.SpanCollector`: its open spans,
attached contexts and running totals, and the writes onto its spans that need
nothing of the collector (span events, the columns' chunks and part spans, ending
whatever is open)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from contextvars import Token
from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from ..events import ItemEventBatch, StageName
from ._columns import (
    BYTE_COUNT,
    CHUNK_COUNT,
    CHUNK_PREFIX,
    CHUNKS_ON_CARRIER,
    CHUNKS_PER_PART,
    PART_COUNT,
    PART_INDEX,
    PART_SUFFIX,
    ColumnSet,
    chunk_ends,
    columns_text,
)
from ._digest import block_digest
from ._encode import Encoded
from ._metrics import Instruments
from ._names import BACKEND_ATTRIBUTES, CHECK_COUNT, CHECK_TEXT, RUN_ID, check_totals

__all__ = ["RunState", "add_events", "warn_unprojectable"]

_logger = logging.getLogger("cupellation")


def warn_unprojectable(count: int) -> None:
    """Say (on the ``cupellation`` logger) that ``count`` item events were left out."""
    if count > 0:
        _logger.warning("cupellation: %d item events held values no span can carry "
                        "(a non-finite number) and were left out", count)


def add_events(carrier: Span | None, name: str, encoded: Encoded, totals: list[int]) -> int:
    """Add one span event per attribute mapping; returns how many were added."""
    assert carrier is not None
    attribute_list, count, length = encoded
    add_event = carrier.add_event
    added = 0
    for attributes in attribute_list:
        if attributes is not None:
            add_event(name, attributes)
            added += 1
    totals[0] += count
    totals[1] += length
    warn_unprojectable(len(attribute_list) - added)
    return added


class RunState:
    """One run's open spans, attached contexts and running totals."""

    __slots__ = ("blocks", "dropped", "dropped_tokens", "included", "instruments", "internal",
                 "kept", "lines",
                 "recording", "root",
                 "root_attributes",
                 "root_columns", "root_context", "root_token", "root_totals", "run_id", "stage",
                 "stage_attributes", "stage_columns", "stage_dropped", "stage_exclusions",
                 "stage_span",
                 "stage_start_ns", "stage_token", "stage_totals", "target_tokens", "trace_id",
                 "tracer")

    def __init__(self, run_id: str, tracer: Tracer | None, instruments: Instruments | None,
                 target_tokens: int) -> None:
        self.run_id = run_id
        self.tracer = tracer
        self.instruments = instruments
        self.target_tokens = target_tokens
        self.root: Span | None = None
        self.recording = False
        self.root_context: otel_context.Context | None = None
        self.root_token: Token[otel_context.Context] | None = None
        self.root_attributes: dict[str, Any] = {}
        self.root_totals = [0, 0]
        self.stage: StageName | None = None
        self.stage_span: Span | None = None
        self.stage_token: Token[otel_context.Context] | None = None
        self.stage_attributes: dict[str, Any] = {}
        self.stage_totals = [0, 0]
        self.stage_exclusions = 0
        # The open stage's exclusion batches, for its output.value.
        self.stage_dropped: list[ItemEventBatch] = []
        # The root's trace id (hex), for the summaries' "how to see the rest".
        self.trace_id: str | None = None
        self.stage_start_ns: int | None = None
        # The columns layout: the item-event rows gathered for the open stage span and
        # for the root.
        self.stage_columns = ColumnSet()
        self.root_columns = ColumnSet()
        # A spanless stage (Sort) between its start and completion: its start attributes.
        self.internal: dict[str, Any] | None = None
        # Inclusion batches held until the Place span has ended.
        self.included: list[ItemEventBatch] = []
        # Every batch of kept and dropped items, for output.value.
        self.kept: list[ItemEventBatch] = []
        self.dropped: list[ItemEventBatch] = []
        # Each dropped batch's tokens column where the columns layout built it (by id).
        self.dropped_tokens: dict[int, list[int]] = {}
        # The columns layout's digest: the SHA-256 of the lines of the events that are
        # not column rows, and each carrier's block digest (see ._digest).
        self.lines = hashlib.sha256()
        self.blocks: list[bytes] = []

    @property
    def spans_on(self) -> bool:
        return self.root is not None and self.recording

    def end_open(self) -> None:
        """End whatever is open of the run and detach what it attached (innermost
        first), after the collector failed on it. Never raises."""
        steps: list[Callable[[], object]] = []
        if self.stage_span is not None:
            steps.append(self.stage_span.end)
        if self.stage_token is not None:
            steps.append(partial(otel_context.detach, self.stage_token))
        if self.root is not None:
            steps.append(self.root.end)
        if self.root_token is not None:
            steps.append(partial(otel_context.detach, self.root_token))
        self.stage_span = self.root = None
        self.stage_token = self.root_token = None
        for step in steps:
            try:
                step()
            except Exception:
                _logger.debug("cupellation: cleaning up run %s raised", self.run_id,
                              exc_info=True)

    def root_event(self, name: str, attributes: dict[str, Any]) -> None:
        """An event on the root span, counted in the root's check totals."""
        assert self.root is not None
        count, length = check_totals(attributes)
        self.root_totals[0] += count
        self.root_totals[1] += length
        self.root.add_event(name, attributes)

    def write_columns(self, span: Span, name: str, columns: ColumnSet,
                      end_ns: int | None) -> dict[str, Any]:
        """The column attributes for the span ``span`` (called ``name``) that carries
        ``columns``; chunks past :data:`CHUNKS_ON_CARRIER` go on part spans, started and
        ended here as ``span``'s children at ``end_ns``."""
        data = columns_text(columns)
        columns.blocks = {}
        ends = chunk_ends(data)
        starts = [0, *ends][:len(ends)]
        chunks = [data[start:end].decode("utf-8") for start, end in zip(starts, ends,
                                                                          strict=True)]
        self.blocks.append(block_digest(name, data, [end - start for start, end in
                                                     zip(starts, ends, strict=True)]))
        own = chunks[:CHUNKS_ON_CARRIER]
        rest = chunks[CHUNKS_ON_CARRIER:]
        parts = (len(rest) + CHUNKS_PER_PART - 1) // CHUNKS_PER_PART
        out: dict[str, Any] = {CHUNK_COUNT: len(chunks), PART_COUNT: parts,
                               BYTE_COUNT: len(data)}
        for k, chunk in enumerate(own):
            out[f"{CHUNK_PREFIX}{k}"] = chunk
        if parts:
            assert self.tracer is not None
            context = trace.set_span_in_context(span)
            at = end_ns  # None: the tracer's clock
            for part in range(parts):
                first = CHUNKS_ON_CARRIER + part * CHUNKS_PER_PART
                attributes: dict[str, Any] = {RUN_ID: self.run_id, PART_INDEX: part}
                for k, chunk in enumerate(rest[part * CHUNKS_PER_PART:
                                               (part + 1) * CHUNKS_PER_PART]):
                    attributes[f"{CHUNK_PREFIX}{first + k}"] = chunk
                count, length = check_totals(attributes)
                attributes[CHECK_COUNT] = count
                attributes[CHECK_TEXT] = length
                attributes.update(BACKEND_ATTRIBUTES)
                child = self.tracer.start_span(name + PART_SUFFIX, context=context,
                                               attributes=attributes, start_time=at)
                child.end(end_time=at)
        return out

"""``store load`` of OTLP/JSON trace files into ``otel_traces``, by ClickHouse's own JSON
functions: each span becomes the row the Collector's ``clickhouse`` exporter writes.

A trace file is OTLP/JSON lines (``{"resourceSpans": [...]}`` per line: what
``cupellation export --to file``, :class:`~cupellation_exporters.OtlpJsonFileSpanExporter`
and the Collector's ``file`` exporter write). One ``INSERT … SELECT`` reads it: each
line's ``resourceSpans[].scopeSpans[].spans[]`` are unrolled with ``ARRAY JOIN`` and
every column is computed in SQL, no span passes through Python:

- ``Timestamp`` the span's start, ``Duration`` its end minus its start (nanoseconds);
- ``TraceId``/``SpanId``/``ParentSpanId`` lowercase hex (base64 ids, as protobuf's JSON
  mapping writes them, are turned into hex);
- ``SpanKind`` and ``StatusCode`` as the exporter names them (``SPAN_KIND_INTERNAL``,
  ``STATUS_CODE_ERROR``: pdata's proto names), ``StatusMessage``;
- ``ServiceName`` the resource's ``service.name``; ``ResourceAttributes``,
  ``ScopeName``, ``ScopeVersion``;
- ``SpanAttributes``, ``Events.Attributes`` and ``Links.Attributes`` every value a
  string as pdata's ``AsString`` writes it: a string as it is, an int in decimal, a bool
  ``true``/``false``, a double in ClickHouse's shortest form (``1e21`` where Go writes
  ``1e+21``: the same number, and the reader types it back by the attribute's declared
  type), a list as compact JSON; a map or bytes value as its OTLP/JSON text;
- ``Events.Timestamp``/``Events.Name``, ``Links.TraceId``/``SpanId``/``TraceState``.

Spans already in the table (same ``TraceId`` and ``SpanId``) are left out, so loading a
file again adds nothing. A line that is not JSON but looks like a trace (it names
``resourceSpans``), and a span without a trace or span id, is damaged; other JSON lines
(metrics, logs) are counted as other programs'. On a server the file is streamed
through the client into the session's staging table first, as for logs.
"""

from __future__ import annotations

import gzip
import zlib
from typing import TYPE_CHECKING, Any, Final

from ..logs import DamagedLine
from ._schema import TRACES_TABLE

if TYPE_CHECKING:
    from ._client import StoreSession
    from ._load import LoadStats

__all__ = ["is_otlp_trace_file", "load_trace_source"]

#: How many damaged lines one file names at most (all are counted).
_NAMED: Final = 1000
_SPANS: Final = "_cupellation_load_spans"


def is_otlp_trace_file(path: str) -> bool:
    """True when the first line of ``path`` (plain or gzip) is an OTLP/JSON traces
    object (it names ``resourceSpans``)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            stream: Any = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
            sample = stream.read(1 << 16)
    except (OSError, EOFError, zlib.error):
        return False
    first = sample.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"resourceSpans"' in first


def _raw_text(value: str, key: str) -> str:
    """A scalar member as text: a JSON string unquoted, a number as written."""
    return f"trim(BOTH '\"' FROM JSONExtractRaw({value}, '{key}'))"


def _value_text(value: str) -> str:
    """An OTLP AnyValue (raw JSON in ``value``) as pdata's ``AsString`` writes it."""
    element = ("multiIf(JSONHas(e, 'stringValue'), toJSONString(JSONExtractString(e, "
               f"'stringValue')), JSONHas(e, 'intValue'), {_raw_text('e', 'intValue')}, "
               "JSONHas(e, 'doubleValue'), toString(JSONExtractFloat(e, 'doubleValue')), "
               "JSONHas(e, 'boolValue'), if(JSONExtractBool(e, 'boolValue'), 'true', "
               "'false'), JSONExtractRaw(e))")
    return (f"multiIf(JSONHas({value}, 'stringValue'), JSONExtractString({value}, "
            f"'stringValue'), JSONHas({value}, 'intValue'), {_raw_text(value, 'intValue')}, "
            f"JSONHas({value}, 'doubleValue'), toString(JSONExtractFloat({value}, "
            f"'doubleValue')), JSONHas({value}, 'boolValue'), if(JSONExtractBool({value}, "
            f"'boolValue'), 'true', 'false'), JSONHas({value}, 'arrayValue'), concat('[', "
            f"arrayStringConcat(arrayMap(e -> {element}, JSONExtractArrayRaw({value}, "
            f"'arrayValue', 'values')), ','), ']'), JSONExtractRaw({value}))")


_VALUE: Final = "JSONExtractRaw(x, 'value')"


def _attributes(holder: str, *path: str) -> str:
    """The OTLP attribute list at ``holder``'s ``path`` as a Map of strings."""
    keys = ", ".join(f"'{key}'" for key in path)
    listed = f"JSONExtractArrayRaw({holder}, {keys})"
    return (f"mapFromArrays(arrayMap(x -> JSONExtractString(x, 'key'), {listed}), "
            f"arrayMap(x -> {_value_text(_VALUE)}, {listed}))")


def _hex_id(value: str) -> str:
    """An id as lowercase hex (base64 ids decoded); empty when absent."""
    return (f"if(match({value}, '^[0-9a-fA-F]*$'), lower({value}), "
            f"lower(hex(tryBase64Decode({value}))))")


def _nanos(holder: str, key: str) -> str:
    return f"toUInt64OrZero({_raw_text(holder, key)})"


_KINDS: Final = ("'SPAN_KIND_UNSPECIFIED', 'SPAN_KIND_INTERNAL', 'SPAN_KIND_SERVER', "
                 "'SPAN_KIND_CLIENT', 'SPAN_KIND_PRODUCER', 'SPAN_KIND_CONSUMER'")
_CODES: Final = "'STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'"


def _enum(raw: str, names: str) -> str:
    """An OTLP enum written as its number (or its name, kept as written)."""
    return (f"if(match({raw}, '^[0-9]*$'), arrayElement([{names}], "
            f"toUInt32OrZero({raw}) + 1), {raw})")


#: The spans of a source's lines, one row each, with every column the exporter writes.
_SPAN_ROWS: Final = f"""
SELECT n, line,
    fromUnixTimestamp64Nano(toInt64({_nanos('sp', 'startTimeUnixNano')}), 'UTC') AS ts,
    {_hex_id(_raw_text('sp', 'traceId'))} AS trace_id,
    {_hex_id(_raw_text('sp', 'spanId'))} AS span_id,
    {_hex_id(_raw_text('sp', 'parentSpanId'))} AS parent_id,
    JSONExtractString(sp, 'traceState') AS trace_state,
    JSONExtractString(sp, 'name') AS span_name,
    {_enum(_raw_text('sp', 'kind'), _KINDS)} AS span_kind,
    {_attributes('rs', 'resource', 'attributes')} AS resource_attributes,
    JSONExtractString(ss, 'scope', 'name') AS scope_name,
    JSONExtractString(ss, 'scope', 'version') AS scope_version,
    {_attributes('sp', 'attributes')} AS span_attributes,
    greatest({_nanos('sp', 'endTimeUnixNano')}, {_nanos('sp', 'startTimeUnixNano')})
        - {_nanos('sp', 'startTimeUnixNano')} AS duration,
    {_enum(_raw_text("JSONExtractRaw(sp, 'status')", 'code'), _CODES)} AS status_code,
    JSONExtractString(sp, 'status', 'message') AS status_message,
    JSONExtractArrayRaw(sp, 'events') AS events,
    JSONExtractArrayRaw(sp, 'links') AS links
FROM (SELECT n, line FROM {{source}} WHERE isValidJSON(line) AND JSONHas(line, 'resourceSpans'))
ARRAY JOIN JSONExtractArrayRaw(line, 'resourceSpans') AS rs
ARRAY JOIN JSONExtractArrayRaw(rs, 'scopeSpans') AS ss
ARRAY JOIN JSONExtractArrayRaw(ss, 'spans') AS sp"""

_INSERT: Final = f"""
INSERT INTO {{table}} (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName,
    SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes,
    Duration, StatusCode, StatusMessage, `Events.Timestamp`, `Events.Name`,
    `Events.Attributes`, `Links.TraceId`, `Links.SpanId`, `Links.TraceState`,
    `Links.Attributes`)
SELECT ts, trace_id, span_id, parent_id, trace_state, span_name, span_kind,
    resource_attributes['service.name'], resource_attributes, scope_name, scope_version,
    span_attributes, duration, status_code, status_message,
    arrayMap(e -> fromUnixTimestamp64Nano(toInt64({_nanos('e', 'timeUnixNano')}), 'UTC'),
             events),
    arrayMap(e -> JSONExtractString(e, 'name'), events),
    arrayMap(e -> {_attributes('e', 'attributes')}, events),
    arrayMap(l -> {_hex_id(_raw_text('l', 'traceId'))}, links),
    arrayMap(l -> {_hex_id(_raw_text('l', 'spanId'))}, links),
    arrayMap(l -> JSONExtractString(l, 'traceState'), links),
    arrayMap(l -> {_attributes('l', 'attributes')}, links)
FROM {_SPANS}
WHERE trace_id != '' AND span_id != '' AND (trace_id, span_id) NOT IN (
    SELECT TraceId, SpanId FROM {{table}}
    WHERE TraceId IN (SELECT DISTINCT trace_id FROM {_SPANS}))"""

def _scan_sql(source: str) -> str:
    """Per line: blank, a trace document, damaged (names resourceSpans but is no JSON)."""
    return f"""
SELECT count(), countIf(trimBoth(line) = ''), countIf(isValidJSON(line) AND
       JSONHas(line, 'resourceSpans')),
       countIf(NOT isValidJSON(line) AND position(line, '"resourceSpans"') > 0),
       groupArrayIf({_NAMED})((n, substring(line, 1, 80)),
                              NOT isValidJSON(line) AND position(line, '"resourceSpans"') > 0)
FROM {source}"""


def load_trace_source(session: StoreSession, name: str, source: tuple[str, dict[str, Any]],
                      stats: LoadStats) -> None:
    """Load one trace file's spans (``source``: the SQL of its numbered lines and its
    parameters) into ``otel_traces``, counting into ``stats``."""
    sql, bound = source
    lines, blank, documents, damaged, named = session.rows(_scan_sql(sql), bound)[0]
    stats.sources.append(name)
    stats.lines += int(lines)
    stats.blank_lines += int(blank)
    stats.damaged += int(damaged)
    stats.other_lines += int(lines) - int(blank) - int(documents) - int(damaged)
    room = max(0, _NAMED - len(stats.damaged_lines))
    stats.damaged_lines.extend(
        DamagedLine(name, int(number), f"not readable OTLP/JSON: {str(text)!r}")
        for number, text in sorted(named)[:room])
    if not documents:
        return
    session.command(f"DROP TEMPORARY TABLE IF EXISTS {_SPANS}")
    session.command(f"CREATE TEMPORARY TABLE {_SPANS} ENGINE = Memory AS "
                    + _SPAN_ROWS.format(source=sql), bound)
    spans, runs, idless, idless_named = session.rows(
        f"SELECT count(), uniqExactIf(span_attributes['cupel.run.id'], "
        f"span_attributes['cupel.run.id'] != ''), countIf(trace_id = '' OR span_id = ''), "
        f"groupArrayIf(100)(n, trace_id = '' OR span_id = '') FROM {_SPANS}")[0]
    stats.runs += int(runs)
    stats.damaged += int(idless)
    stats.damaged_lines.extend(
        DamagedLine(name, int(number), "a span without a trace or span id")
        for number in sorted(set(idless_named))[:max(0, _NAMED - len(stats.damaged_lines))])
    table = session.table(TRACES_TABLE)
    before = int(session.rows(f"SELECT count() FROM {table}")[0][0])
    session.command(_INSERT.format(table=table))
    added = int(session.rows(f"SELECT count() FROM {table}")[0][0]) - before
    stats.spans_loaded += added
    stats.spans_skipped += int(spans) - int(idless) - added
    session.command(f"DROP TEMPORARY TABLE IF EXISTS {_SPANS}")

"""The columns layout: a span's per-item decisions as chunked JSON text attributes.

Under the columns layout (the default), the per-item events a span would carry
(``cupel.exclusion`` on a stage span, ``cupel.item.included`` on the root) are
written as ONE compact JSON object instead of one span event per item::

    {"cupel.exclusion": {"cupel.exclusion.seq": [5, 6, ...],
                         "cupel.exclusion.reason": ["BudgetExceeded", ...], ...},
     "cupel.item.included": {...}}

Each inner object holds one column per attribute name, one entry per item in seq
order (``null`` where an item has no such attribute): the attribute names and
values are exactly those of the events layout, so the decoder turns each row
back into the event the events layout would have carried and decodes it the
same way.

The JSON text is cut, on UTF-8 character boundaries, into chunks of at most
:data:`MAX_CHUNK_BYTES` (2,048) bytes: Tempo's distributor truncates any string
value longer than its ``max_attribute_bytes`` (2,048 by default). Chunk ``k`` is
the string attribute ``cupel.columns.<k>``. A span holds at most
:data:`CHUNKS_ON_CARRIER` chunks itself, and the rest go on child spans named
``<span name>.part`` (``cupel.stage.slice.part``, ``cupel.pipeline.part``) with
at most :data:`CHUNKS_PER_PART` chunks each and their index in
``cupel.columns.part``, so no span comes near the SDK's default limit of 128
attributes. The carrier states ``cupel.columns.chunk_count``,
``cupel.columns.part_count`` and ``cupel.columns.byte_count``, from which the
decoder names any chunk or part that did not arrive.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from ..exceptions import InvalidValueError

__all__ = [
    "BYTE_COUNT",
    "CHUNKS_ON_CARRIER",
    "CHUNKS_PER_PART",
    "CHUNK_COUNT",
    "CHUNK_PREFIX",
    "COLUMN_ATTRIBUTES",
    "LAYOUT",
    "MAX_CHUNK_BYTES",
    "PART_COUNT",
    "PART_INDEX",
    "PART_SUFFIX",
    "ColumnSet",
    "Columns",
    "SpanLayout",
    "chunk_ends",
    "chunk_text",
    "column_rows",
    "columns_from_document",
    "columns_text",
    "is_chunk_attribute",
    "rows_from_document",
]

#: The root span attribute naming the layout (``"columns"`` or ``"events"``).
LAYOUT: Final = "cupel.layout"
#: Chunk ``k`` of a span's columns is the attribute ``cupel.columns.<k>``.
CHUNK_PREFIX: Final = "cupel.columns."
CHUNK_COUNT: Final = "cupel.columns.chunk_count"
PART_COUNT: Final = "cupel.columns.part_count"
BYTE_COUNT: Final = "cupel.columns.byte_count"
#: On a part span: its index (0 for the first part span).
PART_INDEX: Final = "cupel.columns.part"
PART_SUFFIX: Final = ".part"
#: The largest chunk, in UTF-8 bytes (Tempo's default ``max_attribute_bytes``).
MAX_CHUNK_BYTES: Final = 2048
#: Chunks on the carrier span itself, and on each part span: with the spans' own
#: attributes (at most 45 on the root) every span stays under 128 attributes.
CHUNKS_ON_CARRIER: Final = 64
CHUNKS_PER_PART: Final = 100
#: The carrier's column bookkeeping attributes (chunks aside).
COLUMN_ATTRIBUTES: Final = frozenset({CHUNK_COUNT, PART_COUNT, BYTE_COUNT})

_CHUNK_NAME = re.compile(r"cupel\.columns\.(0|[1-9][0-9]{0,8})\Z")


class SpanLayout(enum.StrEnum):
    """How a run's per-item decisions travel on its spans.

    ``COLUMNS`` (the default): one chunked JSON text of columns per span, which
    survives the SDK's default limits and Tempo's 2,048-byte value truncation at
    any number of items. ``EVENTS``: the specification chapter's one span event
    per item (``cupel.exclusion``, ``cupel.item.included``), for queries written
    for the .NET and Rust bridges; the SDK keeps only 128 events per span unless
    ``OTEL_SPAN_EVENT_COUNT_LIMIT`` is raised, and the rebuilt report says so.
    """

    COLUMNS = "columns"
    EVENTS = "events"

    @classmethod
    def parse(cls, value: SpanLayout | str) -> SpanLayout:
        """A layout from itself or its name; raises InvalidValueError naming the value."""
        if isinstance(value, SpanLayout):
            return value
        if isinstance(value, str):
            try:
                return cls(value.lower())
            except ValueError:
                pass
        raise InvalidValueError("layout", value, "must be 'columns' or 'events'")


def is_chunk_attribute(name: str) -> int | None:
    """The chunk index of a ``cupel.columns.<k>`` name, else None."""
    match = _CHUNK_NAME.match(name)
    return int(match.group(1)) if match else None


class ColumnSet:
    """The item-event columns gathered for one span, by event name: blocks of columns
    (one per batch), merged when the span is written."""

    __slots__ = ("blocks",)

    def __init__(self) -> None:
        self.blocks: dict[str, list[tuple[int, dict[str, list[Any]]]]] = {}

    def add(self, name: str, rows: Iterable[Mapping[str, Any] | None]) -> int:
        """Add the rows of one batch (None rows, which no span can carry, are left
        out); returns how many were added."""
        kept = [row for row in rows if row is not None]
        if kept:
            self.blocks.setdefault(name, []).append((len(kept), _columns(kept)))
        return len(kept)

    def add_columns(self, name: str, count: int, columns: dict[str, list[Any]]) -> None:
        """Add one batch of ``count`` items already in columns (None: no value)."""
        if count:
            self.blocks.setdefault(name, []).append((count, columns))

    def __bool__(self) -> bool:
        return bool(self.blocks)


def _columns(rows: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """One list per attribute name, ``None`` where a row lacks it."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return {key: [row.get(key) for row in rows] for key in keys}


def _merged(blocks: list[tuple[int, dict[str, list[Any]]]]) -> dict[str, list[Any]]:
    if len(blocks) == 1:
        return blocks[0][1]
    keys: dict[str, None] = {}
    for _, columns in blocks:
        keys.update(dict.fromkeys(columns))
    out: dict[str, list[Any]] = {key: [] for key in keys}
    for count, columns in blocks:
        for key, column in out.items():
            part = columns.get(key)
            column.extend(part if part is not None else [None] * count)
    return out


_encoder = msgspec.json.Encoder()


def columns_text(columns: ColumnSet) -> bytes:
    """The compact UTF-8 JSON of a span's columns."""
    return _encoder.encode({name: _merged(blocks) for name, blocks in columns.blocks.items()})


def chunk_ends(data: bytes, limit: int = MAX_CHUNK_BYTES) -> list[int]:
    """Where each chunk of ``data`` (UTF-8) ends: pieces of at most ``limit`` bytes,
    cut on character boundaries."""
    ends: list[int] = []
    start, size = 0, len(data)
    while start < size:
        end = min(start + limit, size)
        if end < size:
            while data[end] & 0xC0 == 0x80:  # never cut inside a character
                end -= 1
        ends.append(end)
        start = end
    return ends


def chunk_text(data: bytes, limit: int = MAX_CHUNK_BYTES) -> list[str]:
    """``data`` (UTF-8) cut into strings of at most ``limit`` bytes each, on character
    boundaries."""
    ends = chunk_ends(data, limit)
    return [data[start:end].decode("utf-8") for start, end in zip([0, *ends], ends,
                                                                  strict=False)]


#: One event name's columns: the attribute names, their columns, the row count.
Columns = tuple[list[str], list[list[Any]], int]


def columns_from_document(document: Any) -> dict[str, Columns]:
    """The columns of item-event attributes in a decoded columns document, by event
    name. Raises ValueError naming what is wrong with a document of another shape."""
    if not isinstance(document, dict):
        raise ValueError(f"the columns are a JSON {type(document).__name__}, not an object")
    out: dict[str, Columns] = {}
    for name, columns in document.items():
        if not isinstance(columns, dict) or not all(isinstance(c, list)
                                                    for c in columns.values()):
            raise ValueError(f"the columns of {name!r} are not an object of arrays")
        lengths = {len(column) for column in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"the columns of {name!r} have different lengths "
                             f"({', '.join(str(n) for n in sorted(lengths))})")
        out[name] = (list(columns), list(columns.values()), lengths.pop() if lengths else 0)
    return out


def column_rows(columns: Columns) -> list[dict[str, Any]]:
    """One event name's columns as rows of attributes (a null is no attribute)."""
    names, values, count = columns
    return [{key: column[k] for key, column in zip(names, values, strict=True)
             if column[k] is not None} for k in range(count)]


def rows_from_document(document: Any) -> dict[str, list[dict[str, Any]]]:
    """The rows of item-event attributes in a decoded columns document, by event name.
    Raises ValueError naming what is wrong with a document of another shape."""
    return {name: column_rows(columns)
            for name, columns in columns_from_document(document).items()}

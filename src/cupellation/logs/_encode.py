"""Events as JSON lines, byte for byte :func:`~cupellation.events.event_to_json`,
fast enough to log every item decision of a run.

Run- and stage-level events go through ``event_to_json`` itself. A whole
:class:`~cupellation.events.ItemEventBatch` is encoded column by column with
C-level ``map`` calls: each line is a fixed template filled with its ``seq``,
candidate index (and position), score, and two JSON fragments — the item's
``item.*`` keys and the reason's ``reason.*`` keys. Those fragments are made
by the spine itself (``event_to_dict`` of a one-item event, then cut out), so
they are exact, and cached: an item by identity (items are immutable, and the
cache holds the item so its id cannot be reused), a reason by value when its
fields are integers and strings only. Tests compare every line with
``event_to_json(apply_content_capture(event, policy))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from .._model import ContextItem
from ..events import (
    EVENT_SCHEMA_VERSION,
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    StageCompleted,
    StageStarted,
    apply_content_capture,
    event_to_json,
)
from ..reasons import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequireCandidatesExhausted,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
)

__all__ = ["LineEncoder"]

_encode = msgspec.json.encode
_ITEM_PREFIX = "item."
_REASON_PREFIX = "reason."
#: Cache sizes: past this many entries a cache starts again from empty.
_CACHE_LIMIT = 65_536
_CACHEABLE_FIELD_TYPES = (int, str)


def _fragment(flat: dict[str, Any], prefix: str) -> bytes:
    """The ``"<prefix>...":value`` members of ``flat``, each preceded by a comma."""
    part = {key: value for key, value in flat.items() if key.startswith(prefix)}
    return b"," + _encode(part)[1:-1]


class LineEncoder:
    """Turns events into JSON-lines bytes under one content-capture policy.

    Thread-safe: the caches are plain dictionaries whose worst race is a
    fragment computed twice.
    """

    __slots__ = ("_capture", "_item_frags", "_item_refs", "_reason_frags", "_reason_refs")

    def __init__(self, capture: ContentCapture) -> None:
        self._capture = capture
        self._item_frags: dict[Any, bytes] = {}
        self._item_refs: dict[Any, ContextItem] = {}
        self._reason_frags: dict[Any, bytes] = {}
        self._reason_refs: dict[Any, object] = {}

    @property
    def capture(self) -> ContentCapture:
        """The policy applied to every line."""
        return self._capture

    def event_line(self, event: PipelineEvent) -> bytes:
        """One event as a line (with its newline)."""
        kind = type(event)
        if kind is StageStarted or kind is StageCompleted or kind is RunCompleted:
            line = _scalar_line(event)
            if line is not None:
                return line
        return (event_to_json(apply_content_capture(event, self._capture)) + "\n").encode()

    def lines(self, events: Sequence[PipelineEvent]) -> bytes:
        """The lines of one ``record()`` call: a one-event tuple or an item batch."""
        if isinstance(events, ItemEventBatch) and len(events) > 0:
            try:
                return self._batch(events)
            except _SlowPath:
                pass
        return b"".join(map(self.event_line, events))

    # -- item batches -------------------------------------------------------------

    def _item_fragments(self, batch: ItemEventBatch) -> list[bytes]:
        frags, refs = self._item_frags, self._item_refs
        keys: list[Any] = (
            list(zip(map(id, batch.items), batch.candidate_indices, strict=True))
            if self._capture is ContentCapture.NONE else list(map(id, batch.items)))
        found: list[bytes | None] = list(map(frags.get, keys))
        if None in found:
            if len(frags) > _CACHE_LIMIT:
                frags.clear()
                refs.clear()
            for k, known in enumerate(found):
                if known is None:
                    item = batch.items[k]
                    probe = ItemIncluded(run_id="-", seq=0,
                                         candidate_index=batch.candidate_indices[k], position=0,
                                         score=0.0, item=item, reason=InclusionReason.SCORED)
                    line = event_to_json(apply_content_capture(probe, self._capture))
                    fragment = frags[keys[k]] = _fragment(msgspec.json.decode(line),
                                                          _ITEM_PREFIX)
                    refs[keys[k]] = item
                    found[k] = fragment
        return found  # type: ignore[return-value]

    @staticmethod
    def _reason_fragment(reason: ExclusionReason | InclusionReason) -> bytes:
        item = ContextItem("-", 0)
        probe: PipelineEvent
        if isinstance(reason, InclusionReason):
            probe = ItemIncluded(run_id="-", seq=0, candidate_index=0, position=0, score=0.0,
                                 item=item, reason=reason)
        else:
            probe = ItemExcluded(run_id="-", seq=0, stage=PipelineStage.SLICE,
                                 candidate_index=0, score=0.0, item=item, reason=reason)
        return _fragment(msgspec.json.decode(event_to_json(probe)), _REASON_PREFIX)

    def _reason_fragments(self, reasons: tuple[Any, ...]) -> list[bytes]:
        kinds = set(map(type, reasons))
        keys: list[Any]
        if kinds == {InclusionReason}:
            # Mostly the shared constants: by identity, holding each reason.
            keys = list(map(id, reasons))
        elif all(kind in _BY_VALUE for kind in kinds):
            keys = list(reasons)
        else:
            return [self._reason_fragment(reason) for reason in reasons]
        cache, refs = self._reason_frags, self._reason_refs
        found: list[bytes | None] = list(map(cache.get, keys))
        if None in found:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
                refs.clear()
            for k, known in enumerate(found):
                if known is None:
                    fragment = cache[keys[k]] = self._reason_fragment(reasons[k])
                    refs[keys[k]] = reasons[k]
                    found[k] = fragment
        return found  # type: ignore[return-value]

    def _batch(self, batch: ItemEventBatch) -> bytes:
        scores = batch.scores
        if not all(map(math.isfinite, scores)):
            raise _SlowPath  # event_to_json raises the spine's error for it
        kind = b"item_excluded" if batch.excluded else b"item_included"
        head = (b'{"schema":' + str(EVENT_SCHEMA_VERSION).encode() + b',"type":"' + kind
                + b'","run_id":' + _escape(_encode(batch.run_id)) + b',"seq":%d')
        count = len(batch)
        seqs = range(batch.first_seq, batch.first_seq + count)
        score_json = list(map(_encode, scores))
        items = self._item_fragments(batch)
        reasons = self._reason_fragments(batch.reasons)
        columns: Any
        if batch.excluded:
            stage = batch.stage
            name = stage.value if isinstance(stage, PipelineStage) else stage
            template = (head + b',"stage":' + _escape(_encode(name))
                        + b',"candidate_index":%d,"score":%b%b%b}\n')
            columns = zip(seqs, batch.candidate_indices, score_json, items, reasons, strict=True)
        else:
            assert batch.positions is not None
            template = head + b',"candidate_index":%d,"position":%d,"score":%b%b%b}\n'
            columns = zip(seqs, batch.candidate_indices, batch.positions, score_json, items,
                          reasons, strict=True)
        return b"".join(map(template.__mod__, columns))


def _scalar_line(event: Any) -> bytes | None:
    """The line of a stage or run-completed event (no content: capture cannot
    change it), or None to let ``event_to_json`` deal with an unusual value."""
    kind = type(event)
    names = _SCALAR_FIELDS[kind]
    values = [getattr(event, name) for name in names]
    if not all(type(v) is int or (type(v) is float and math.isfinite(v))
               or isinstance(v, PipelineStage) for v in values):
        return None
    parts = [b'{"schema":', _SCHEMA, b',"type":"', kind.type.encode(), b'","run_id":',
             _encode(event.run_id), b',"seq":', _encode(event.seq)]
    for name, value in zip(names, values, strict=True):
        parts += (b',"', name.encode(), b'":',
                  _encode(value.value if isinstance(value, PipelineStage) else value))
    parts.append(b"}\n")
    return b"".join(parts)


_SCHEMA = str(EVENT_SCHEMA_VERSION).encode()
#: The declared fields of the events :func:`_scalar_line` writes, in declaration order.
_SCALAR_FIELDS: dict[type, tuple[str, ...]] = {
    kind: tuple(name for name in kind.__struct_fields__ if name not in ("run_id", "seq"))
    for kind in (StageStarted, StageCompleted, RunCompleted)
}


def _escape(text: bytes) -> bytes:
    """``text`` as literal bytes inside a %-template."""
    return text.replace(b"%", b"%%")


def _by_value(kind: type) -> bool:
    """Whether equal reasons of ``kind`` always encode alike: integer and string
    fields only (a float field would merge 0.0 and -0.0)."""
    return all(info.type in _CACHEABLE_FIELD_TYPES for info in msgspec.structs.fields(kind))


#: Known exclusion reasons cached by value.
_BY_VALUE: frozenset[type] = frozenset(
    kind for kind in (BudgetExceeded, NegativeTokens, CountCapExceeded, QuotaCapExceeded,
                      QuotaRequireDisplaced, Filtered, CountRequireCandidatesExhausted,
                      ScoredTooLow, Deduplicated, PinnedOverride)
    if _by_value(kind))


class _SlowPath(Exception):
    """This batch goes through ``event_to_json`` event by event."""

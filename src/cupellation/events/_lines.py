"""Events as canonical JSON lines, fast enough to write every item decision of a run,
and the sinks' side of the run digest.

A line is byte for byte ``event_to_json(apply_content_capture(event, policy))``
and a newline. Run- and stage-level events go through ``event_to_json`` (stage
events through a template of their scalar fields). A whole
:class:`~cupellation.events.ItemEventBatch` is encoded column by column with
C-level ``map`` calls: each line is a fixed template filled with its ``seq``,
candidate index (and position), score, and two JSON fragments — the item's
``item.*`` keys and the reason's ``reason.*`` keys — made by the events' flat
codec and cached: an item by identity (the cache holds the item, so its id
cannot be reused), a reason by value when its fields are integers and strings
only. Tests compare every line with the definition.

:class:`RunLineEncoder` adds the digest: it hashes each run's lines as they are
made and writes the result into the run's end event (hashed without it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any, Final

import msgspec

from .._model import ContextItem
from .._model.wire import ITEM_FIELDS, to_flat
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, InclusionReason
from ..settings import resolve_digest_key
from ._batch import ItemEventBatch
from ._capture import apply_content_capture, captured_item, placeholder_content
from ._digest import DigestCheck, RunDigest, RunHasher
from ._flat import EVENT_SCHEMA_VERSION, event_to_json, reason_to_flat
from ._levels import ContentCapture
from ._types import (
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    StageCompleted,
    StageStarted,
)

__all__ = ["LineEncoder", "RunLineEncoder", "item_fragment", "reason_fragment",
           "run_digest", "verify_events"]

_encode = msgspec.json.encode
#: Cache sizes: past this many entries a cache starts again from empty.
_CACHE_LIMIT: Final = 65_536


def item_fragment(item: ContextItem, capture: ContentCapture, index: int) -> bytes:
    """The ``,"item.<name>":value`` members of ``item``'s canonical line (candidate
    ``index``, under ``capture``)."""
    flat: dict[str, Any] = {}
    to_flat(ITEM_FIELDS, captured_item(item, capture, index), "item.", flat)
    return b"," + _encode(flat)[1:-1]


def reason_fragment(reason: ExclusionReason | InclusionReason) -> bytes:
    """The ``,"reason.<name>":value`` members of a canonical line."""
    flat: dict[str, Any] = {}
    reason_to_flat(reason, flat)
    return b"," + _encode(flat)[1:-1]


def _escape(text: bytes) -> bytes:
    """``text`` as literal bytes inside a %-template."""
    return text.replace(b"%", b"%%")


def _template(kind: Any) -> tuple[bytes, Any]:
    """A known exclusion reason's ``reason.*`` members as a %-template (its fields in
    name order, as the flat form writes them) and the getter of its field values."""
    fields = sorted(kind.__struct_fields__)
    template = b',"reason.name":' + _escape(_encode(kind.__name__)) + b"".join(
        b',"reason.' + field.encode() + b'":%b' for field in fields)
    if not fields:
        return template, lambda reason: ()
    getter = attrgetter(*(fields * 2 if len(fields) == 1 else fields))
    return template, (lambda reason: getter(reason)[:1]) if len(fields) == 1 else getter


#: Each known exclusion reason's template and field getter.
_TEMPLATES: Final = {kind: _template(kind) for kind in KNOWN_EXCLUSION_REASONS.values()}
#: Known exclusion reasons whose equal values always encode alike (integer and text
#: fields only: a float field would merge 0.0 and -0.0): cached by value.
_BY_VALUE: Final = frozenset(
    kind for kind in KNOWN_EXCLUSION_REASONS.values()
    if all(info.type in (int, str, int | str) for info in msgspec.structs.fields(kind)))


def _templated(reason: Any) -> bytes:
    """A known reason's ``reason.*`` members through its type's template."""
    template, values = _TEMPLATES[type(reason)]
    return template % tuple(map(_encode, values(reason)))
#: The ``item.content`` member under ``none`` capture, for candidate 0.
_PLACEHOLDER: Final = b',"item.content":' + _encode(placeholder_content(0))
_SCHEMA: Final = str(EVENT_SCHEMA_VERSION).encode()
#: The declared fields of the stage events, in declaration order (written by template).
_STAGE_FIELDS: Final[dict[type, tuple[str, ...]]] = {
    kind: tuple(name for name in kind.__struct_fields__ if name not in ("run_id", "seq"))
    for kind in (StageStarted, StageCompleted)
}


def _stage_template(kind: Any) -> bytes:
    """A stage event's line as a %-template: the run id and every field as ``%b``
    (JSON-encoded), ``seq`` as ``%d``."""
    return (b'{"type":' + _escape(_encode(kind.type)) + b',"schema":' + _SCHEMA
            + b',"run_id":%b,"seq":%d' + b"".join(
                b',"' + _escape(name.encode()) + b'":%b'
                for name in _STAGE_FIELDS[kind]) + b"}\n")


#: Each stage event's line template, and the getter of its fields' values.
_STAGE_TEMPLATES: Final = {kind: (_stage_template(kind), attrgetter(*names))
                           for kind, names in _STAGE_FIELDS.items()}
#: Each stage's name as JSON.
_STAGE_JSON: Final = {stage: _encode(stage.value) for stage in PipelineStage}


def _stage_value(value: Any) -> bytes:
    """One field of a stage event as JSON; KeyError for a value to leave to
    ``event_to_json`` (not an int, a finite float or a stage)."""
    kind = type(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return _encode(value)
    return _STAGE_JSON[value]  # a PipelineStage (a str is a key of no stage here)


def _stage_line(event: StageStarted | StageCompleted) -> bytes | None:
    """The line of a stage event (no content: capture cannot change it), or None to
    let ``event_to_json`` deal with an unusual value. One %-format of the kind's
    template: these lines are written for every stage of every traced run."""
    template, values = _STAGE_TEMPLATES[type(event)]
    seq = event.seq
    if type(seq) is not int:
        return None
    try:
        fields = tuple(map(_stage_value, values(event)))
    except (KeyError, TypeError):
        return None
    return template % (_encode(event.run_id), seq, *fields)


class _SlowPath(Exception):
    """This batch goes through ``event_to_json`` event by event."""


class LineEncoder:
    """Turns events into canonical JSON-lines bytes under one content-capture policy.

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
        if kind is StageStarted or kind is StageCompleted:
            line = _stage_line(event)  # type: ignore[arg-type]
            if line is not None:
                return line
        return (event_to_json(apply_content_capture(event, self._capture)) + "\n").encode()

    def lines(self, events: Sequence[PipelineEvent]) -> bytes:
        """The lines of one delivery: a one-event tuple, a list, or an item batch."""
        if isinstance(events, ItemEventBatch) and len(events) > 0:
            try:
                return self._batch(events)
            except _SlowPath:
                pass
        return b"".join(map(self.event_line, events))

    # -- item batches -------------------------------------------------------------

    def _item_fragments(self, batch: ItemEventBatch) -> list[bytes]:
        """Each item's ``item.*`` members, by item identity (under ``none`` capture
        without ``item.content``, which the line's template writes from the index)."""
        frags, refs = self._item_frags, self._item_refs
        keys = list(map(id, batch.items))
        found: list[bytes | None] = list(map(frags.get, keys))
        if None in found:
            if len(frags) > _CACHE_LIMIT:
                frags.clear()
                refs.clear()
            capture = self._capture
            for k, known in enumerate(found):
                if known is None:
                    item = batch.items[k]
                    fragment = item_fragment(item, capture, 0)
                    if capture is ContentCapture.NONE:
                        fragment = fragment[len(_PLACEHOLDER):]
                    frags[keys[k]] = found[k] = fragment
                    refs[keys[k]] = item
        return found  # type: ignore[return-value]

    def _reason_fragments(self, reasons: tuple[Any, ...]) -> list[bytes]:
        """Each reason's ``reason.*`` members: an inclusion reason (mostly the shared
        constants) cached by identity; a known exclusion reason with only integer and
        text fields cached by value, made through its type's template; anything else
        through the flat codec."""
        kinds = set(map(type, reasons))
        if kinds == {InclusionReason}:
            return self._cached(reasons, list(map(id, reasons)), reason_fragment)
        if not kinds <= _BY_VALUE:
            return [reason_fragment(reason) for reason in reasons]
        return self._cached(reasons, list(reasons), _templated)

    def _cached(self, reasons: tuple[Any, ...], keys: list[Any],
                make: Callable[[Any], bytes]) -> list[bytes]:
        cache, refs = self._reason_frags, self._reason_refs
        found: list[bytes | None] = list(map(cache.get, keys))
        if None in found:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
                refs.clear()
            for k, known in enumerate(found):
                if known is None:
                    found[k] = cache[keys[k]] = make(reasons[k])
                    refs[keys[k]] = reasons[k]
        return found  # type: ignore[return-value]

    def _batch(self, batch: ItemEventBatch) -> bytes:
        scores = batch.scores
        if not all(map(math.isfinite, scores)):
            raise _SlowPath  # event_to_json raises the events module's error for it
        kind = b"item_excluded" if batch.excluded else b"item_included"
        head = (b'{"type":"' + kind + b'","schema":' + _SCHEMA + b',"run_id":'
                + _escape(_encode(batch.run_id)) + b',"seq":%d')
        count = len(batch)
        seqs = range(batch.first_seq, batch.first_seq + count)
        score_json = list(map(_encode, scores))
        items = self._item_fragments(batch)
        reasons = self._reason_fragments(batch.reasons)
        columns: Any
        # Under none capture the content is a placeholder naming the candidate index.
        content = _PLACEHOLDER.replace(b"0", b"%d") if self._capture is ContentCapture.NONE else b""
        indices = batch.candidate_indices
        if batch.excluded:
            stage = batch.stage
            name = stage.value if isinstance(stage, PipelineStage) else stage
            template = (head + b',"stage":' + _escape(_encode(name))
                        + b',"candidate_index":%d,"score":%b' + content + b"%b%b}\n")
            columns = (zip(seqs, indices, score_json, indices, items, reasons, strict=True)
                       if content else zip(seqs, indices, score_json, items, reasons,
                                           strict=True))
        else:
            assert batch.positions is not None
            template = (head + b',"candidate_index":%d,"position":%d,"score":%b' + content
                        + b"%b%b}\n")
            columns = (zip(seqs, indices, batch.positions, score_json, indices, items, reasons,
                           strict=True) if content
                       else zip(seqs, indices, batch.positions, score_json, items, reasons,
                                strict=True))
        return b"".join(map(template.__mod__, columns))


class RunLineEncoder:
    """A sink's canonical lines with each run's digest: the lines of a run are hashed
    as they are made, and its end event (``run_completed``/``run_failed``, hashed
    without the member) is written with ``digest`` set.

    A run's digest is kept from its first delivery to its end; :meth:`forget`
    drops a run that will not end (a sink giving up on it).

    .. versionadded:: 0.3
    """

    __slots__ = ("_digests", "_encoder", "_key")

    def __init__(self, capture: ContentCapture, digest_key: bytes | None = None) -> None:
        self._encoder = LineEncoder(capture)
        self._key = digest_key
        self._digests: dict[str, RunDigest] = {}

    @property
    def capture(self) -> ContentCapture:
        """The content capture of every line."""
        return self._encoder.capture

    @property
    def keyed(self) -> bool:
        """True when digests are HMAC-SHA256."""
        return self._key is not None

    def lines(self, events: Sequence[PipelineEvent]) -> bytes:
        """The lines of one delivery of one run (the end event, if any, last), the
        end event's with the run's digest."""
        return self._encode(events, True)[0]

    def digest(self, events: Sequence[PipelineEvent]) -> str | None:
        """Hash one delivery without keeping its lines; the run's digest when the
        delivery ends the run, else None."""
        return self._encode(events, False)[1]

    def _encode(self, events: Sequence[PipelineEvent], signed: bool
                ) -> tuple[bytes, str | None]:
        if not events:
            return b"", None
        encoder = self._encoder
        run_id = events[0].run_id
        digest = self._digests.get(run_id)
        if digest is None:
            digest = self._digests[run_id] = RunDigest(self._key)
        last = events[-1]
        if not isinstance(last, RunCompleted | RunFailed):
            data = encoder.lines(events)
            digest.update(data)
            return data, None
        head = encoder.lines(events[:-1]) if len(events) > 1 else b""
        digest.update(head)
        digest.update(encoder.event_line(msgspec.structs.replace(last, digest=None)))
        del self._digests[run_id]
        text = digest.hexdigest()
        if not signed:
            return b"", text
        return head + encoder.event_line(msgspec.structs.replace(last, digest=text)), text

    def forget(self, run_id: str) -> None:
        """Drop the digest of a run that will not end."""
        self._digests.pop(run_id, None)


def _seq_of(entry: PipelineEvent | ItemEventBatch) -> int:
    return entry.first_seq if isinstance(entry, ItemEventBatch) else entry.seq


def _batched(events: Sequence[PipelineEvent | ItemEventBatch]
             ) -> Iterator[PipelineEvent | ItemEventBatch]:
    """``events`` in seq order, consecutive item events of one kind (and stage) gathered
    into batches, so that their lines are made the fast way."""
    run: list[Any] = []
    for entry in sorted(events, key=_seq_of):
        if isinstance(entry, ItemExcluded | ItemIncluded) and run and type(entry) is type(
                run[0]) and entry.seq == run[-1].seq + 1 and getattr(
                entry, "stage", None) == getattr(run[0], "stage", None):
            run.append(entry)
            continue
        if run:
            yield _batch_of(run)
        run = [entry] if isinstance(entry, ItemExcluded | ItemIncluded) else []
        if not run:
            yield entry
    if run:
        yield _batch_of(run)


def _batch_of(events: list[Any]) -> ItemEventBatch:
    first = events[0]
    excluded = isinstance(first, ItemExcluded)
    return ItemEventBatch(
        run_id=first.run_id, first_seq=first.seq, stage=first.stage if excluded else None,
        candidate_indices=[e.candidate_index for e in events], items=[e.item for e in events],
        scores=[e.score for e in events], reasons=[e.reason for e in events],
        positions=None if excluded else [e.position for e in events])


def _hash_lines(events: Sequence[PipelineEvent | ItemEventBatch], hasher: RunHasher | RunDigest,
                capture: ContentCapture) -> str | None:
    """Hash the canonical lines of ``events`` in seq order (under ``capture``), the end
    event without its digest; the digest the end event recorded."""
    encoder = LineEncoder(capture)
    recorded: str | None = None
    for entry in _batched(events):
        if isinstance(entry, ItemEventBatch):
            hasher.update(encoder.lines(entry))
            continue
        event = entry
        if isinstance(event, RunCompleted | RunFailed):
            recorded = event.digest
            event = msgspec.structs.replace(event, digest=None)
        hasher.update(encoder.event_line(event))
    return recorded


def verify_events(events: Sequence[PipelineEvent | ItemEventBatch],
                  digest_key: bytes | str | None = None) -> DigestCheck:
    """Check the digest a decoded run's end event carries against its events (the
    canonical line of each, in seq order). ``digest_key`` (or the
    ``CUPELLATION_DIGEST_KEY`` environment variable) checks a keyed digest."""
    hasher = RunHasher(resolve_digest_key(digest_key))
    recorded = _hash_lines(events, hasher, ContentCapture.FULL)
    return hasher.check(recorded)


def run_digest(events: Sequence[PipelineEvent | ItemEventBatch], capture: ContentCapture,
               digest_key: bytes | None = None) -> str:
    """The digest of a run's events as a sink under ``capture`` writes them (each
    event's canonical line after capture, in seq order; the end event without its
    digest)."""
    digest = RunDigest(digest_key)
    _hash_lines(events, digest, capture)
    return digest.hexdigest()

"""A span's column block decodes column by column exactly as row by row: the span
reader's fast path (``otel/_blocks.py``) gives the row path's events for blocks of
every known reason, item field, carrier and capture, and for blocks damaged at
random it gives the row path's events or declines (the row path then decides)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextItem
from cupellation.events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineStage,
    apply_content_capture,
)
from cupellation.otel._blocks import block_events
from cupellation.otel._columns import Columns, columns_from_document
from cupellation.otel._encode import exclusion_batch_columns, included_batch_columns
from cupellation.otel._names import reason_field_attribute
from cupellation.otel._spandecode import RunDecoding, column_flats
from cupellation.reasons import (
    KNOWN_EXCLUSION_REASONS,
    ExclusionReason,
    InclusionReason,
    reason_field_types,
)

RUN = "0123456789abcdef0123456789abcdef"
ITEMS = [
    ContextItem(content="hello <b>", tokens=7, kind="Document", source="Rag", priority=2,
                tags=("a", "B"), metadata={"k": [1, {"x": None}]},
                timestamp=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
                future_relevance_hint=0.25, pinned=True, original_tokens=9),
    ContextItem(content="plain", tokens=3),
    ContextItem(content="elsewhere ü", tokens=0, kind="ToolOutput", priority=-5,
                timestamp=datetime(2025, 6, 1, 12, tzinfo=timezone(timedelta(hours=2))),
                future_relevance_hint=1.0),
    ContextItem(content="negative", tokens=-4, tags=("x",), metadata={"a": "b"}),
]
_VALUES = {int: 3, str: "ToolOutput", float: 0.5}


def _reason(name: str, item: ContextItem) -> ExclusionReason:
    """The known reason ``name`` with plain values (its tokens field the item's)."""
    cls = KNOWN_EXCLUSION_REASONS[name]
    values = {field: _VALUES[kind] for field, kind in (reason_field_types(name) or {}).items()}
    if cls.tokens_field is not None:
        values[cls.tokens_field] = item.tokens
    return cls(**values)


def _exclusions() -> ItemEventBatch:
    """Every known reason with every item, as one exclusion batch."""
    pairs = [(item, _reason(name, item)) for name in sorted(KNOWN_EXCLUSION_REASONS)
             for item in ITEMS]
    return ItemEventBatch(run_id=RUN, first_seq=10, stage=PipelineStage.SLICE,
                          candidate_indices=range(len(pairs)), items=[i for i, _ in pairs],
                          scores=[0.5 + k / 100 for k in range(len(pairs))],
                          reasons=[r for _, r in pairs])


def _inclusions() -> ItemEventBatch:
    reasons = [InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN]
    pairs = [(item, reason) for reason in reasons for item in ITEMS]
    return ItemEventBatch(run_id=RUN, first_seq=100, stage=None,
                          candidate_indices=range(len(pairs)), items=[i for i, _ in pairs],
                          scores=[1.0 / (k + 1) for k in range(len(pairs))],
                          reasons=[r for _, r in pairs], positions=range(len(pairs)))


def _block(batch: ItemEventBatch, capture: ContentCapture, carrier: str | None
           ) -> tuple[str, Columns]:
    """The block the columns layout writes for ``batch``, as the reader gets it back
    (through the columns' JSON)."""
    if batch.excluded:
        encoded = exclusion_batch_columns(batch, capture, carrier)
        name = "cupel.exclusion"
    else:
        encoded = included_batch_columns(batch, capture)
        name = "cupel.item.included"
    assert encoded is not None
    _count, by_name = encoded
    document = msgspec.json.decode(msgspec.json.encode({name: by_name}))
    return name, columns_from_document(document)[name]


def _row_path(name: str, columns: Columns, carrier: str | None, capture: str
              ) -> RunDecoding:
    rows = RunDecoding(RUN, [])
    rows.capture = capture
    rows.decode_rows(column_flats(name, columns, RUN, carrier), "here", plain=True)
    return rows


def _agrees(name: str, columns: Columns, carrier: str | None, capture: str) -> bool:
    """The fast path's events are the row path's (True), or it declined (False)."""
    fast = block_events(name, columns, RUN, carrier, capture)
    if fast is None:
        return False
    rows = _row_path(name, columns, carrier, capture)
    assert rows.failures == {}
    assert rows.problems == []
    assert fast == rows.events
    # Equal times may differ in their offset: the reprs show it.
    assert list(map(repr, fast)) == list(map(repr, rows.events))
    return True


@pytest.mark.parametrize("capture", list(ContentCapture), ids=lambda c: c.value)
@pytest.mark.parametrize("carrier", ["Slice", None])
def test_every_reason_field_and_capture_decodes_as_the_row_path(
        capture: ContentCapture, carrier: str | None) -> None:
    """Blocks holding every known exclusion reason and inclusion reason, with items
    using every field (metadata, tags, an offset time, a hint, pinned, original
    tokens, zero and negative tokens), on a stage's span and on the root, at every
    capture: the fast path takes each whole and gives exactly the row path's events,
    which are the batch's own events as the capture shows them."""
    for batch in (_exclusions(), _inclusions()):
        if not batch.excluded and carrier is not None:
            continue
        name, columns = _block(batch, capture, carrier if batch.excluded else None)
        events = block_events(name, columns, RUN, carrier, capture.value)
        assert events is not None
        assert _agrees(name, columns, carrier, capture.value)
        expected: list[Any] = [apply_content_capture(event, capture) for event in batch]
        if capture is ContentCapture.FULL:
            assert events == expected
        assert [type(e) for e in events] == [ItemExcluded if batch.excluded else ItemIncluded
                                             ] * len(batch)
        assert [e.item.tokens for e in events] == [e.item.tokens for e in expected]


def test_a_run_whose_capture_is_unknown_or_whose_id_is_empty_takes_the_row_path() -> None:
    """Without a root span the capture is unknown (the row path then notes it), and an
    empty run id fails every row's record: the fast path declines both."""
    name, columns = _block(_exclusions(), ContentCapture.NONE, "Slice")
    assert block_events(name, columns, RUN, "Slice", None) is None
    assert block_events(name, columns, "", "Slice", "none") is None
    assert block_events(name, columns, RUN, "Slice", "none") is not None


def test_a_reason_disagreeing_with_its_item_takes_the_row_path() -> None:
    """A BudgetExceeded whose tokens are not its item's, a row holding another reason's
    field, and a reason this version does not know: each sends the block to the row
    path, which names or keeps them as the events module decides."""
    name, columns = _block(_exclusions(), ContentCapture.FULL, "Slice")
    names, values, count = columns
    reasons = values[names.index("cupel.exclusion.reason")]
    row = reasons.index("BudgetExceeded")
    for change in ("tokens", "extra", "unknown"):
        damaged = [list(column) for column in values]
        if change == "tokens":
            extra_names = [*names, reason_field_attribute("item_tokens")]
            damaged.append([None] * count)
            damaged[-1][row] = values[names.index("cupel.exclusion.item_tokens")][row] + 1
        elif change == "extra":
            extra_names = names
            damaged[names.index(reason_field_attribute("cap"))][row] = 2
        else:
            extra_names = names
            damaged[names.index("cupel.exclusion.reason")][row] = "Nonesuch"
        assert block_events(name, (extra_names, damaged, count), RUN, "Slice", "full") is None


_DAMAGE = st.sampled_from([
    None, -1, 0, 2, 2**63, -(2**63) - 1, 1.5, -0.0, True, False, "", "x", "Slice", "Memory",
    "BudgetExceeded", "Deduplicated", "Pinned", "Nonesuch", "2026-01-02T03:04:05Z",
    "2026-01-02T03:04:05+02:00", "Sort",
    "2026-01-02T03:04:05", "not a time", '{"a":1}', "{}", "[1]", [], ["a"], [1], {"a": 1}])
_EXTRA = st.sampled_from([
    "cupel.exclusion.reason.cap", "cupel.exclusion.cap", "cupel.exclusion.item_tokens",
    "cupel.exclusion.reason.item_tokens", "cupel.exclusion.stage", "cupel.item.content",
    "cupel.item.metadata", "cupel.item.pinned", "cupel.item.priority", "cupel.other",
    "cupel.exclusion.seq", "cupel.item.reason.x", "cupel.item.position", "unrelated"])


@settings(max_examples=400, deadline=None)
@given(st.booleans(), st.sampled_from(list(ContentCapture)),
       st.sampled_from(["Slice", "Deduplicate", None]),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 200), _DAMAGE), max_size=3),
       st.lists(st.tuples(_EXTRA, st.integers(0, 200), _DAMAGE), max_size=2),
       st.integers(-1, 40))
def test_a_damaged_block_decodes_as_the_row_path_or_is_declined(
        excluded: bool, capture: ContentCapture, carrier: str | None,
        cells: list[tuple[int, int, Any]], extras: list[tuple[str, int, Any]],
        dropped: int) -> None:
    """Random damage to a block (values replaced by other types, out-of-range numbers,
    other reasons' names, bad times, nulls; columns added or dropped): whenever the
    fast path answers, it answers exactly what the row path answers with no failure
    and no note."""
    batch = _exclusions() if excluded else _inclusions()
    name, (names, values, count) = _block(batch, capture, carrier if excluded else None)
    names, values = list(names), [list(column) for column in values]
    for column, row, value in cells:
        values[column % len(values)][row % count] = value
    for extra, row, value in extras:
        if extra in names:
            values[names.index(extra)][row % count] = value
        else:
            names.append(extra)
            values.append([None] * count)
            values[-1][row % count] = value
    if 0 <= dropped < len(names):
        del names[dropped], values[dropped]
    _agrees(name, (names, values, count), carrier, capture.value)


@pytest.mark.parametrize("change", ["offset time", "metadata without content", "stage gaps",
                                    "negative index", "no content under full capture",
                                    "zero and negative zero"])
def test_the_values_the_row_path_changes_after_decoding_are_changed_alike(change: str) -> None:
    """A time with an offset (kept in UTC), metadata on a row whose content none
    capture left out (the row path drops it again: declined here), a stage column
    with gaps on another stage's span (the carrier's stage fills them), a negative
    candidate index on a row without content (the row path's placeholder is then
    "-": declined), a row without content under full capture (a failure: declined),
    and two ScoredTooLow rows whose scores are 0.0 and -0.0 (equal, but each reason
    keeps its own sign)."""
    declined = ("metadata without content", "negative index", "no content under full capture")
    capture, carrier = ("none", "Slice") if change in declined[:2] else (
        "full", "Deduplicate" if change == "stage gaps" else "Slice")
    name, (names, values, count) = _block(_exclusions(), ContentCapture(capture), carrier)
    names, values = list(names), [list(column) for column in values]
    if change == "offset time":
        values[names.index("cupel.item.timestamp")][1] = "2026-01-02T03:04:05+02:00"
    elif change == "metadata without content":
        names.append("cupel.item.metadata")
        values.append([None] * count)
        values[-1][2] = '{"a":1}'
    elif change == "negative index":
        values[names.index("cupel.exclusion.candidate_index")][2] = -1
    elif change == "zero and negative zero":
        reasons = values[names.index("cupel.exclusion.reason")]
        rows = [k for k, reason in enumerate(reasons) if reason == "ScoredTooLow"][:2]
        for row, zero in zip(rows, (0.0, -0.0), strict=True):
            values[names.index(reason_field_attribute("score"))][row] = zero
    elif change == "no content under full capture":
        values[names.index("cupel.item.content")][2] = None
    else:
        values[names.index("cupel.exclusion.stage")][3] = None
    taken = _agrees(name, (names, values, count), carrier, capture)
    assert taken == (change not in declined)
    if change == "stage gaps":
        fast = block_events(name, (names, values, count), RUN, carrier, capture)
        assert fast is not None
        stages = [event.stage for event in fast if isinstance(event, ItemExcluded)]
        assert stages[3] == PipelineStage.DEDUPLICATE
        assert stages[4] == PipelineStage.SLICE
    if change == "offset time":
        fast = block_events(name, (names, values, count), RUN, carrier, capture)
        assert fast is not None
        assert fast[1].item.timestamp is not None
        assert fast[1].item.timestamp.tzinfo is UTC

"""One wire schema: every form of an item, a budget, an event and a reason is derived
from one declaration, and decoding is strict inside cupellation's namespaces."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    RecencyScorer,
    RunInfo,
    TraceDetailLevel,
)
from cupellation._model.wire import BUDGET_FIELDS, ITEM_FIELDS, WireKind
from cupellation._report.writer import encode_report
from cupellation.events import (
    EVENT_SCHEMA_VERSION,
    PIPELINE_KEYS,
    ItemExcluded,
    PipelineStage,
    RunStarted,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
)
from cupellation.events._flat import flat_keys
from cupellation.events._records import REASON_FIELDS, RECORD_DECODER, record_types
from cupellation.exceptions import DecodeError, InvalidTypeError
from cupellation.reasons import (
    KNOWN_EXCLUSION_REASONS,
    BudgetExceeded,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
)

FULL_ITEM = ContextItem(
    "hello", 12, kind="Document", source="Rag", priority=3, tags=("a", "b"),
    metadata={"k": [1, {"x": "y"}]}, timestamp=datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC),
    future_relevance_hint=0.25, pinned=True, original_tokens=40)
AT = datetime(2024, 1, 1, tzinfo=UTC)


def _excluded(**changes: Any) -> dict[str, Any]:
    event = ItemExcluded(run_id="r", seq=3, stage=PipelineStage.SLICE, candidate_index=2,
                         score=0.5, item=FULL_ITEM,
                         reason=BudgetExceeded(item_tokens=12, available_tokens=4))
    flat = event_to_dict(event)
    flat.update(changes)
    return flat


def test_the_item_declaration_is_every_field_and_every_json_key() -> None:
    """ITEM_FIELDS names ContextItem's fields in order and the wire format's keys; an item
    with every field set writes exactly those keys, and both the wire format's JSON and the
    flat form read back to the same item."""
    assert [f.name for f in ITEM_FIELDS] == [
        n for n in ContextItem.__slots__ if n != "_timestamp_us"]
    assert list(FULL_ITEM.to_dict()) == [f.key for f in ITEM_FIELDS]
    assert ContextItem.from_dict(FULL_ITEM.to_dict()) == FULL_ITEM
    flat = _excluded()
    assert [k for k in flat if k.startswith("item.")] == [f"item.{f.name}" for f in ITEM_FIELDS]
    decoded = event_from_dict(flat)
    assert isinstance(decoded, ItemExcluded)
    assert decoded.item == FULL_ITEM
    assert [f.key for f in BUDGET_FIELDS] == list(ContextBudget(
        100, 50, 5, {"Message": 2}, 10.0).to_dict())


def test_trusted_construction_gives_the_constructor_s_item() -> None:
    """ContextItem.trusted (the decoders' constructor) builds an item equal, field for
    field and in its rank key, to the validating constructor's; an offset time is
    converted to UTC."""
    from datetime import timedelta, timezone  # noqa: PLC0415

    values = {f.name: getattr(FULL_ITEM, f.name) for f in ITEM_FIELDS}
    trusted = ContextItem.trusted(**values)
    assert trusted == FULL_ITEM
    assert trusted._timestamp_us == FULL_ITEM._timestamp_us
    later = ContextItem.trusted(**{**values, "timestamp": datetime(
        2024, 1, 1, 5, tzinfo=timezone(timedelta(hours=5)))})
    assert later.timestamp == datetime(2024, 1, 1, tzinfo=UTC)
    assert later.timestamp is not None
    assert later.timestamp.tzinfo is UTC


def test_the_log_records_are_generated_from_the_declarations() -> None:
    """Each typed record decodes exactly its event type's flat keys (the item's from
    ITEM_FIELDS, every known reason's fields), refuses any other key, and encodes to
    the event's canonical line."""
    for cls, record_type in record_types().items():
        names = {info.encode_name for info in msgspec.structs.fields(record_type)}
        expected = (flat_keys(cls.type) or frozenset()) - {"type"}
        assert names == expected, cls
    assert set(REASON_FIELDS) == {name for cls in KNOWN_EXCLUSION_REASONS.values()
                                  for name in cls.__struct_fields__}
    line = event_to_json(event_from_dict(_excluded())).encode()
    record = RECORD_DECODER.decode(line)
    assert msgspec.json.encode(record) == line
    assert record.event() == event_from_dict(_excluded())
    with pytest.raises(msgspec.ValidationError, match=r"item\.tagz"):
        RECORD_DECODER.decode(line[:-1] + b',"item.tagz":["x"]}')


def test_a_canonical_line_starts_with_type_and_schema_3() -> None:
    """Schema 3 lines begin with type, then schema; the fields follow in declaration
    order, a known reason's fields sorted by name."""
    line = event_to_json(event_from_dict(_excluded()))
    assert line.startswith('{"type":"item_excluded","schema":3,"run_id":"r","seq":3,')
    assert line.index('"reason.available_tokens"') < line.index('"reason.item_tokens"')
    assert EVENT_SCHEMA_VERSION == 3


@pytest.mark.parametrize(("key", "value", "named"), [
    ("item.tagz", ["x"], "did you mean `item.tags`"),
    ("item.pinnedx", True, "item.pinnedx"),
    ("reason.cap", 3, "reason.cap: is not a field of BudgetExceeded"),
    ("budget.max", 3, None),
])
def test_an_unknown_key_in_a_namespace_is_refused(key: str, value: Any,
                                                   named: str | None) -> None:
    """A misspelt item key, or a field of another reason, is a DecodeError naming it
    (with the closest key when there is one); keys outside cupellation's namespaces
    (a shipper's, structlog's) are ignored."""
    if key.startswith("budget."):
        started = event_to_dict(RunStarted(
            run_id="r", seq=0, started_at=AT, budget=ContextBudget(10, 5), pipeline={},
            candidate_count=0, candidate_tokens=0, detail_level="Full"))
        with pytest.raises(DecodeError, match=r"budget\.max"):
            event_from_dict({**started, key: value})
        return
    with pytest.raises(DecodeError) as raised:
        event_from_dict(_excluded(**{key: value}))
    assert named is not None
    assert named in str(raised.value)
    decoded = event_from_dict(_excluded(level="info", host="web-1", timestamp="now"))
    assert decoded == event_from_dict(_excluded())


def test_unknown_pipeline_keys_and_known_inclusion_fields_are_refused() -> None:
    """run_started.pipeline holds only PIPELINE_KEYS (either way); a known inclusion
    reason has no fields; an unknown reason keeps its fields (the specification)."""
    assert PIPELINE_KEYS == ("scorer", "slicer", "placer", "deduplication",
                             "overflow_strategy")
    started = RunStarted(run_id="r", seq=0, started_at=AT, budget=ContextBudget(10, 5),
                         pipeline={"scorer": "x", "weights": "y"}, candidate_count=0,
                         candidate_tokens=0, detail_level="Full")
    with pytest.raises(ValueError, match=r"pipeline\.weights"):
        event_to_dict(started)
    good = event_to_dict(msgspec.structs.replace(started, pipeline={"scorer": "x"}))
    with pytest.raises(DecodeError, match=r"pipeline\.weights"):
        event_from_dict({**good, "pipeline.weights": "y"})
    with pytest.raises(DecodeError, match=r"reason\.item_tokens"):
        inclusion_reason_from_dict({"reason": "Scored", "item_tokens": 3})
    assert exclusion_reason_from_dict({"reason": "BUDGETEXCEEDED", "x": 1}) == (
        UnknownExclusionReason(reason_name="BUDGETEXCEEDED", fields={"x": 1}))
    with pytest.raises(DecodeError, match="not a field of BudgetExceeded"):
        exclusion_reason_from_dict({"reason": "BudgetExceeded", "item_tokens": 1,
                                    "available_tokens": 2, "cap": 3})


def test_a_schema_2_line_reads_as_before() -> None:
    """A line 0.2.0 wrote (schema 2, schema first, reason fields in declaration
    order) still decodes."""
    line = ('{"schema":2,"type":"item_excluded","run_id":"r","seq":3,"stage":"Slice",'
            '"candidate_index":2,"score":0.5,"item.content":"a","item.tokens":5,'
            '"item.kind":"Message","item.source":"Chat","reason.name":"BudgetExceeded",'
            '"reason.item_tokens":5,"reason.available_tokens":1}')
    event = event_from_json(line)
    assert isinstance(event, ItemExcluded)
    assert event.reason == BudgetExceeded(item_tokens=5, available_tokens=1)


def test_run_info_travels_from_run_to_run_started_and_back() -> None:
    """Pipeline.run(run_info=...) copies the application's run information into
    run_started (flat keys session_id ... token_estimates, omitted when unset), which
    decodes back; RunInfo refuses a value of the wrong type."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY)
    info = RunInfo(session_id="s-1", user_id="u-2", token_counter="estimate:chars/4",
                   token_estimates=True)
    Pipeline(RecencyScorer()).run([ContextItem("a", 1)], ContextBudget(10, 5), collector,
                                  run_info=info)
    started = collector.events[0]
    assert isinstance(started, RunStarted)
    assert started.run_info == info
    flat = event_to_dict(started)
    assert (flat["session_id"], flat["user_id"], flat["token_estimates"]) == (
        "s-1", "u-2", True)
    assert "conversation_id" not in flat
    assert event_from_dict(flat) == started
    with pytest.raises(InvalidTypeError, match="user_id"):
        RunInfo(user_id=7)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="run_info"):
        Pipeline(RecencyScorer()).run([], ContextBudget(10, 5), run_info="s")  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(info)) == info


def test_the_report_writer_struct_is_the_item_declaration() -> None:
    """The report's JSON writer encodes an item exactly as ContextItem.to_dict gives it,
    defaults left out (the writer's struct is generated from ITEM_FIELDS)."""
    report = Pipeline(RecencyScorer()).dry_run(
        [FULL_ITEM, ContextItem("b", 1, future_relevance_hint=float("nan"))],
        ContextBudget(100, 50))
    assert msgspec.json.decode(encode_report(report)) == report.to_dict()
    kinds = {f.kind for f in ITEM_FIELDS}
    assert WireKind.HINT in kinds
    assert WireKind.METADATA in kinds


def test_the_generated_flat_writer_is_the_declaration() -> None:
    """The flat form's writer (generated from the declaration, one step per field)
    writes exactly the fields WireField.is_default keeps, converted as the declaration
    says, for items and budgets with and without their optional fields."""
    from cupellation._model.wire import flat_writer, to_flat  # noqa: PLC0415

    items = [FULL_ITEM, ContextItem("x", 0), ContextItem("y", -3, source="chat", tags=[],
                                                         metadata={}, pinned=False,
                                                         priority=0, original_tokens=0)]
    budgets = [ContextBudget(10, 5), ContextBudget(100, 50, 5, {"Message": 2}, 12.5)]
    for fields, values in ((ITEM_FIELDS, items), (BUDGET_FIELDS, budgets)):
        for value in values:
            out: dict[str, Any] = {}
            to_flat(fields, value, "p.", out)
            kept = [f.name for f in fields if f.flat_always or not f.is_default(
                getattr(value, f.name))]
            assert [key[2:] for key in out] == kept
            again: dict[str, Any] = {}
            length = flat_writer(fields, "p.")(value, again)
            assert again == out
            assert length == sum(len(v) if isinstance(v, str) else sum(map(len, v))
                                 for v in out.values() if isinstance(v, str | list))

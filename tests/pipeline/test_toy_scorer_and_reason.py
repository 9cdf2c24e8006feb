"""A scorer and an exclusion reason defined here, in the test, and registered: each is
then a first-class citizen everywhere without an edit elsewhere (issue 27). The scorer
through the API, a policy file and the CLI's ``--scorer`` flag and help; the reason
through ``why``, the budget answer, the HTML page, the span summaries, and the round
trips through log lines and spans. A reason this version does not know is explained
as unknown, never as another reason."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import msgspec
import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    PriorityScorer,
    TraceCollector,
    TraceDetailLevel,
    build_report,
)
from cupellation._registry import build_scorer, describe_scorer, standalone_types
from cupellation.analytics import answer_min_budget, replayable
from cupellation.cli import main
from cupellation.events import ItemEventBatch, ItemExcluded, PipelineEvent, event_to_json
from cupellation.exceptions import ConfigurationError
from cupellation.html import render_html
from cupellation.logs import AuditLog, read_runs
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.otel._values import reason_counts
from cupellation.policy import Policy
from cupellation.reasons import (
    BaseExclusionReason,
    BudgetExceeded,
    ExclusionReason,
    InclusionReason,
    NegativeTokens,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    reason_word,
    register_exclusion_reason,
    unregister_exclusion_reason,
)
from cupellation.scoring._base import SCORERS, BuiltinScorer
from otel._support import make_sdk

BUDGET = ContextBudget(max_tokens=40, target_tokens=40)
RULE = "no-secrets"


class ToyLengthScorer(BuiltinScorer):
    """Longer content scores higher: its length over the longest candidate's."""

    __slots__ = ()
    type_name = "toy_length"
    settings = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Each item's content length over the longest."""
        longest = max((len(item.content) for item in items), default=0) or 1
        return [len(item.content) / longest for item in items]


class Blocked(BaseExclusionReason, frozen=True, kw_only=True):
    """A toy reason: an application's rule refused the item."""

    rule: str

    word: ClassVar[str] = "blocked by rule"
    style: ClassVar[str] = "#123456"
    budget_helps: ClassVar[bool] = False

    def sentence(self) -> str:
        """The rule that refused it."""
        return f"the rule {self.rule} refused it"

    def counterfactual(self) -> str:
        """Only lifting the rule."""
        return f"only lifting the rule {self.rule} would let it in"


@pytest.fixture
def toys() -> Iterator[None]:
    """The toy scorer and the toy reason registered for one test, then forgotten."""
    SCORERS.register(ToyLengthScorer)
    register_exclusion_reason(Blocked)
    try:
        yield
    finally:
        SCORERS.unregister(ToyLengthScorer)
        unregister_exclusion_reason(Blocked)


class _Blocking:
    """A collector in front of the real sinks that re-labels the exclusion of every
    item whose content starts with ``secret`` as ``Blocked`` (an application's own
    stage would emit it; the pipeline here only emits the built-in reasons)."""

    def __init__(self, inner: FanOutCollector) -> None:
        self.inner = inner

    @property
    def is_enabled(self) -> bool:
        """As the sinks behind it."""
        return self.inner.is_enabled

    @property
    def detail_level(self) -> TraceDetailLevel:
        """As the sinks behind it."""
        return self.inner.detail_level

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """The events, the secret items' exclusion reasons replaced."""
        if isinstance(events, ItemEventBatch) and events.stage is not None:
            reasons: list[ExclusionReason] = [
                Blocked(rule=RULE) if item.content.startswith("secret") else reason
                for item, reason in zip(events.items, events.reasons, strict=True)
                if not isinstance(reason, InclusionReason)]
            events = ItemEventBatch(run_id=events.run_id, first_seq=events.first_seq,
                                    stage=events.stage,
                                    candidate_indices=events.candidate_indices,
                                    items=events.items, scores=events.scores,
                                    reasons=reasons)
        self.inner.record(events)

    def flush(self) -> None:
        """Flush the sinks."""
        self.inner.flush()

    def close(self) -> None:
        """Close the sinks."""
        self.inner.close()


def _items() -> list[ContextItem]:
    return [ContextItem("a long document about cupellation", 20, priority=3),
            ContextItem("secret: the launch codes, long", 30, priority=2),
            ContextItem("short note", 10, priority=1),
            ContextItem("another long text that will not fit", 25, priority=0)]


def _run(tmp_path: Path) -> tuple[Any, Path, Any]:
    """One run of the toy scorer, recorded in process, as log lines and as spans."""
    diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    sdk = make_sdk()
    spans = SpanCollector(tracer_provider=sdk.tracer_provider,
                          meter_provider=sdk.meter_provider, tier="Full",
                          content_capture="full")
    path = tmp_path / "run.jsonl"
    with AuditLog(path) as audit:
        collector: TraceCollector = _Blocking(FanOutCollector(diagnostics, audit, spans))
        Pipeline(build_scorer({"type": "toy_length"})).run(_items(), BUDGET, collector)
    return diagnostics.build_report(), path, sdk.exporter.get_finished_spans()


def test_the_toy_scorer_is_a_built_in_for_the_api_and_policy_files(toys: None) -> None:
    """Registered, the scorer builds from its table, describes itself, reads from a
    policy file, and its run_started records it (not as a custom strategy)."""
    scorer = build_scorer({"type": "ToyLength"})
    assert isinstance(scorer, ToyLengthScorer)
    assert describe_scorer(scorer) == {"type": "toy_length"}
    policy = Policy.from_toml('[scorer]\ntype = "toy_length"\n')
    assert policy.scorer == scorer
    assert "toy_length" in standalone_types("scorer")
    recorded = policy.build_pipeline().describe()["scorer"]
    assert isinstance(recorded, str)
    assert json.loads(recorded) == {"type": "toy_length"}


def test_the_toy_scorer_is_a_cli_flag_and_in_its_help(
        toys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`select --scorer toy_length` runs it (the registry gives the flag's choices)
    and `select --help` lists it; unregistered, the flag refuses it."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"content": item.content, "tokens": item.tokens}
                                 for item in _items()]), encoding="utf-8")
    assert main(["select", str(items), "--max-tokens", "40", "--scorer", "toy_length",
                 "--format", "json"]) == 0
    expected = Pipeline(ToyLengthScorer()).run(_items(), BUDGET)
    assert [item["content"] for item in json.loads(capsys.readouterr().out)] == [
        item.content for item in expected]
    assert main(["select", "--help"]) == 0
    assert "toy_length" in capsys.readouterr().out
    SCORERS.unregister(ToyLengthScorer)
    assert main(["select", str(items), "--max-tokens", "40", "--scorer", "toy_length"]) == 2
    assert "not a scorer a flag can name" in capsys.readouterr().err


def test_the_toy_reason_round_trips_through_log_lines_and_spans(
        toys: None, tmp_path: Path) -> None:
    """The run's report has the Blocked reason; the report rebuilt from its log lines
    and the one rebuilt from its spans equal it, Blocked decoded as itself."""
    report, path, spans = _run(tmp_path)
    blocked = [e for e in report.excluded if isinstance(e.reason, Blocked)]
    assert [e.item.content for e in blocked] == ["secret: the launch codes, long"]
    (logged,) = read_runs(path)
    assert logged.report == report
    assert logged.report.incomplete == ()
    (rebuilt,) = runs_from_spans(spans)
    assert rebuilt.report == report
    assert rebuilt.report.incomplete == ()
    assert isinstance(rebuilt.report.excluded[0].reason, Blocked | BudgetExceeded)
    assert {type(e.reason) for e in rebuilt.report.excluded} == {Blocked, BudgetExceeded}


def test_why_and_the_summaries_say_the_toy_reason_s_own_words(
        toys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cupellation why` explains the blocked item in the reason's sentence and names no
    rival; a span summary counts it in its own word."""
    _, path, _ = _run(tmp_path)
    assert main(["why", str(path), "--content", "secret: the launch codes, long",
                 "--format", "json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["matches"]
    assert answer["reason"] == {"reason": "Blocked", "rule": RULE}
    assert answer["explanation"] == f"the rule {RULE} refused it"
    assert answer["beaten_by"] == {"kind": "none", "count": 0, "tokens": 0, "items": []}
    assert main(["why", str(path), "--content", "secret: the launch codes, long"]) == 0
    out = capsys.readouterr().out
    assert f"the rule {RULE} refused it" in out
    for rival_words in ("higher", "duplicate", "copy", "pinned"):
        assert rival_words not in out
    batch = ItemEventBatch(run_id="r", first_seq=1, stage="Slice", candidate_indices=(0,),
                           items=(ContextItem("x", 1),), scores=(0.5,),
                           reasons=(Blocked(rule=RULE),))
    assert reason_counts([batch]) == {"Blocked": 1}
    assert reason_word("Blocked") == "blocked by rule"


def test_the_budget_answer_uses_the_reason_s_counterfactual(toys: None,
                                                           tmp_path: Path) -> None:
    """For an item that never reaches the slicer in the re-run (a duplicate), the
    budget answer gives the logged reason's own counterfactual; an unknown reason
    gets a plain statement, never the words of deduplication or negative tokens."""
    items = [ContextItem("same", 5, priority=2), ContextItem("same", 5, priority=1)]
    path = tmp_path / "dup.jsonl"
    with AuditLog(path) as audit:
        Pipeline(PriorityScorer()).run(items, BUDGET, audit)
    (logged,) = read_runs(path, keep_candidates=True)
    run = replayable(logged)
    answer = answer_min_budget(run, 1, 1000, reason=Blocked(rule=RULE))
    assert answer.explanation == f"no budget would include it: only lifting the rule {RULE} " \
                                 "would let it in"
    unknown = UnknownExclusionReason(reason_name="FromTheFuture",
                                     fields=MappingProxyType({"x": 1}))
    plain = answer_min_budget(run, 1, 1000, reason=unknown)
    assert plain.explanation is not None
    for other_words in ("dedup", "negative", "copy"):
        assert other_words not in plain.explanation


def test_the_html_page_styles_the_toy_reason_and_not_an_unknown_one(toys: None,
                                                                   tmp_path: Path) -> None:
    """The page gives the registered reason its declared colour and its sentence as
    the badge's tooltip; an unregistered name (even one spelt like a known reason
    with a space) wears the plain badge and says it is unknown."""
    report, _, _ = _run(tmp_path)
    page = render_html(report)
    assert ".reason-Blocked { background:#123456; }" in page
    assert f'class="badge reason-Blocked" title="the rule {RULE} refused it"' in page
    data = report.to_dict()
    data["excluded"][0]["reason"] = {"reason": "Budget Exceeded", "item_tokens": 1}
    other = render_html(data)
    assert 'class="badge reason-unknown"' in other
    assert "does not know (Budget Exceeded)" in other


def test_an_unknown_reason_is_never_explained_as_another(
        toys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unregistered, the toy reason read from a log is an UnknownExclusionReason:
    `why` says this version does not know it and names no duplicate, pinned item or
    higher-scored rival; its summary word is its own name."""
    _, path, _ = _run(tmp_path)
    unregister_exclusion_reason(Blocked)
    assert isinstance(exclusion_reason_from_dict({"reason": "Blocked", "rule": "r"}),
                      UnknownExclusionReason)
    assert main(["why", str(path), "--content", "secret: the launch codes, long",
                 "--format", "json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["matches"]
    assert answer["explanation"] == ("excluded for a reason this version of cupellation "
                                     "does not know (Blocked)")
    assert answer["beaten_by"]["kind"] == "none"
    assert answer["beaten_by"]["items"] == []
    unknown = UnknownExclusionReason(reason_name="Blocked")
    assert unknown.word == "Blocked"
    assert unknown.rivals().reference is None


def test_a_registered_reason_must_declare_wire_types_that_agree() -> None:
    """Registering refuses a class that is not a reason, a field of another type than
    a known reason's field of that name, and a second class under a known name."""
    class Clash(BaseExclusionReason, frozen=True, kw_only=True):
        """item_tokens as text, where BudgetExceeded has an int."""

        item_tokens: str

    class BudgetExceeded(BaseExclusionReason, frozen=True, kw_only=True):
        """A second class under a known name."""

    for bad in (int, Clash, BudgetExceeded):
        with pytest.raises(ConfigurationError):
            register_exclusion_reason(bad)  # type: ignore[type-var]


class Held(BaseExclusionReason, frozen=True, kw_only=True):
    """A toy reason that counts its item's tokens in ``held``."""

    held: int
    tokens_field: ClassVar[str | None] = "held"


@pytest.mark.parametrize("wrong", [
    NegativeTokens(tokens=-5), Held(held=-5)], ids=["NegativeTokens", "Held"])
def test_the_token_cross_check_asks_the_reason_which_field_counts_tokens(
        wrong: ExclusionReason, tmp_path: Path) -> None:
    """A reason whose declared tokens field disagrees with its item's tokens (a built-in
    one, or one registered here) is named in `incomplete`, folded in process and read
    back from log lines; the agreeing value is not."""
    register_exclusion_reason(Held)
    try:
        collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        Pipeline(PriorityScorer()).run([ContextItem("minus", -4), ContextItem("ok", 3)],
                                       BUDGET, collector)
        events = list(collector.events)
        k = next(k for k, e in enumerate(events) if isinstance(e, ItemExcluded))
        right = msgspec.structs.replace(wrong, **{type(wrong).tokens_field or "": -4})
        for reason, flagged in ((right, False), (wrong, True)):
            changed = [*events[:k], msgspec.structs.replace(events[k], reason=reason),
                       *events[k + 1:]]
            path = tmp_path / f"{type(reason).__name__}-{flagged}.jsonl"
            path.write_text("".join(event_to_json(e) + "\n" for e in changed),
                            encoding="utf-8")
            (logged,) = read_runs(path)
            for report in (build_report(changed), logged.report):
                notes = [n for n in report.incomplete if "count other tokens" in n]
                assert bool(notes) is flagged, (reason, report.incomplete)
    finally:
        unregister_exclusion_reason(Held)


class Shadowed(BaseExclusionReason, frozen=True, kw_only=True):
    """A toy reason that points at the candidate which shadowed the item."""

    shadowed_by: int | str


def test_a_registered_reason_s_reference_becomes_content(tmp_path: Path) -> None:
    """A field a registered reason declares ``int | str`` is a candidate index in
    events and that candidate's content in the report, folded in process and read
    back from log lines, as Deduplicated's is."""
    register_exclusion_reason(Shadowed)
    try:
        collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        Pipeline(PriorityScorer()).run([ContextItem("kept", 3, priority=1),
                                        ContextItem("minus", -4)], BUDGET, collector)
        events = list(collector.events)
        k = next(k for k, e in enumerate(events) if isinstance(e, ItemExcluded))
        changed = [*events[:k],
                   msgspec.structs.replace(events[k], reason=Shadowed(shadowed_by=0)),
                   *events[k + 1:]]
        path = tmp_path / "shadowed.jsonl"
        path.write_text("".join(event_to_json(e) + "\n" for e in changed), encoding="utf-8")
        (logged,) = read_runs(path)
        for report in (build_report(changed), logged.report):
            (entry,) = report.excluded
            assert entry.reason == Shadowed(shadowed_by="kept")
    finally:
        unregister_exclusion_reason(Shadowed)

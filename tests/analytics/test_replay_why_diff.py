"""Logged runs run again: `why`'s next-question lines (budget, --against, why a run
cannot be re-run), `replay LOG... --policy B` and `diff A B`, through the library and
the command (in process)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DecayScorer,
    FunctionScorer,
    GreedySlice,
    MetadataTrustScorer,
    Pipeline,
    PriorityScorer,
    QuotaSlice,
    ReflexiveScorer,
    TraceDetailLevel,
)
from cupellation.analytics import (
    ReplaySummary,
    answer_against,
    answer_min_budget,
    replayable,
    scaled_budget,
)
from cupellation.cli import main
from cupellation.exceptions import RunNotReplayableError
from cupellation.logs import AuditLog, LoggedRun, read_runs
from cupellation.policy import Policy, get_preset
from cupellation.scoring import ExponentialCurve, FixedClock, utc_now
from cupellation.slicing import QuotaEntry

BUDGET = ContextBudget(60, 50)


def _items() -> list[ContextItem]:
    return [ContextItem(f"doc {k}", 10 * (k % 3 + 1), priority=k,
                        kind="Document" if k % 2 else "Message",
                        metadata={"cupel:trust": "0.5"}) for k in range(8)]


def _log(path: Path, pipeline: Pipeline, items: Sequence[ContextItem], **options: object
         ) -> Path:
    with AuditLog(path, **options) as audit:  # type: ignore[arg-type]
        pipeline.run(items, BUDGET, audit)
    return path


def _runs(path: Path) -> list[LoggedRun]:
    return list(read_runs(path, keep_candidates=True))


def test_a_logged_run_is_rebuilt_in_candidate_order_with_its_outcomes(tmp_path: Path) -> None:
    """replayable() gives back the candidates (equal, in order), the budget and, per
    candidate, the logged outcome; re-running the logged pipeline repeats the run."""
    items = _items()
    pipeline = Pipeline(PriorityScorer())
    (logged,) = _runs(_log(tmp_path / "a.jsonl", pipeline, items))
    run = replayable(logged)
    assert list(run.candidates) == items
    assert run.budget == BUDGET
    window = pipeline.run(items, BUDGET)
    assert run.logged_included == {items.index(item) for item in window}
    again = run.logged_pipeline().run(run.candidates, run.budget)
    assert [item.content for item in again] == [item.content for item in window]


@pytest.mark.parametrize(("options", "pipeline", "cause"), [
    ({"detail_level": TraceDetailLevel.STAGE_AND_EXCLUSIONS}, Pipeline(PriorityScorer()),
     "not_full_detail"),
    ({"content_capture": "none"}, Pipeline(PriorityScorer()), "content_dropped"),
    ({}, Pipeline(FunctionScorer(lambda item, _all: 1.0, name="one")), "custom_strategy"),
    ({"content_capture": "hash"}, Pipeline(MetadataTrustScorer()), "metadata_dropped"),
])
def test_a_run_that_cannot_be_rerun_says_why(tmp_path: Path, options: dict[str, object],
                                             pipeline: Pipeline, cause: str) -> None:
    """Below Full detail, content dropped, a custom scorer, or a metadata scorer over
    hashed content (metadata dropped): RunNotReplayableError names the cause."""
    (logged,) = _runs(_log(tmp_path / "a.jsonl", pipeline, _items(), **options))
    with pytest.raises(RunNotReplayableError) as caught:
        replayable(logged).logged_pipeline()
    assert caught.value.cause == cause
    assert caught.value.run_id == logged.run_id


def test_hashed_content_reruns(tmp_path: Path) -> None:
    """Hash capture re-runs (deduplication compares contents only for equality): the
    same selection, by candidate index, as the original run."""
    items = [*_items(), ContextItem("doc 1", 20, priority=0)]  # a duplicate of doc 1
    pipeline = Pipeline(PriorityScorer())
    (logged,) = _runs(_log(tmp_path / "h.jsonl", pipeline, items, content_capture="hash"))
    run = replayable(logged)
    assert run.candidates[0].content.startswith("sha256:")
    report = run.logged_pipeline().dry_run(run.candidates, run.budget)
    again = {run.candidates.index(entry.item) for entry in report.included}
    assert again == run.logged_included


def test_the_budget_answer_is_find_min_budget_for_on_the_logged_run(tmp_path: Path) -> None:
    """The minimum budget for an excluded item: a dry run there includes it, the one
    just below does not (equal token counts: inclusion is monotonic), +k is over the
    run's max_tokens."""
    items = [ContextItem(f"m{k}", 10, priority=k) for k in range(10)]
    pipeline = Pipeline(PriorityScorer())
    (logged,) = _runs(_log(tmp_path / "a.jsonl", pipeline, items))
    run = replayable(logged)
    answer = answer_min_budget(run, 0)
    assert answer.budget is not None
    assert answer.increase == answer.budget - BUDGET.max_tokens
    for size, expected in ((answer.budget, True), (answer.budget - 1, False)):
        window = pipeline.run(items, scaled_budget(BUDGET, size))
        assert any(item is items[0] for item in window) is expected


def test_a_quota_slice_run_explains_the_guard(tmp_path: Path) -> None:
    """With QuotaSlice no budget answer exists, and the answer quotes the guard."""
    pipeline = Pipeline(PriorityScorer(), QuotaSlice(GreedySlice(), [QuotaEntry("Message")]))
    (logged,) = _runs(_log(tmp_path / "q.jsonl", pipeline, _items()))
    run = replayable(logged)
    excluded = next(k for k, reason in enumerate(run.logged_reasons) if reason != "Included")
    answer = answer_min_budget(run, excluded)
    assert answer.budget is None
    assert answer.explanation is not None
    assert "QuotaSlice" in answer.explanation
    assert "FindMinBudgetFor requires monotonic item inclusion." in answer.explanation


def test_against_uses_the_runs_budget_and_start_as_the_decay_clock(tmp_path: Path) -> None:
    """Another policy runs at the logged budget, with the run's started_at as the clock
    of a decay scorer that reads the clock: its answer equals a run with that fixed
    clock, whatever the wall clock says now."""
    start = datetime.now(UTC)
    items = [ContextItem(f"t{k}", 20, timestamp=start - timedelta(hours=k)) for k in range(6)]
    (logged,) = _runs(_log(tmp_path / "a.jsonl", Pipeline(ReflexiveScorer()), items))
    run = replayable(logged)
    decay = Policy(scorer=DecayScorer(ExponentialCurve(timedelta(hours=1)), clock=utc_now))
    pipeline = run.pipeline_for(decay)
    fixed = DecayScorer(ExponentialCurve(timedelta(hours=1)), clock=FixedClock(run.started_at))
    assert pipeline.scorer.score_all(run.candidates) == fixed.score_all(run.candidates)
    answers = [answer_against(run, k, "decay", decay) for k in range(6)]
    expected = Pipeline(fixed).run(run.candidates, BUDGET)
    assert [a.included for a in answers] == [any(x is c for x in expected)
                                             for c in run.candidates]


def test_replaying_under_the_logged_policy_changes_nothing(tmp_path: Path) -> None:
    """The summary over runs replayed under their own policy: every run unchanged, no
    item gained or lost, no utilization shift."""
    pipeline = Pipeline(PriorityScorer())
    path = tmp_path / "a.jsonl"
    with AuditLog(path) as audit:
        for count in (8, 5, 3):
            pipeline.run(_items()[:count], BUDGET, audit)
    summary = ReplaySummary(Policy(scorer=PriorityScorer()), "same")
    for logged in _runs(path):
        summary.add(logged)
    data = summary.to_dict()
    assert data["runs"]["replayed"] == 3
    assert data["runs"]["unchanged"] == 3
    assert data["items"]["gained"] == data["items"]["lost"] == 0
    assert data["budget_utilization"]["shift"] == 0.0


def test_replay_counts_what_another_policy_gains_and_loses(tmp_path: Path) -> None:
    """Gained and lost items, by kind and reason, equal an independent comparison of the
    original and the new windows; --match lists the flips of matching items."""
    import re  # noqa: PLC0415

    items = _items()
    path = _log(tmp_path / "a.jsonl", Pipeline(PriorityScorer()), items)
    rag = get_preset("rag")
    summary = ReplaySummary(rag, "rag", re.compile("doc [0-3]"))
    (logged,) = _runs(path)
    summary.add(logged)
    before = {item.content for item in Pipeline(PriorityScorer()).run(items, BUDGET)}
    after = {item.content for item in rag.build_pipeline(BUDGET).run(items, BUDGET)}
    data = summary.to_dict()
    assert data["items"]["gained"] == len(after - before)
    assert data["items"]["lost"] == len(before - after)
    flips = {(f["content"], f["change"]) for f in data["match"]["listed"]}
    assert flips == ({(c, "gained") for c in after - before if re.search("doc [0-3]", c)}
                     | {(c, "lost") for c in before - after if re.search("doc [0-3]", c)})


# -- the commands -------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_why_prints_the_budget_and_against_lines(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """For an excluded item: "would have been included at a budget of N tokens (+k)"
    and one "under preset X: included|excluded (reason)" line per --against."""
    items = [ContextItem(f"m{k}", 10, priority=k) for k in range(10)]
    path = _log(tmp_path / "a.jsonl", Pipeline(PriorityScorer()), items)
    run = replayable(_runs(path)[0])
    answer = answer_min_budget(run, 0)
    policy = tmp_path / "reflexive.toml"
    policy.write_text('scorer = { type = "reflexive" }\n', encoding="utf-8")
    code, out, _ = _cli(capsys, "why", path, "--content", "m0", "--against", "chat",
                        "--against", policy)
    assert code == 0
    assert (f"would have been included at a budget of {answer.budget} tokens "
            f"(+{answer.budget - 60})") in out  # type: ignore[operator]
    chat = answer_against(run, 0, "chat", get_preset("chat"))
    assert f"under preset Chat: {'included' if chat.included else 'excluded ('}" in out
    reflexive = answer_against(run, 0, "file", Policy(scorer=ReflexiveScorer()))
    assert (f"under policy file {policy}: "
            f"{'included' if reflexive.included else 'excluded ('}") in out
    code, out, _ = _cli(capsys, "why", path, "--content", "m0", "--format", "json")
    data = json.loads(out)["matches"][0]["next"]
    assert data["min_budget"]["budget"] == answer.budget


def test_why_says_when_a_run_cannot_be_rerun(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A run logged with a custom scorer gets a line naming the cause instead."""
    path = _log(tmp_path / "c.jsonl", Pipeline(FunctionScorer(lambda i, _a: 0.0, name="z")),
                _items())
    code, out, _ = _cli(capsys, "why", path, "--match", "doc")
    assert code == 0
    assert "cannot re-run this run (custom_strategy): it used a custom strategy" in out


@pytest.mark.parametrize("argv", [
    ["--against", "nope"], ["--budget-ceiling", "-1"], ["--budget-ceiling", "x"]])
def test_why_refuses_bad_next_question_options_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """A policy that is neither a file nor a preset, or a bad ceiling: exit 2, one line."""
    path = _log(tmp_path / "a.jsonl", Pipeline(PriorityScorer()), _items())
    code, _, err = _cli(capsys, "why", path, "--match", "doc", *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1


def test_replay_command_summarises_and_exits_3_when_runs_were_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text summary names changed runs, gains and losses, both utilizations; JSON
    has the same data; a run that cannot be replayed makes the exit status 3."""
    path = _log(tmp_path / "a.jsonl", Pipeline(PriorityScorer()), _items())
    code, out, _ = _cli(capsys, "replay", path, "--policy", "rag", "--match", "doc")
    assert code == 0
    assert "Replayed under preset Rag: 1 of 1 runs" in out
    assert "Budget utilization (over max_tokens)" in out
    assert "Target utilization (over target_tokens)" in out
    code, out, _ = _cli(capsys, "replay", path, "--policy", "rag", "--format", "json")
    assert json.loads(out)["runs"]["replayed"] == 1
    _log(tmp_path / "n.jsonl", Pipeline(PriorityScorer()), _items(), content_capture="none")
    code, out, err = _cli(capsys, "replay", path, tmp_path / "n.jsonl", "--policy", "chat")
    assert code == 3
    assert "not replayable, content_dropped: 1" in out
    assert "1 of 2 run(s) could not be replayed" in err
    code, _, err = _cli(capsys, "replay", path, "--policy", "nope")
    assert code == 2
    assert len(err.strip().splitlines()) == 1


def test_diff_compares_two_reports_and_two_runs(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """diff of report files and of run ids in a log: exit 0 when equal, 1 when they
    differ (listing gained and lost), 1 for a run id not in the logs, 2 for a file that
    is not a report."""
    items = _items()
    pipeline = Pipeline(PriorityScorer())
    small = pipeline.dry_run(items, ContextBudget(30, 30))
    large = pipeline.dry_run(items, ContextBudget(60, 60))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(small.to_json(), encoding="utf-8")
    b.write_text(large.to_json(), encoding="utf-8")
    assert _cli(capsys, "diff", a, a)[0] == 0
    code, out, _ = _cli(capsys, "diff", a, b)
    assert code == 1
    assert "Gained (included by B, excluded by A): " in out
    path = tmp_path / "log.jsonl"
    with AuditLog(path) as audit:
        pipeline.run(items, ContextBudget(30, 30), audit)
        pipeline.run(items, ContextBudget(60, 60), audit)
    first, second = (run.run_id for run in read_runs(path))
    code, out, _ = _cli(capsys, "diff", first, second, "--log", path, "--format", "json")
    assert code == 1
    assert json.loads(out)["gained"] == json.loads(json.dumps(
        [dict(row) for row in _diff_rows(small, large)]))
    assert _cli(capsys, "diff", first, "nope", "--log", path)[0] == 1
    code, _, err = _cli(capsys, "diff", a, path)
    assert code == 2
    assert len(err.strip().splitlines()) == 1


def _diff_rows(a: object, b: object) -> tuple[dict[str, object], ...]:
    from cupellation.analytics import diff_reports  # noqa: PLC0415

    return diff_reports(a, b).gained  # type: ignore[arg-type]


def test_why_with_a_ceiling_below_the_item_says_so(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--budget-ceiling below the item's own tokens: no answer, and the line says why
    (the chapter's precondition, met without an error)."""
    items = [ContextItem(f"m{k}", 10, priority=k) for k in range(10)]
    path = _log(tmp_path / "a.jsonl", Pipeline(PriorityScorer()), items)
    code, out, _ = _cli(capsys, "why", path, "--content", "m0", "--budget-ceiling", "5")
    assert code == 0
    assert "not included at any budget up to 5 tokens (the item alone has 10)" in out


def test_keep_candidates_gives_every_decided_candidate_once(tmp_path: Path) -> None:
    """read_runs(keep_candidates=True): one (index, item, outcome) per candidate, items
    equal to the originals, outcomes those of the report; without it, none."""
    items = [*_items(), ContextItem("doc 1", 20, priority=0), ContextItem("neg", -1)]
    pipeline = Pipeline(PriorityScorer())
    path = _log(tmp_path / "a.jsonl", pipeline, items)
    (logged,) = _runs(path)
    assert sorted(index for index, _, _ in logged.candidates) == list(range(len(items)))
    assert all(items[index] == item for index, item, _ in logged.candidates)
    report = pipeline.dry_run(items, BUDGET)
    outcomes = {index: outcome for index, _, outcome in logged.candidates}
    assert outcomes[len(items) - 1] == "NegativeTokens"
    assert outcomes[len(items) - 2] == "Deduplicated"
    assert sum(outcome == "Included" for outcome in outcomes.values()) == len(report.included)
    (plain,) = list(read_runs(path))
    assert plain.candidates == ()

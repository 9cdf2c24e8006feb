"""The auditor's next questions about a logged run: what budget would have kept an
item, would another policy have kept it, and what a policy change does to many
logged runs (a streaming summary whose memory does not grow with the runs)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .._model import ContextBudget
from .._pipeline import PreparedCandidates
from .._report import SelectionReport
from ..exceptions import NonMonotonicSlicerError, PipelineError, RunNotReplayableError
from ..logs import LoggedRun
from ..policy import Policy
from ..reasons import ExclusionReason, reason_to_dict
from ._budget import scaled_budget, search_min_budget
from ._metrics import add_exact
from ._rerun import ReplayableRun, replayable

__all__ = ["AgainstAnswer", "BudgetAnswer", "ReplaySummary", "against_report",
           "answer_against", "answer_min_budget", "fitting_ceiling"]

#: How many run ids (and flips) a summary lists; all are counted.
LISTED = 50
_MAX_DOUBLINGS = 64


def fitting_ceiling(budget: ContextBudget, tokens: int) -> int:
    """The smallest ``budget.max_tokens * 2**k`` (k >= 0) whose
    :func:`~cupellation.analytics.scaled_budget` gives the slicer an effective
    target of at least ``tokens`` with nothing pinned: a search ceiling at which
    every candidate could fit. ``budget.max_tokens`` itself when the target is 0
    (no size helps) or the doubling would pass 2**63."""
    size = max(budget.max_tokens, 1)
    for _ in range(_MAX_DOUBLINGS):
        if scaled_budget(budget, size).effective(0).target_tokens >= tokens:
            return size
        if size > (1 << 62):
            break
        size *= 2
    return budget.max_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetAnswer:
    """The smallest budget (``max_tokens``, target scaled with it) at which a dry run
    of the logged pipeline includes the item: ``budget`` and ``increase`` over the
    run's ``max_tokens``, or None with ``explanation`` saying why there is none."""

    budget: int | None
    increase: int | None
    ceiling: int
    dry_runs: int
    explanation: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-native values."""
        return {"budget": self.budget, "increase": self.increase, "ceiling": self.ceiling,
                "dry_runs": self.dry_runs, "explanation": self.explanation}


def answer_min_budget(run: ReplayableRun, index: int, ceiling: int | None = None, *,
                      prepared: PreparedCandidates | None = None,
                      reason: ExclusionReason | None = None) -> BudgetAnswer:
    """The smallest budget above the run's ``max_tokens`` at which candidate ``index``
    of ``run`` would have been included (``ceiling`` defaults to
    :func:`fitting_ceiling` of all the candidates' tokens).
    ``prepared`` (``run.logged_pipeline().prepare(run.candidates)``) is reused when
    several items of one run are asked about. ``reason``, the item's logged exclusion
    reason, says in its own words why no budget helps when the item never reaches
    the slicer (without it, or when the reason expects a budget to help, the answer
    says only that).

    Raises :class:`~cupellation.exceptions.RunNotReplayableError` when the logged
    pipeline cannot be rebuilt."""
    pipeline = run.logged_pipeline() if prepared is None else prepared.pipeline
    budget = run.budget
    item = run.candidates[index]
    if ceiling is None:
        total = sum(max(candidate.tokens, 0) for candidate in run.candidates)
        ceiling = max(fitting_ceiling(budget, total), item.tokens)
    if ceiling < item.tokens:
        return BudgetAnswer(budget=None, increase=None, ceiling=ceiling, dry_runs=0,
                            explanation=f"not included at any budget up to {ceiling} tokens "
                                        f"(the item alone has {item.tokens})")
    if ceiling <= budget.max_tokens:
        return BudgetAnswer(budget=None, increase=None, ceiling=ceiling, dry_runs=0,
                            explanation=f"no budget above the run's {budget.max_tokens} tokens "
                                        f"was tried (the ceiling is {ceiling})")
    try:
        search = search_min_budget(pipeline, run.candidates, item, ceiling, budget=budget,
                                   prepared=prepared, above=budget.max_tokens)
    except NonMonotonicSlicerError as exc:
        return BudgetAnswer(budget=None, increase=None, ceiling=ceiling, dry_runs=0,
                            explanation=f"no budget answer: the run's slicer is "
                                        f"{type(exc.value).__name__}, and {exc.message}")
    if search.budget is not None:
        return BudgetAnswer(budget=search.budget, increase=search.budget - budget.max_tokens,
                            ceiling=ceiling, dry_runs=search.dry_runs, explanation=None)
    if search.excluded_before_slice:
        # The logged reason explains itself; one that expected a budget to help (or
        # none given) is not stretched to fit: the re-run's finding is said plainly.
        why = (reason.counterfactual() if reason is not None and not reason.budget_helps
               else "the re-run excludes it before the slicer")
        text = f"no budget would include it: {why}"
    else:
        text = (f"not included at any budget from {budget.max_tokens + 1} up to {ceiling} "
                "tokens")
    return BudgetAnswer(budget=None, increase=None, ceiling=ceiling,
                        dry_runs=search.dry_runs, explanation=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgainstAnswer:
    """Candidate ``index`` under another policy at the run's budget and clock:
    ``included``, or the exclusion ``reason`` (its JSON object), or ``error`` when
    that run fails or cannot be made."""

    label: str
    included: bool
    reason: dict[str, Any] | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-native values."""
        return {"label": self.label, "included": self.included, "reason": self.reason,
                "error": self.error}


def answer_against(run: ReplayableRun, index: int, label: str, policy: Policy, *,
                   report: SelectionReport | Exception | None = None) -> AgainstAnswer:
    """Whether candidate ``index`` of ``run`` is included under ``policy``; ``report``
    (:func:`against_report`) reuses one dry run for several items of the run."""
    if report is None:
        report = against_report(run, policy)
    if isinstance(report, Exception):
        return AgainstAnswer(label=label, included=False, reason=None, error=str(report))
    item = run.candidates[index]
    if any(entry.item is item for entry in report.included):
        return AgainstAnswer(label=label, included=True, reason=None, error=None)
    for entry in report.excluded:
        if entry.item is item:
            return AgainstAnswer(label=label, included=False,
                                 reason=reason_to_dict(entry.reason), error=None)
    return AgainstAnswer(label=label, included=False, reason=None,
                         error="the re-run's report does not account for the item")


def against_report(run: ReplayableRun, policy: Policy) -> SelectionReport | Exception:
    """``policy``'s dry run over ``run``'s candidates at its budget and clock, or the
    error that stopped it (the run fails under the policy, or cannot be made)."""
    try:
        return run.pipeline_for(policy).dry_run(run.candidates, run.budget)
    except (PipelineError, RunNotReplayableError) as exc:
        return exc


def _used(report_included: Any) -> int:
    return sum(item.tokens for item in report_included)


class _Mean:
    """A mean independent of the order its values come in (exact partial sums)."""

    __slots__ = ("count", "partials")

    def __init__(self) -> None:
        self.count = 0
        self.partials: list[float] = []

    def add(self, value: float) -> None:
        self.count += 1
        add_exact(self.partials, value)

    @property
    def value(self) -> float | None:
        return math.fsum(self.partials) / self.count if self.count else None


class ReplaySummary:
    """Streaming totals of logged runs replayed under ``policy``: add each
    :class:`~cupellation.logs.LoggedRun` (read with ``keep_candidates=True``) and read
    :meth:`to_dict`. Memory is independent of how many runs are added: counters,
    and at most :data:`LISTED` run ids and flips listed (all counted).

    ``match`` (a compiled pattern) follows the items whose content it finds: the
    runs where such an item flips (included in the log, excluded under the policy,
    or the other way round).
    """

    def __init__(self, policy: Policy, label: str, match: re.Pattern[str] | None = None
                 ) -> None:
        self.policy = policy
        self.label = label
        self.match = match
        self.runs = self.replayed = self.changed = self.unchanged = self.failed = 0
        self.not_replayable: Counter[str] = Counter()
        self.not_replayable_examples: list[str] = []
        self.failures: list[dict[str, str]] = []
        self.changed_runs: list[str] = []
        self.gained_by_kind: Counter[str] = Counter()
        self.lost_by_kind: Counter[str] = Counter()
        self.gained_by_reason: Counter[str] = Counter()
        self.lost_by_reason: Counter[str] = Counter()
        self.gained_tokens = self.lost_tokens = 0
        self.budget_before, self.budget_after = _Mean(), _Mean()
        self.target_before, self.target_after = _Mean(), _Mean()
        self.flips = 0
        self.flip_runs = 0
        self.flip_list: list[dict[str, Any]] = []

    def add(self, logged: LoggedRun) -> None:
        """Replay one logged run and count what changed."""
        self.runs += 1
        try:
            run = replayable(logged)
            pipeline = run.pipeline_for(self.policy)
        except RunNotReplayableError as exc:
            self.not_replayable[exc.cause] += 1
            if len(self.not_replayable_examples) < LISTED:
                self.not_replayable_examples.append(str(exc))
            return
        try:
            report = pipeline.dry_run(run.candidates, run.budget)
        except PipelineError as exc:
            self.failed += 1
            if len(self.failures) < LISTED:
                self.failures.append({"run_id": run.run_id, "error": str(exc)})
            return
        self.replayed += 1
        self._compare(run, report)

    def _compare(self, run: ReplayableRun, report: SelectionReport) -> None:
        position = {id(item): k for k, item in enumerate(run.candidates)}
        now_included = {position[id(entry.item)] for entry in report.included}
        new_reason = {position[id(entry.item)]: entry.reason.name for entry in report.excluded}
        before = run.logged_included
        gained = now_included - before
        lost = before - now_included
        budget = run.budget
        used_before = _used(run.candidates[k] for k in before)
        used_after = _used(entry.item for entry in report.included)
        if budget.max_tokens:
            self.budget_before.add(used_before / budget.max_tokens)
            self.budget_after.add(used_after / budget.max_tokens)
        if budget.target_tokens:
            self.target_before.add(used_before / budget.target_tokens)
            self.target_after.add(used_after / budget.target_tokens)
        if not gained and not lost:
            self.unchanged += 1
            return
        self.changed += 1
        if len(self.changed_runs) < LISTED:
            self.changed_runs.append(run.run_id)
        candidates = run.candidates
        for k in gained:
            item = candidates[k]
            self.gained_by_kind[item.kind.value] += 1
            self.gained_by_reason[run.logged_reasons[k]] += 1
            self.gained_tokens += item.tokens
        for k in lost:
            item = candidates[k]
            self.lost_by_kind[item.kind.value] += 1
            self.lost_by_reason[new_reason.get(k, "?")] += 1
            self.lost_tokens += item.tokens
        if self.match is not None:
            flipped = [(k, "gained") for k in sorted(gained)] + [(k, "lost") for k in sorted(lost)]
            hits = [(k, way) for k, way in flipped if self.match.search(candidates[k].content)]
            if hits:
                self.flip_runs += 1
                self.flips += len(hits)
                for k, way in hits:
                    if len(self.flip_list) < LISTED:
                        self.flip_list.append({
                            "run_id": run.run_id, "candidate_index": k,
                            "content": candidates[k].content, "change": way,
                            "logged": run.logged_reasons[k],
                            "replayed": "Included" if way == "gained" else new_reason.get(k)})

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-native values."""

        def rows(counter: Counter[str]) -> list[dict[str, Any]]:
            return [{"name": name, "count": n}
                    for name, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]

        def shift(before: _Mean, after: _Mean) -> dict[str, float | None]:
            old, new = before.value, after.value
            return {"before": old, "after": new,
                    "shift": None if old is None or new is None else new - old}

        out: dict[str, Any] = {
            "policy": self.label,
            "runs": {"read": self.runs, "replayed": self.replayed, "changed": self.changed,
                     "unchanged": self.unchanged, "failed": self.failed,
                     "not_replayable": sum(self.not_replayable.values())},
            "not_replayable": rows(self.not_replayable),
            "not_replayable_examples": self.not_replayable_examples,
            "failures": self.failures,
            "changed_runs": self.changed_runs,
            "items": {"gained": sum(self.gained_by_kind.values()),
                      "lost": sum(self.lost_by_kind.values()),
                      "gained_tokens": self.gained_tokens, "lost_tokens": self.lost_tokens,
                      "gained_by_kind": rows(self.gained_by_kind),
                      "lost_by_kind": rows(self.lost_by_kind),
                      "gained_by_logged_reason": rows(self.gained_by_reason),
                      "lost_by_replayed_reason": rows(self.lost_by_reason)},
            "budget_utilization": shift(self.budget_before, self.budget_after),
            "target_utilization": shift(self.target_before, self.target_after),
        }
        if self.match is not None:
            out["match"] = {"pattern": self.match.pattern, "runs": self.flip_runs,
                            "flips": self.flips, "listed": self.flip_list}
        return out

"""Analytics: budget simulation and policy sensitivity (the specification's
``analytics`` chapters), report analytics, and logged runs run again under another
budget or policy (what ``cupellation why`` and ``cupellation replay`` use).

    from cupellation.analytics import find_min_budget_for, get_marginal_items
    from cupellation.analytics import policy_sensitivity, budget_utilization

    needed = find_min_budget_for(pipeline, items, items[3], 2**16, budget=budget)
    marginal = get_marginal_items(pipeline, items, budget, slack_tokens=500)
    swings = policy_sensitivity(items, budget, [("chat", chat), ("rag", rag)]).diffs
    used = budget_utilization(report, budget)      # over max_tokens (the spec's)

Names follow the specification in snake_case (``GetMarginalItems`` is
:func:`get_marginal_items`); the chapters' exact error messages are ``str()`` of
:class:`~cupellation.exceptions.NonMonotonicSlicerError` and
:class:`~cupellation.exceptions.SpecArgumentError`. The choices the chapters leave
open are in docs/decisions.md ("Analytics").
"""

from .._pipeline import PreparedCandidates
from ._budget import (
    FIND_MIN_BUDGET_GUARD_MESSAGE,
    MARGINAL_GUARD_MESSAGE,
    BudgetSearch,
    find_min_budget_for,
    get_marginal_items,
    scaled_budget,
    search_min_budget,
)
from ._diff import ReportDiff, diff_reports
from ._metrics import (
    KindQuotaUtilization,
    add_exact,
    budget_utilization,
    kind_diversity,
    quota_utilization,
    target_utilization,
    timestamp_coverage,
)
from ._replay import (
    AgainstAnswer,
    BudgetAnswer,
    ReplaySummary,
    against_report,
    answer_against,
    answer_min_budget,
    fitting_ceiling,
)
from ._rerun import ReplayableRun, replayable
from ._sensitivity import (
    MIN_VARIANTS_MESSAGE,
    ItemStatus,
    PolicySensitivityDiffEntry,
    PolicySensitivityReport,
    dry_run_with_policy,
    policy_sensitivity,
    policy_sensitivity_from_pipelines,
)

__all__ = [
    "FIND_MIN_BUDGET_GUARD_MESSAGE",
    "MARGINAL_GUARD_MESSAGE",
    "MIN_VARIANTS_MESSAGE",
    "AgainstAnswer",
    "BudgetAnswer",
    "add_exact",
    "BudgetSearch",
    "ItemStatus",
    "KindQuotaUtilization",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "PreparedCandidates",
    "ReplaySummary",
    "ReplayableRun",
    "ReportDiff",
    "against_report",
    "answer_against",
    "answer_min_budget",
    "budget_utilization",
    "diff_reports",
    "dry_run_with_policy",
    "find_min_budget_for",
    "fitting_ceiling",
    "get_marginal_items",
    "kind_diversity",
    "policy_sensitivity",
    "policy_sensitivity_from_pipelines",
    "quota_utilization",
    "replayable",
    "scaled_budget",
    "search_min_budget",
    "target_utilization",
    "timestamp_coverage",
]

"""Analytics: budget simulation and policy sensitivity (the specification's
``analytics`` chapters), report analytics, and logged runs run again under another
budget or policy (what ``cupellation why`` and ``cupellation replay`` use).

    from cupellation.analytics import find_min_budget_for, get_marginal_items
    from cupellation.analytics import policy_sensitivity, budget_utilization

    needed = find_min_budget_for(pipeline, items, items[3], 2**16, budget=budget)
    marginal = get_marginal_items(pipeline, items, budget, slack_tokens=500)
    swings = policy_sensitivity(items, budget, [("chat", chat), ("rag", rag)]).diffs
    used = budget_utilization(report, budget)      # over max_tokens (the spec's)

On a message list, the unit is what :func:`~cupellation.select_messages` selects (a
message or a whole tool exchange, pinned and trimmed as it does) and the answers
name messages (indices into the list given)::

    from cupellation.analytics import (find_min_budget_for_message, get_marginal_messages,
                                       message_budget_sweep, message_policy_sensitivity)

    needed = find_min_budget_for_message(messages, 7, 2**16, max_tokens=8000)
    marginal = get_marginal_messages(messages, 500, max_tokens=8000)
    swings = message_policy_sensitivity(messages, [("chat", "chat"), ("tools", "tooluse")],
                                        max_tokens=8000).diffs
    points = message_budget_sweep(messages, [1000, 2000, 4000], trim={"ToolOutput": 800})

Names follow the specification in snake_case (``GetMarginalItems`` is
:func:`get_marginal_items`); the chapters' exact error messages are ``str()`` of
:class:`~cupellation.exceptions.NonMonotonicSlicerError` and
:class:`~cupellation.exceptions.SpecArgumentError`. The choices the chapters leave
open are in docs/decisions.md ("Analytics").

.. versionadded:: 0.3
"""

from .._pipeline import PreparedCandidates
from ._budget import (
    FIND_MIN_BUDGET_GUARD_MESSAGE,
    MARGINAL_GUARD_MESSAGE,
    BudgetPoint,
    BudgetSearch,
    budget_sweep,
    find_min_budget_for,
    get_marginal_items,
    scaled_budget,
    search_min_budget,
)
from ._diff import ReportDiff, diff_reports
from ._messages import (
    MessageBudgetPoint,
    MessageSensitivityReport,
    MessageSwing,
    MessageUnit,
    find_min_budget_for_message,
    get_marginal_messages,
    message_budget_sweep,
    message_policy_sensitivity,
    message_units,
)
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
    "BudgetPoint",
    "BudgetSearch",
    "ItemStatus",
    "KindQuotaUtilization",
    "MessageBudgetPoint",
    "MessageSensitivityReport",
    "MessageSwing",
    "MessageUnit",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "PreparedCandidates",
    "ReplaySummary",
    "ReplayableRun",
    "ReportDiff",
    "against_report",
    "answer_against",
    "answer_min_budget",
    "budget_sweep",
    "budget_utilization",
    "diff_reports",
    "dry_run_with_policy",
    "find_min_budget_for",
    "find_min_budget_for_message",
    "fitting_ceiling",
    "get_marginal_items",
    "get_marginal_messages",
    "kind_diversity",
    "message_budget_sweep",
    "message_policy_sensitivity",
    "message_units",
    "policy_sensitivity",
    "policy_sensitivity_from_pipelines",
    "quota_utilization",
    "replayable",
    "scaled_budget",
    "search_min_budget",
    "target_utilization",
    "timestamp_coverage",
]

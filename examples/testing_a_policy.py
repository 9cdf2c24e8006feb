"""Test a selection policy with the specification's testing vocabulary and the fixtures
of cupellation's pytest plugin.

    python examples/testing_a_policy.py          (runs the tests below with pytest)
    python -m pytest examples/testing_a_policy.py

A team that changes its policy keeps tests like these: the system prompt is always
sent and placed first, the newest tool output is kept, old turns are what give way, and
the window is used well. ``expect(report)`` chains the vocabulary's assertions; a
failure says, in the specification's words, what was expected and what the report
held. The plugin (installed with cupellation) hands each test a fresh collector
(``cupellation_collector``) or in-memory spans (``cupellation_spans``), and sets
nothing global.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    KindScorer,
    Pipeline,
    RecencyScorer,
    UShapedPlacer,
)
from cupellation.testing import CapturedSpans, SelectionReportAssertionError, expect

POLICY = Pipeline(scorer=CompositeScorer([(RecencyScorer(), 2.0), (KindScorer(), 1.0)]),
                  placer=UShapedPlacer())
BUDGET = ContextBudget(max_tokens=400, target_tokens=300)
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def candidates() -> list[ContextItem]:
    """A support conversation: a pinned system prompt, eight turns, two tool outputs."""
    return [
        ContextItem("You are a billing support agent.", 12, kind="SystemPrompt", pinned=True),
        *(ContextItem(f"turn {k}: ...", 40, timestamp=NOW + timedelta(minutes=k))
          for k in range(8)),
        ContextItem("invoice lookup (old)", 90, kind="ToolOutput", timestamp=NOW),
        ContextItem("refund status (new)", 60, kind="ToolOutput",
                    timestamp=NOW + timedelta(minutes=9)),
    ]


def test_the_policy_keeps_what_matters(cupellation_collector: DiagnosticTraceCollector
                                       ) -> None:
    """The system prompt is sent and placed at an edge, the newest tool output is kept,
    the oldest turn gave way for lack of budget, and at least 65% of the window is used."""
    POLICY.run(candidates(), BUDGET, cupellation_collector)
    report = cupellation_collector.build_report()
    (expect(report)
        .include_item_with_kind("SystemPrompt")
        .place_item_at_edge(lambda entry: entry.item.kind == "SystemPrompt")
        .include_item_matching(lambda entry: entry.item.content == "refund status (new)")
        .exclude_item_matching_with_reason(lambda item: item.content == "turn 0: ...",
                                           "BudgetExceeded")
        .excluded_items_are_sorted_by_score_descending()
        .have_budget_utilization_above(0.65, BUDGET))


def test_the_spans_tell_the_same_story(cupellation_spans: CapturedSpans) -> None:
    """The run recorded as OpenTelemetry spans (in memory) rebuilds to a report that
    passes the same assertions."""
    POLICY.run(candidates(), BUDGET, cupellation_spans.collector)
    (rebuilt,) = cupellation_spans.reports()
    (expect(rebuilt)
        .include_item_with_kind("SystemPrompt")
        .have_kind_coverage_count(3)
        .have_at_least_n_exclusions(1))


def test_a_failure_reads_in_the_specifications_words() -> None:
    """Asserting that no turn was dropped fails, and the message counts the dropped
    turns and shows the first one's score and reason."""
    report = POLICY.dry_run(candidates(), BUDGET)
    with pytest.raises(SelectionReportAssertionError) as failure:
        expect(report).have_no_exclusions_for_kind("Message")
    print(failure.value)
    assert str(failure.value).startswith(
        "HaveNoExclusionsForKind(Message) failed: found ")


if __name__ == "__main__":
    # pytest in a process of its own: this one has imported cupellation already.
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", __file__, "-q", "-s",
                              "-p", "no:cacheprovider"]))

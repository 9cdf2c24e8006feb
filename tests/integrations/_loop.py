"""What every integration test checks on each model call: the input is valid for the
provider (the independent oracle of tests/chat/_provider_rules.py), within the budget
by the configured counter, and explained by the call's report; and the run records
the framework's ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat._provider_rules import problems
from cupellation import EventCollector
from cupellation.chat import MessageFormat, MessageSelection, select_messages_with_report
from cupellation.events import PipelineEvent, RunStarted

#: The budget of every loop and the trimming limit of tool outputs.
MAX_TOKENS = 900
TRIM = {"ToolOutput": 250}

#: A tool output far over the budget (about 13,000 tokens).
BIG = "\n".join(f"2026-11-27T23:{k % 60:02d}:00 worker-{k} served /api/{k} in {k % 97} ms"
                for k in range(900))


def weather(city: str) -> str:
    """A small tool output."""
    return f"{city}: 18C, light wind, no rain expected."


def logs(service: str) -> str:
    """The large tool output."""
    return f"logs of {service}:\n{BIG}"


class Runs(EventCollector):
    """Keeps every run's ``run_started`` event."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[RunStarted] = []

    def on_event(self, event: PipelineEvent) -> None:
        if isinstance(event, RunStarted):
            self.started.append(event)


def check_call(fmt: MessageFormat, sent: Sequence[Any], selection: MessageSelection[Any] | None,
               *, max_tokens: int = MAX_TOKENS) -> int:
    """The checks of one model call's input ``sent`` (in ``fmt``, system first);
    its token count by the default counter."""
    assert problems(fmt, sent) == [], sent
    recount = select_messages_with_report(list(sent), format=fmt, max_tokens=10**9)
    assert recount.tokens <= max_tokens
    assert selection is not None
    report = selection.report
    # The report explains every unit: those sent (the same units, recounted), and
    # those left out, each with its reason.
    assert len(report.included) == len(recount.report.included)
    assert all(entry.reason for entry in report.excluded)
    assert selection.tokens == recount.tokens
    return recount.tokens

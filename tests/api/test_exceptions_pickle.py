"""Every exception in ``cupellation.exceptions`` survives pickling with its message,
arguments and attributes, so a failure in a worker process (``multiprocessing``,
``concurrent.futures``) reaches the parent as the same exception."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline, exceptions
from cupellation.exceptions import CupelError
from cupellation.scoring import PriorityScorer
from cupellation.slicing import GreedySlice

#: One instance of each public exception, built as the library builds it.
SAMPLES: list[CupelError] = [
    exceptions.BackendError("http://127.0.0.1:6006: refused"),
    exceptions.BudgetOverflowError(120, 100),
    exceptions.ConfigurationError("budget", None, "pass a budget"),
    exceptions.CountRequirementError("needs 3 Message items, found 1", kind="Message",
                                     required_count=3, satisfied_count=1),
    exceptions.CupelError("plain"),
    exceptions.CustomStrategyError("pipeline.scorer", "{'type': 'custom'}"),
    exceptions.DecodeError("item.tokens", "x", "must be an integer", line=7),
    exceptions.FetchLimitError("more than 10 spans", limit="max_spans"),
    exceptions.FormatMismatchError("messages[0]", {"role": "user"}, given_format="openai",
                                   detected_format="anthropic", shown_by="content blocks"),
    exceptions.InvalidTextError("content", "a\ud800b", 1),
    exceptions.InvalidTypeError("tokens", "3", "an int"),
    exceptions.InvalidValueError("tokens", -1, "must not be negative"),
    exceptions.MalformedAnswerError("not JSON"),
    exceptions.MetadataTooDeepError("metadata", {"a": {}}, 64),
    exceptions.NonMonotonicSlicerError("QuotaSlice is not monotonic", GreedySlice()),
    exceptions.PartialFetchError("stopped at 2 pages", limit="max_pages", spans=[1, 2],
                                 missing="page 3", requests=2),
    exceptions.PinnedBudgetError(500, 400, detail="pinned: system prompt"),
    exceptions.PipelineError("the placer returned None"),
    exceptions.RedirectRefusedError("redirect to another origin", target="http://x/"),
    exceptions.RunNotReplayableError("r1", "custom_strategy", "its scorer is custom"),
    exceptions.ScorerError("PriorityScorer()", 3, "returned nan (scores must be finite)"),
    exceptions.SpecArgumentError("budgets must not be empty", field="budgets", value=[]),
    exceptions.StoreError("chdb:///tmp/x: cannot open"),
    exceptions.StoreInUseError("/tmp/b", "/tmp/a"),
    exceptions.StoreSchemaError("otel_logs", "LogAttributes", "is JSON, not Map"),
    exceptions.TableTooLargeError("KnapsackSlice(bucket_size=1)", 10_000, 10_000, 50_000_000),
]


def test_every_public_exception_has_a_sample() -> None:
    """The samples cover every class the module exports (a new exception must join)."""
    assert sorted(type(error).__name__ for error in SAMPLES) == sorted(exceptions.__all__)


@pytest.mark.parametrize("error", SAMPLES, ids=lambda error: type(error).__name__)
def test_an_exception_round_trips_through_pickle(error: CupelError) -> None:
    """Unpickled, the exception has the same class, message, args and attributes."""
    error.add_note("a note added by the caller")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert vars(back) == vars(error)


def _failing_run() -> list[ContextItem]:
    items = [ContextItem("system", tokens=500, pinned=True)]
    return Pipeline(PriorityScorer()).run(items, ContextBudget(max_tokens=400, target_tokens=300))


def test_a_worker_processs_failure_reaches_the_parent_as_itself() -> None:
    """A PinnedBudgetError raised in a process pool's worker is raised in the parent
    as a PinnedBudgetError with its numbers (before, unpickling it failed)."""
    with ProcessPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_failing_run)
        with pytest.raises(exceptions.PinnedBudgetError) as raised:
            future.result(timeout=60)
    assert raised.value.pinned_tokens == 500
    assert raised.value.available_tokens == 400

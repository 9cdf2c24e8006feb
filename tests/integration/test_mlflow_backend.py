"""Real runs sent to a real MLflow tracking server over OTLP/HTTP (MLflow has no gRPC
receiver) and read back through cupellation's own reader (``fetch_spans``, what
``cupellation report --from mlflow`` uses): for every tier and layout the reports
rebuilt equal the in-process ones, for random runs, the demo (through the CLI), an
agent loop and a 5,000-candidate run. One server for the module; each test its own
experiment; reads poll for the expected span count.

MLflow reads a string attribute that is valid JSON as JSON: item text such as
``"42"`` comes back a number. The reader turns objects and lists back into text;
what it cannot restore makes the digest differ, so such a run says it is incomplete
(never silently different; tests/otel/test_backend_formats.py holds such a run).
MLFLOW_KEEPS records, per tier, whether the random runs all come back whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    SelectionReport,
)
from cupellation.otel import RebuiltRun, runs_from_spans
from cupellation_exporters import OtlpProviders, setup_otlp

from .backend_runs import AGENT_TURNS, LAYOUTS, agent_loop, five_thousand, span_collector
from .mlflow import EXPERIMENT_HEADER, ROOT, MLflow, run_mlflow
from .selections import TIERS, run_selections

pytestmark = [pytest.mark.slow, pytest.mark.mlflow]

MLFLOW_KEEPS: dict[str, bool] = {"StageOnly": True, "StageAndExclusions": True, "Full": True}
"""Do the random runs at this tier (full content capture) all come back whole? The
measured answer with MLflow 3.17.2, for the README's table."""
RUNS = 8


@pytest.fixture(scope="module")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLflow]:
    """One MLflow server for this module (one worker, free port, sqlite store)."""
    with run_mlflow(tmp_path_factory.mktemp("mlflow")) as server:
        yield server


def _providers(mlflow: MLflow, experiment: str) -> OtlpProviders:
    return setup_otlp(protocol="http/protobuf", endpoint=mlflow.base_url,
                      headers={EXPERIMENT_HEADER: experiment}, metrics=False, timeout=30)


def _rebuilt(mlflow: MLflow, experiment: str, expect: int) -> dict[str, RebuiltRun]:
    return {run.run_id: run for run in runs_from_spans(mlflow.spans(experiment,
                                                                    expect=expect))}


def _equal_or_says_incomplete(rebuilt: RebuiltRun, original: SelectionReport) -> bool:
    """True when the rebuilt report is the original; otherwise it must say it is
    incomplete, naming the digest mismatch."""
    if rebuilt.report == original:
        return True
    assert not rebuilt.report.is_complete, rebuilt.report
    assert any("digest" in problem for problem in rebuilt.report.incomplete), rebuilt.report
    return False


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tier", TIERS)
def test_random_runs_come_back_from_mlflow(mlflow: MLflow, tier: str, layout: str) -> None:
    """Random runs (one failing in its scorer, odd contents, metadata, count caps) at
    the tier: each report read back equals the in-process one or says it is
    incomplete; which happens is MLFLOW_KEEPS; root times within 1 µs."""
    experiment = mlflow.new_experiment(f"random-{tier}")
    providers = _providers(mlflow, experiment)
    memory = InMemorySpanExporter()
    providers.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    selections = run_selections(RUNS, f"mlflow-{tier}",
                                also=[span_collector(providers.tracer_provider, tier, layout)])
    providers.shutdown()
    assert providers.dropped_spans == 0
    sent = memory.get_finished_spans()
    rebuilt = _rebuilt(mlflow, experiment, len(sent))
    whole = [_equal_or_says_incomplete(rebuilt[s.run_id], s.reports[tier]) for s in selections]
    assert all(whole) is MLFLOW_KEEPS[tier]
    back = {span.span_id: span for span in mlflow.spans(experiment, expect=len(sent))}
    for span in sent:
        assert span.context is not None
        assert span.start_time is not None
        start = back[format(span.context.span_id, "016x")].start_ns
        assert start is not None
        assert abs(start - span.start_time) <= 1_000


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tier", TIERS)
def test_an_agent_loop_comes_back_from_mlflow_whole(mlflow: MLflow, tier: str,
                                                    layout: str) -> None:
    """Six agent steps, each run under the application's step span: every report
    read back equals the in-process one, and each run is the child of its step."""
    experiment = mlflow.new_experiment(f"agent-{tier}")
    providers = _providers(mlflow, experiment)
    reports = agent_loop(providers.tracer_provider, tier, layout)
    providers.shutdown()
    stored = mlflow.spans(experiment, expect=len(AGENT_TURNS) * 7)
    assert {run.run_id: run.report for run in runs_from_spans(stored)} == reports
    steps = {s.span_id for s in stored if s.name.startswith("agent.step")}
    assert len(steps) == len(AGENT_TURNS)
    assert all(s.parent_span_id in steps for s in stored if s.name == "cupel.pipeline")


def test_the_demo_sent_with_otlp_comes_back_as_its_report(mlflow: MLflow,
                                                         tmp_path: Path) -> None:
    """``cupellation demo --otlp`` pointed at MLflow by the standard variables, then
    ``cupellation report --from mlflow``: the report equals the demo's report.json."""
    experiment = mlflow.new_experiment("demo")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "OTEL_EXPORTER_OTLP_ENDPOINT": mlflow.base_url,
           "OTEL_EXPORTER_OTLP_HEADERS": f"{EXPERIMENT_HEADER}={experiment}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", "demo", "--out",
                           str(tmp_path / "demo"), "--quiet", "--otlp", "--otlp-tier", "Full",
                           "--otlp-content", "full"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    mlflow.spans(experiment, expect=6)
    expected = json.loads((tmp_path / "demo" / "report.json").read_text(encoding="utf-8"))
    out = tmp_path / "rebuilt.json"
    with out.open("w", encoding="utf-8") as handle:
        done = subprocess.run([sys.executable, "-m", "cupellation.cli", "report", "--from",
                               "mlflow", mlflow.base_url, "--experiment", experiment,
                               "--since", "1d", "--format", "json"], cwd=ROOT, env=env,
                              stdout=handle, stderr=subprocess.PIPE, text=True, timeout=120,
                              check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text(encoding="utf-8")) == expected


def test_five_thousand_candidates_come_back_whole_with_raised_limits(
        mlflow: MLflow, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5,000-candidate run at Full, the events layout with the SDK's event limit
    raised (OTEL_SPAN_EVENT_COUNT_LIMIT): the report read back equals the in-process
    one."""
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "100000")
    experiment = mlflow.new_experiment("five-thousand")
    providers = _providers(mlflow, experiment)
    reports = five_thousand(providers.tracer_provider)
    providers.shutdown()
    assert providers.dropped_spans == 0
    stored = mlflow.spans(experiment, expect=6, timeout=120)
    assert {run.run_id: run.report for run in runs_from_spans(stored)} == reports

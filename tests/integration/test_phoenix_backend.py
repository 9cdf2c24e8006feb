"""An agent loop, the demo and a 5,000-candidate run sent to a real Phoenix over
OTLP/HTTP and gRPC and read back through cupellation's own reader (``fetch_spans``,
what ``cupellation report --from phoenix`` uses): every report equals the in-process
one, for every tier and layout. Reads poll for the expected span count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    Pipeline,
    RecencyScorer,
)
from cupellation.otel import runs_from_spans
from cupellation_exporters import OtlpProtocol, OtlpProviders, setup_otlp

from .backend_runs import AGENT_TURNS, LAYOUTS, agent_loop, five_thousand, span_collector
from .phoenix import PHOENIX_PROJECT_ATTRIBUTE, PROJECT_HEADER, ROOT, Phoenix
from .selections import TIERS

pytestmark = [pytest.mark.slow, pytest.mark.phoenix]
PROTOCOLS: list[OtlpProtocol] = ["http/protobuf", "grpc"]


def _project(label: str) -> str:
    return f"cupel-{label.replace('/', '-').lower()}-{uuid.uuid4().hex[:8]}"


def _providers(protocol: OtlpProtocol, phoenix: Phoenix, project: str) -> OtlpProviders:
    """setup_otlp aimed at the project: the header over HTTP, the resource attribute
    over gRPC (Phoenix's gRPC receiver ignores headers)."""
    if protocol == "grpc":
        return setup_otlp(protocol="grpc", endpoint=phoenix.grpc_endpoint, metrics=False,
                          timeout=30, resource_attributes={PHOENIX_PROJECT_ATTRIBUTE: project})
    return setup_otlp(protocol="http/protobuf", endpoint=phoenix.http_base_endpoint,
                      headers={PROJECT_HEADER: project}, metrics=False, timeout=30)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_agent_loop_comes_back_from_phoenix_whole(phoenix: Phoenix, protocol: OtlpProtocol,
                                                     tier: str, layout: str) -> None:
    """Six agent steps under the application's step spans: every report read back
    equals the in-process one, each run the child of its step."""
    project = _project(f"agent-{protocol}-{tier}")
    providers = _providers(protocol, phoenix, project)
    reports = agent_loop(providers.tracer_provider, tier, layout)
    providers.shutdown()
    assert providers.dropped_spans == 0
    stored = phoenix.spans(project, expect=len(AGENT_TURNS) * 7)
    assert {run.run_id: run.report for run in runs_from_spans(stored)} == reports
    steps = {s.span_id for s in stored if s.name.startswith("agent.step")}
    assert all(s.parent_span_id in steps for s in stored if s.name == "cupel.pipeline")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_five_thousand_candidates_come_back_whole_with_raised_limits(
        phoenix: Phoenix, protocol: OtlpProtocol, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5,000-candidate run at Full in the events layout, the SDK's event limit
    raised: the report read back equals the in-process one."""
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "100000")
    project = _project(f"five-thousand-{protocol}")
    providers = _providers(protocol, phoenix, project)
    reports = five_thousand(providers.tracer_provider)
    providers.shutdown()
    assert providers.dropped_spans == 0
    stored = phoenix.spans(project, expect=6, timeout=120)
    assert {run.run_id: run.report for run in runs_from_spans(stored)} == reports


def test_the_demo_comes_back_through_report_from_phoenix(phoenix: Phoenix,
                                                         tmp_path: Path) -> None:
    """``cupellation demo --otlp`` pointed at Phoenix by the standard variables, then
    ``cupellation report --from phoenix``: the report equals the demo's report.json."""
    project = _project("demo")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.http_base_endpoint,
           "OTEL_EXPORTER_OTLP_HEADERS": f"{PROJECT_HEADER}={project}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", "demo", "--out",
                           str(tmp_path / "demo"), "--quiet", "--otlp", "--otlp-tier", "Full",
                           "--otlp-content", "full"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    phoenix.spans(project, expect=6)
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", "report", "--from",
                           "phoenix", phoenix.base_url, "--project", project, "--since", "1d",
                           "--format", "json"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    expected = json.loads((tmp_path / "demo" / "report.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout) == expected


def test_the_agent_loop_example_sends_to_the_endpoint_it_is_given(phoenix: Phoenix) -> None:
    """examples/agent_loop.py with OTEL_EXPORTER_OTLP_ENDPOINT (and the project header)
    set sends its six runs to Phoenix, and the reports read back are whole."""
    project = _project("agent-example")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.http_base_endpoint,
           "OTEL_EXPORTER_OTLP_HEADERS": f"{PROJECT_HEADER}={project}"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "agent_loop.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "spans dropped on the way: 0" in done.stdout
    stored = phoenix.spans(project, expect=len(AGENT_TURNS) * 7)
    runs = runs_from_spans(stored)
    assert len(runs) == len(AGENT_TURNS)
    assert all(run.is_complete for run in runs)


def test_large_full_runs_over_grpc_stay_under_phoenix_4_mib_limit(
        phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty Full-tier runs of 400 candidates with full content (over 4 MiB in one
    export batch) sent over gRPC: the batches are split under Phoenix's 4 MiB receive
    limit, nothing is dropped, and every run reads back equal to the in-process one."""
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "100000")
    project = _project("large-grpc")
    providers = _providers("grpc", phoenix, project)
    spans = span_collector(providers.tracer_provider, "Full", "events")
    pipeline = Pipeline(RecencyScorer(), GreedySlice())
    reports = {}
    for run in range(40):
        items = [ContextItem(f"run {run} candidate {k}: " + "v" * (40 + k % 90), 20 + k % 37)
                 for k in range(400)]
        diagnostics = DiagnosticTraceCollector("Full")
        pipeline.run(items, ContextBudget(max_tokens=4000, target_tokens=3000),
                     FanOutCollector(diagnostics, spans))
        reports[diagnostics.events[0].run_id] = diagnostics.build_report()
    providers.shutdown()
    assert providers.dropped_spans == 0
    stored = phoenix.spans(project, expect=40 * 6, timeout=120)
    assert {run.run_id: run.report for run in runs_from_spans(stored)} == reports

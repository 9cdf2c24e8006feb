"""An agent loop over a multi-turn conversation with tool outputs, each step traced
under the application's own span, and the reports rebuilt from the spans.

    python examples/agent_loop.py
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:6006 python examples/agent_loop.py

The application owns OpenTelemetry: it makes the tracer provider (here with an
in-memory exporter, to read the spans back at the end); cupellation only uses the
API. Every selection becomes a ``cupel.pipeline`` span inside the step's span. With
OTEL_EXPORTER_OTLP_ENDPOINT set, the spans also go to that backend over OTLP
(``setup_otlp`` reads the standard OTEL_EXPORTER_OTLP_* variables: protocol, headers
such as ``x-project-name=NAME`` for Phoenix, timeout).
"""

import os
from datetime import UTC, datetime, timedelta

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    KindScorer,
    Pipeline,
    RecencyScorer,
    UShapedPlacer,
)
from cupellation.otel import SpanCollector, runs_from_spans

exporter = InMemorySpanExporter()
otlp = None
if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    from cupellation_exporters import setup_otlp

    otlp = setup_otlp(service_name="support-agent")  # spans only; metrics when asked
    provider = otlp.tracer_provider
else:
    provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("support-agent")

# One span sink for every step; full content, since these spans stay in memory.
spans = SpanCollector(tracer_provider=provider, tier="Full", content_capture="full")
pipeline = Pipeline(
    scorer=CompositeScorer([(RecencyScorer(), 2.0), (KindScorer(), 1.0)]),
    placer=UShapedPlacer(),
    budget=ContextBudget(max_tokens=300, target_tokens=100, output_reserve=50),
)

start = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
history = [ContextItem(content="You are a billing support agent.", tokens=12,
                       kind="SystemPrompt", pinned=True)]
turns = [
    ("user", "My invoice for October is wrong."),
    ("tool", "lookup_invoice(oct) -> 3 line items, total 412.00 EUR " + "x" * 200),
    ("assistant", "I see a duplicate line for the add-on."),
    ("user", "Can you refund the duplicate?"),
    ("tool", "refund(line=2) -> ok, 39.00 EUR " + "y" * 150),
    ("user", "Thanks. Also, will this happen again next month?"),
]
reports = []
for step, (role, text) in enumerate(turns):
    kind = "ToolOutput" if role == "tool" else "Message"
    history.append(ContextItem(content=f"{role}: {text}", tokens=max(4, len(text) // 4),
                               kind=kind, timestamp=start + timedelta(minutes=step)))
    with tracer.start_as_current_span(f"agent.step {step}"):
        diagnostics = DiagnosticTraceCollector("Full")
        window = pipeline.run(history, collector=FanOutCollector(diagnostics, spans))
        reports.append(diagnostics.build_report())
        # ... here the application would call the model with `window` ...
    left_out = [e.item.content[:30] for e in reports[-1].excluded]
    print(f"step {step}: sent {len(window)} of {len(history)} items; left out {left_out}")

# The trace is enough to rebuild every step's report.
rebuilt = {run.run_id: run.report for run in runs_from_spans(exporter.get_finished_spans())}
assert len(rebuilt) == len(reports)
assert all(report in rebuilt.values() for report in reports), "a rebuilt report differs"
names = sorted({span.name for span in exporter.get_finished_spans()})
print(f"{len(rebuilt)} reports rebuilt from {len(exporter.get_finished_spans())} spans: {names}")
if otlp is not None:
    otlp.shutdown()
    print(f"sent to {os.environ['OTEL_EXPORTER_OTLP_ENDPOINT']}; spans dropped on the way: "
          f"{otlp.dropped_spans}")
else:
    provider.shutdown()

"""A traced agent loop: every select_messages call becomes a cupel.pipeline span inside
the application's own span for the step, sent to Phoenix (or any OTLP backend).

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:6006 python examples/traced_agent_loop.py

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, ``setup_otlp`` (cupellation-exporters) sends
the spans there, into the Phoenix project ``cupellation-agent``; without it the spans
stay in memory and the script reads them back itself, offline. Content is captured in
full here (a demo); the default for spans is none.
"""

import json
import os
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation.chat import select_messages_with_report
from cupellation.otel import SpanCollector, runs_from_spans

PROJECT = "cupellation-agent"
exporter: InMemorySpanExporter | None = None
providers: Any = None
if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    from cupellation_exporters import setup_otlp

    providers = setup_otlp(service_name="traced-agent-loop",
                           resource_attributes={"openinference.project.name": PROJECT})
    tracer_provider: Any = providers.tracer_provider
else:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))

tracer = tracer_provider.get_tracer("traced-agent-loop")
spans = SpanCollector(tracer_provider=tracer_provider, tier="Full", content_capture="full")


def model(messages: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """A scripted model: a tool call for three steps, then an answer."""
    if step < 3:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{step}", "type": "function",
             "function": {"name": "fetch_page", "arguments": json.dumps({"page": step})}}]}
    return {"role": "assistant", "content": f"Answered from {len(messages)} messages."}


messages: list[dict[str, Any]] = [
    {"role": "system", "content": "You read pages and answer briefly."},
    {"role": "user", "content": "Read pages 0 to 2, then answer."},
]
step = 0
try:
    while True:
        with tracer.start_as_current_span(f"agent.step {step}"):
            selection = select_messages_with_report(messages, max_tokens=600,
                                                    trim={"ToolOutput": 200},
                                                    collector=spans)
            reply = model(selection.messages, step)
        print(f"step {step}: sent {len(selection.kept)} of {len(messages)} messages "
              f"({selection.tokens} tokens), left out {list(selection.dropped)}, "
              f"trimmed {list(selection.trimmed)}")
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            page = json.loads(call["function"]["arguments"])["page"]
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": f"Page {page}: " + "text of the page. " * 120})
        step += 1
finally:
    if providers is not None:
        providers.shutdown()
        print(f"sent to {os.environ['OTEL_EXPORTER_OTLP_ENDPOINT']}, project {PROJECT}; "
              f"spans dropped on the way: {providers.dropped_spans}")

if exporter is not None:
    finished = exporter.get_finished_spans()
    runs = runs_from_spans(finished)
    trimmed = [e.item for run in runs for e in run.report.included if e.item.original_tokens]
    print(f"{len(runs)} selections rebuilt from {len(finished)} spans; "
          f"{len(trimmed)} trimmed units among their included items")

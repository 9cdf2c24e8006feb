"""Send selections to Phoenix, Jaeger, Tempo or any OTLP endpoint.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:6006 python examples/send_to_otlp.py

``setup_otlp`` (from the ``cupellation-exporters`` package) is for applications
with no OpenTelemetry set-up of their own: it reads the standard
``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, protocol, timeout,
compression) and returns the providers it made, to shut down at exit. An
application that already has providers passes its own ``tracer_provider=`` to
``SpanCollector`` instead.
"""

from datetime import UTC, datetime, timedelta

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
from cupellation.otel import SpanCollector
from cupellation_exporters import setup_otlp

providers = setup_otlp(service_name="cupellation-example",
                       resource_attributes={"openinference.project.name": "cupellation"})
spans = SpanCollector(tracer_provider=providers.tracer_provider,
                      meter_provider=providers.meter_provider,
                      tier="StageAndExclusions", content_capture="hash")
pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(max_tokens=100, target_tokens=60))
now = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
candidates = [ContextItem(content=f"message {k}", tokens=15, timestamp=now + timedelta(minutes=k))
              for k in range(8)]
try:
    for _ in range(3):
        window = pipeline.run(candidates, collector=spans)
        print(f"sent {len(window)} of {len(candidates)} candidates")
finally:
    # Flush what is queued, then stop; a backend that is down never blocks the runs
    # above, and what could not be sent is counted here.
    providers.shutdown()
    print(f"spans dropped on the way: {providers.dropped_spans}")

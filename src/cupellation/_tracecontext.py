"""The OpenTelemetry span current in this thread, read through the API alone.

The pipeline records in ``run_started`` the trace and span ids current when a run
begins, so that a report or a log line leads to the application's trace. It does not
import OpenTelemetry for that (design.md: the pipeline knows nothing of it): it asks
a trace-context source, and the package's ``__init__`` hands it this module's
:func:`current_span_ids`. The log records use the same function.
"""

from __future__ import annotations

from opentelemetry import trace as otel_trace

__all__ = ["current_span_ids"]


def current_span_ids() -> tuple[str, str] | None:
    """The W3C trace and span ids (lowercase hex) of the current valid span, or None.

    Only the API is used: with no SDK configured there is no valid span.
    """
    context = otel_trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")

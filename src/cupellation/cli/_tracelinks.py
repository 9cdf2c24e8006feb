"""From the command to the trace: after a command sends spans (``demo --otlp``,
``select --otlp``, ``export --to otlp``), the trace id, the run id, the
``cupellation report --from …`` command that reads the run back and, where the backend
has one, its page for the trace — on standard error, never a credential's value (a
header other than MLflow's experiment id is named, not shown)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from ..settings import (
    OTLP_HEADERS_ENV_VAR,
    OTLP_TRACES_HEADERS_ENV_VAR,
    RESOURCE_ATTRIBUTES_ENV_VAR,
    read,
)
from ._common import safe

__all__ = ["RootIds", "root_ids", "trace_lines"]

_ROOT: Final = "cupel.pipeline"
_RUN_ID: Final = "cupel.run.id"
_MLFLOW_EXPERIMENT: Final = "x-mlflow-experiment-id"
_PHOENIX_PORT: Final = 6006
_PHOENIX_PROJECT: Final = "openinference.project.name"
#: Runs listed by name; past them, how many more.
_LISTED: Final = 5


def _pairs(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` (the OTLP variables' form) as a mapping, keys lowercased."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            out[unquote(key.strip()).lower()] = unquote(value.strip())
    return out


#: The variables the read-back hint interprets.
_VARIABLES: Final = (OTLP_HEADERS_ENV_VAR, OTLP_TRACES_HEADERS_ENV_VAR,
                     RESOURCE_ATTRIBUTES_ENV_VAR)


def _env_headers(variables: Mapping[str, str]) -> dict[str, str]:
    headers = _pairs(variables.get(OTLP_HEADERS_ENV_VAR, ""))
    headers.update(_pairs(variables.get(OTLP_TRACES_HEADERS_ENV_VAR, "")))
    return headers


def _from_settings() -> dict[str, str]:
    """The variables the hint interprets, as cupellation.settings reads them."""
    return {name: value for name in _VARIABLES if (value := read(name)) is not None}


def root_ids(spans: Iterable[Any]) -> list[tuple[str, str]]:
    """(trace id in hex, run id) of each ``cupel.pipeline`` span among ``spans``."""
    out = []
    for span in spans:
        if getattr(span, "name", None) != _ROOT:
            continue
        context = getattr(span, "context", None)
        trace_id = getattr(context, "trace_id", 0)
        run_id = (getattr(span, "attributes", None) or {}).get(_RUN_ID, "?")
        if trace_id:
            out.append((format(trace_id, "032x"), str(run_id)))
    return out


def RootIds() -> Any:  # noqa: N802 - builds a class of the optional SDK
    """A span processor (the OpenTelemetry SDK's) that keeps :func:`root_ids` of the
    spans it sees end, in its ``roots`` list: added to the ``--otlp`` provider."""
    from opentelemetry.sdk.trace import SpanProcessor  # noqa: PLC0415 - optional

    class _RootIds(SpanProcessor):
        def __init__(self) -> None:
            self.roots: list[tuple[str, str]] = []

        def on_end(self, span: Any) -> None:
            self.roots.extend(root_ids((span,)))

    return _RootIds()


def _backend(endpoint: str, headers: Mapping[str, str]) -> tuple[str | None, str]:
    """The backend the endpoint looks like (None when it cannot tell) and its base URL."""
    parts = urlsplit(endpoint)
    base = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else endpoint
    if _MLFLOW_EXPERIMENT in headers:
        return "mlflow", base
    try:
        port = parts.port
    except ValueError:
        port = None
    if port == _PHOENIX_PORT:
        return "phoenix", base
    return None, base


def _run_lines(backend: str | None, base: str, trace_id: str, options: str,
               experiment: str | None) -> list[str]:
    if backend is None:
        return [f"  read it back: cupellation report --from phoenix|mlflow|jaeger|tempo "
                f"URL --trace {trace_id}  (URL: the backend's base URL)"]
    lines = [f"  read it back: cupellation report --from {backend} {safe(base)} "
             f"--trace {trace_id}{options}"]
    if backend == "phoenix":
        lines.append(f"  open it:      {safe(base)}/redirects/traces/{trace_id}")
    elif experiment is not None:
        lines.append(f"  open it:      {safe(base)}/#/experiments/{safe(experiment)}/traces"
                     f"?selectedEvaluationId=tr-{trace_id}")
    return lines


def trace_lines(endpoint: str, roots: Sequence[tuple[str, str]],
                headers: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> list[str]:
    """What to print after sending the runs ``roots`` ((trace id, run id) pairs) to
    ``endpoint``: each run's trace and run id, the command that reads it back and the
    backend's page for it. ``headers`` are the ones given on the command line (the
    OTLP variables' are read from ``environ``); only MLflow's experiment id is shown,
    any other header is named as what ``report`` needs with ``--header``."""
    env = _from_settings() if environ is None else environ
    given = _env_headers(env)
    given.update({k.lower(): v for k, v in (headers or {}).items()})
    backend, base = _backend(endpoint, given)
    experiment = given.get(_MLFLOW_EXPERIMENT)
    options = ""
    project = _pairs(env.get(RESOURCE_ATTRIBUTES_ENV_VAR, "")).get(_PHOENIX_PROJECT)
    if backend == "phoenix" and project:
        options = f" --project {safe(project)}"
    elif backend == "mlflow" and experiment:
        options = f" --experiment {safe(experiment)}"
    lines: list[str] = []
    for trace_id, run_id in roots[:_LISTED]:
        lines.append(f"cupellation: sent run {safe(run_id)} as trace {trace_id} to "
                     f"{safe(endpoint)}")
        lines.extend(_run_lines(backend, base, trace_id, options, experiment))
    if len(roots) > _LISTED:
        lines.append(f"cupellation: ... and {len(roots) - _LISTED} more run(s)")
    secret = sorted(name for name in given if name != _MLFLOW_EXPERIMENT)
    if lines and secret:
        lines.append(f"  the backend's headers ({', '.join(safe(n) for n in secret)}, from "
                     "OTEL_EXPORTER_OTLP_HEADERS or --header) go to report as --header "
                     "NAME:VALUE")
    return lines

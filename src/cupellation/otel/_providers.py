"""The tracer and the meter's instruments a SpanCollector records with, taken from the
providers it was given (or the global ones), cached per provider, never raising."""

from __future__ import annotations

import logging
import threading

from opentelemetry import metrics, trace
from opentelemetry.trace import Tracer

from .._version import __version__
from ._metrics import Instruments, is_noop_meter_provider
from ._names import SCOPE_NAME

__all__ = ["Providers"]

_logger = logging.getLogger("cupellation")


class Providers:
    """A collector's tracer and instruments: from the providers given, or the global
    ones as they are now (a provider set later is used from then on)."""

    __slots__ = ("_lock", "_meter_cache", "_meter_provider", "_tracer_cache",
                 "_tracer_provider")

    def __init__(self, tracer_provider: trace.TracerProvider | None,
                 meter_provider: metrics.MeterProvider | None) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._lock = threading.Lock()
        self._tracer_cache: tuple[object, Tracer | None] | None = None
        self._meter_cache: tuple[object, Instruments | None] | None = None

    def tracer_provider(self) -> object:
        """The tracer provider in use: the one given, else the global one as it is now."""
        if self._tracer_provider is not None and not isinstance(
                self._tracer_provider, trace.ProxyTracerProvider):
            return self._tracer_provider
        return trace.get_tracer_provider()

    def tracer(self) -> Tracer | None:
        """The tracer, or None when tracing is off or the provider fails (logged)."""
        try:
            return self._tracer()
        except Exception:
            _logger.exception("cupellation: SpanCollector could not get a tracer from %r; "
                              "no spans are recorded", self._tracer_provider)
            return None

    def instruments(self) -> Instruments | None:
        """The instruments, or None when metrics are off or the provider fails (logged)."""
        try:
            return self._instruments()
        except Exception:
            _logger.exception("cupellation: SpanCollector could not get a meter from %r; "
                              "no metrics are recorded", self._meter_provider)
            return None

    def _tracer(self) -> Tracer | None:
        provider = (self._tracer_provider if self._tracer_provider is not None
                    else trace.get_tracer_provider())
        if isinstance(provider, trace.ProxyTracerProvider):
            # The global proxy (or one handed over explicitly): whatever is set now.
            provider = trace.get_tracer_provider()
            if isinstance(provider, trace.ProxyTracerProvider):
                return None
        cached = self._tracer_cache
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = None if isinstance(provider, trace.NoOpTracerProvider) else (
            provider.get_tracer(SCOPE_NAME, __version__))
        self._tracer_cache = (provider, tracer)
        return tracer

    def _instruments(self) -> Instruments | None:
        provider = (self._meter_provider if self._meter_provider is not None
                    else metrics.get_meter_provider())
        cached = self._meter_cache
        if cached is not None and cached[0] is provider:
            return cached[1]
        if is_noop_meter_provider(provider):
            if self._meter_provider is None:
                return None  # the global proxy: not cached, a provider may be set later
            self._meter_cache = (provider, None)
            return None
        with self._lock:  # one set of instruments per provider, even with many threads
            cached = self._meter_cache
            if cached is None or cached[0] is not provider:
                cached = self._meter_cache = (provider, Instruments(provider))
        return cached[1]

"""OpenTelemetry traces of runs and evaluations (``%agent trace otlp``, `ipyagent.trace`).

Off by default, and then nothing of OpenTelemetry is imported: a run asks `current()` (a
module global, None) and goes on. `trace` turns it on for the whole process (every run: a
``%%agent`` cell, an `Agent` from Python, a comparison, an evaluation): it imports the SDK, builds
a `TracerProvider` of our own (the process's global provider is left alone, so a user's own
OpenTelemetry set-up is not changed) with a `BatchSpanProcessor` that exports at most
`SCHEDULE_S` seconds after a span ends, and flushes and shuts down at interpreter exit (a kernel
shutting down), as MCP servers are closed (`atexit`).

The spans follow the GenAI semantic conventions (opentelemetry.io/docs/specs/semconv/gen-ai/);
`trace_spans` builds them from a run's events.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from contextvars import ContextVar
from typing import Any

from ... import __version__
from ...core import ConfigurationError, redact

#: Seconds a finished span waits at most before it is exported (the batch processor's schedule).
SCHEDULE_S = 1.0
#: Seconds the exit hook waits at most for the last spans to go out.
EXIT_FLUSH_S = 5.0
#: Where OTLP/HTTP goes when neither a URL nor the environment names one (the protocol's default).
DEFAULT_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"

log = logging.getLogger("ipyagent.tracing")

_tracing: "Tracing | None" = None
_exit_registered = False
#: The span a run started now is the child of (an evaluation's cell), None: a trace of its own.
parent_span: ContextVar[Any] = ContextVar("ipyagent_trace_parent", default=None)


#: The OTLP/HTTP exporter's logger: a line per retry of an export; `ReportedExports` says it once instead.
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


class ReportedExports:
    """A span exporter (`exporter`) whose failures are said in one line on stderr when spans stop
    reaching `where`, and once more when they reach it again, rather than the exporter's warning per
    retry (its logger is quieted while tracing is on). The SDK's exporter interface, by delegation."""

    def __init__(self, exporter: Any, where: str) -> None:
        self.exporter, self.where, self.failing = exporter, where, False

    def export(self, spans: Any) -> Any:
        result = self.exporter.export(spans)
        failed = getattr(result, "name", "") == "FAILURE"
        if failed != self.failing:
            self.failing = failed
            print(f"ipyagent: spans could not be sent to {self.where}; later ones are still tried "
                  "(%agent trace off stops)" if failed else f"ipyagent: spans reach {self.where} again",
                  file=sys.stderr)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class Tracing:
    """Tracing in force: spans go to `exporter` through a batch processor.

    Args:
        exporter: an OpenTelemetry `SpanExporter` (OTLP/HTTP, or the SDK's in-memory one in tests).
        endpoint: the URL shown for it (None: not a URL, a given exporter).
        content: message contents (prompts, replies, tool arguments and results, system
            instructions) go on spans too, each passed through `core.redact` first; False: none.
    """

    def __init__(self, exporter: Any, *, endpoint: str | None, content: bool) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "ipyagent"}
        self.provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
        exporter = ReportedExports(exporter, redact(endpoint) if endpoint else "the exporter")
        self.provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=int(SCHEDULE_S * 1000)))
        logging.getLogger(EXPORTER_LOGGER).setLevel(logging.CRITICAL)  # `ReportedExports` says it, once
        self.tracer = self.provider.get_tracer("ipyagent", __version__)
        self.endpoint, self.content = endpoint, content

    def flush(self, timeout_s: float = EXIT_FLUSH_S) -> bool:
        """Export every finished span now; False when `timeout_s` seconds were not enough."""
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Flush, then stop: spans that end later are dropped. Never raises."""
        try:
            self.provider.shutdown()
        except Exception:  # noqa: BLE001 - a receiver gone: nothing more to do
            log.debug("tracing shutdown failed", exc_info=True)

    def describe(self) -> str:
        """One line: ``tracing: OTLP to URL, message contents off`` (URL credentials masked)."""
        where = f"OTLP to {redact(self.endpoint)}" if self.endpoint else "to the given exporter"
        return f"tracing: {where}, message contents {'on (redacted)' if self.content else 'off'}"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def current() -> Tracing | None:
    """The tracing in force, None when off (the cost of a run's check when tracing is off)."""
    return _tracing


def tracing_status() -> str:
    """One line: where spans go and whether message contents do (`Tracing.describe`), or ``tracing: off``."""
    return _tracing.describe() if _tracing is not None else "tracing: off"


def otlp_endpoint(url: str | None = None) -> str:
    """The OTLP/HTTP traces URL: `url` (a base such as ``http://localhost:6006`` gets ``/v1/traces``);
    else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` +
    ``/v1/traces``, else `DEFAULT_ENDPOINT` + ``/v1/traces`` (the OTLP exporter specification's rules).

    Raises:
        ConfigurationError: `url` is not an http(s) URL.
    """
    if url is None:
        given = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if given:
            return given
        url = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"trace: {redact(url)!r} is not an OTLP/HTTP URL; give one such as "
                                 "http://localhost:4318 (an OTLP/HTTP receiver: a collector, Phoenix, Langfuse)")
    url = url.rstrip("/")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def trace(endpoint: str | bool | None = None, *, content: bool = False, exporter: Any = None) -> Tracing | None:
    """Turn tracing of every run on (spans of the GenAI semantic conventions), or off.

    ``trace()`` sends to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (else http://localhost:4318) over OTLP/HTTP, ``trace("http://host:6006")`` to that receiver,
    ``trace(exporter=...)`` to any `SpanExporter`; headers come from ``OTEL_EXPORTER_OTLP_HEADERS``.
    ``trace(False)`` (or ``"off"``) turns it off. Turning it on again replaces the tracing in force;
    each time the previous one is flushed and shut down.

    Args:
        endpoint: an OTLP/HTTP URL (its base, or the full ``.../v1/traces``), None (the
            environment's), or False / ``"off"``.
        content: also put message contents on spans (prompts, replies, system instructions,
            tool arguments and results), each through the one redactor (`core.redact`).
        exporter: a ready `SpanExporter` instead of OTLP/HTTP.

    Returns:
        The `Tracing` in force, None when off.

    Raises:
        ConfigurationError: the SDK is not installed (``pip install 'ipyagent[otel]'``), or a URL
            that is not http(s).
    """
    global _tracing
    previous = _tracing
    if endpoint is False or (isinstance(endpoint, str) and endpoint.strip().lower() == "off"):
        _tracing = None
    else:
        url = None if endpoint in (None, True) else str(endpoint)
        where = otlp_endpoint(url) if exporter is None else None
        try:
            if exporter is None:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter(endpoint=where)
            _tracing = Tracing(exporter, endpoint=where, content=content)
        except ImportError:
            raise ConfigurationError("trace: the OpenTelemetry SDK is not installed; "
                                     "pip install 'ipyagent[otel]' and try again") from None
        _register_exit()
    if previous is not None:
        previous.shutdown()
    return _tracing


def _register_exit() -> None:
    global _exit_registered
    if not _exit_registered:
        atexit.register(flush_at_exit)
        _exit_registered = True


def flush_at_exit() -> None:
    """At interpreter exit (a kernel shutting down): the last spans go out, within `EXIT_FLUSH_S` seconds."""
    if _tracing is not None:
        _tracing.flush(EXIT_FLUSH_S)
        _tracing.shutdown()


__all__ = ["Tracing", "current", "flush_at_exit", "otlp_endpoint", "parent_span", "trace", "tracing_status"]

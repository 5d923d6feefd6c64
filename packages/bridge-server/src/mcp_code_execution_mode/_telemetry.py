"""OTLP export of the bridge's traces, configured by the standard OpenTelemetry variables.

Traces are on when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
(and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``). Only then is the
OpenTelemetry SDK imported and its export thread started: a bridge without an endpoint imports
nothing of it and runs no thread (``docs/observability.md`` has the measures).

The exporter is the SDK's OTLP/HTTP protobuf one, built without arguments, so it reads every
``OTEL_EXPORTER_OTLP_*`` variable itself (headers, TLS files, compression, timeout). It runs behind
a ``BatchSpanProcessor``: ending a span only appends it to a bounded queue
(``OTEL_BSP_MAX_QUEUE_SIZE``, 2048 by default; past it spans are dropped), and the export happens
in the processor's thread, so an endpoint that is down or slow never slows or fails a call.

The endpoint and the headers can hold credentials: they are never logged (a problem names the
variable, never its value), and their secret parts are masked in every log record. The SDK's own
export messages (one per failed batch, and they quote the endpoint) are kept out of the logs; the
bridge logs one warning when exporting starts to fail and one line when it works again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio
from bridge_core import tracing
from bridge_core.redaction import secrets_in_value

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._logging import also_mask
from mcp_code_execution_mode.settings import SettingsError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

__all__ = ["SHUTDOWN_TIMEOUT", "TraceExport", "exporting_traces", "trace_export_from_env"]

logger = logging.getLogger(__name__)

SERVICE_NAME = "mcp-code-execution-mode"
"""``service.name`` of the spans unless ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``)
names another."""
SHUTDOWN_TIMEOUT = 1.0
"""Seconds the bridge waits at exit for the spans still queued to be exported. A collector that
answers takes a batch in milliseconds; one that is down must not hold the exit (MCP clients kill
a server about 2 s after closing its stdin)."""

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_HEADERS = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_HEADER_LOGGER = "opentelemetry.util.re"
_SDK_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal", _HEADER_LOGGER)
"""Where the SDK logs each failed export (quoting the endpoint), each dropped span, and a header
entry it cannot parse (quoting it)."""


@dataclass(frozen=True, slots=True)
class TraceExport:
    """Traces are exported; where to is for the SDK to read (the variables), not for us to show."""

    endpoint_variable: str
    """The variable that sets the endpoint (the one named in messages, never its value)."""
    secrets: frozenset[str]
    """The secret parts of the endpoint and headers, masked in every log record."""


def _first(environ: Mapping[str, str], names: Sequence[str]) -> tuple[str, str] | None:
    for name in names:
        if value := environ.get(name, "").strip():
            return name, value
    return None


def trace_export_from_env(environ: Mapping[str, str] | None = None) -> TraceExport | None:
    """The trace export the ``OTEL_*`` variables ask for; None when they set no endpoint.

    Raises :class:`SettingsError` naming the variable (never its value) when they ask for what
    the bridge does not do: another exporter or protocol, or an endpoint that is no http(s) URL.
    """
    environ = os.environ if environ is None else environ
    endpoint = _first(environ, _ENDPOINTS)
    if endpoint is None or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = {e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",")}
    exporters.discard("")
    if exporters == {"none"}:
        return None
    if exporters - {"otlp"}:
        raise SettingsError(
            "OTEL_TRACES_EXPORTER: the bridge exports traces over OTLP only; set it to otlp "
            "(or none to turn traces off), or remove it",
            names=("OTEL_TRACES_EXPORTER",),
        )
    if (protocol := _first(environ, _PROTOCOLS)) and protocol[1] != "http/protobuf":
        raise SettingsError(
            f"{protocol[0]}={protocol[1]!r}: the bridge exports OTLP over HTTP with protobuf "
            "(http/protobuf, a collector's port 4318); set it to http/protobuf or remove it",
            names=(protocol[0],),
        )
    name, url = endpoint
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise SettingsError(
            f"{name} is not an http:// or https:// URL (e.g. http://localhost:4318); its value "
            "is not repeated here because it may hold credentials",
            names=(name,),
        )
    secrets = set(secrets_in_value(url, marked=False))
    if headers := _first(environ, _HEADERS):
        if bad := _unparsable_headers(headers[1]):
            raise SettingsError(
                f"{headers[0]}: {bad} of its entries are not name=value (pairs separated by "
                "commas, values URL-encoded); they are not repeated here because they may hold "
                "credentials",
                names=(headers[0],),
            )
        for pair in headers[1].split(","):
            _, _, value = pair.partition("=")
            for form in (value.strip(), unquote(value.strip())):
                secrets |= secrets_in_value(form, marked=True)  # headers carry the credentials
    return TraceExport(name, frozenset(secrets))


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _unparsable_headers(value: str) -> int:
    """How many entries of a headers variable the SDK's own parser would drop. It logs each one
    verbatim (a credential, maybe): here its messages are counted, never shown."""
    from opentelemetry.util.re import parse_env_headers  # the API's: imported with the MCP SDK

    header_logger = logging.getLogger(_HEADER_LOGGER)
    counter, propagate = _Count(), header_logger.propagate
    header_logger.addHandler(counter)
    header_logger.propagate = False
    try:
        parse_env_headers(value, liberal=True)
    finally:
        header_logger.removeHandler(counter)
        header_logger.propagate = propagate
    return counter.count


class _ExportProblems(logging.Handler):
    """Takes the SDK's export log records instead of the bridge's log: keeps the kind of the
    first failure of an export (an HTTP status, or an exception type name), never its text (its
    retries end in errors of their own, such as a ValueError for a spent timeout)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING or self.last is not None:
            return
        if record.exc_info and record.exc_info[0] is not None:
            self.last = record.exc_info[0].__name__
            return
        for arg in record.args if isinstance(record.args, tuple) else ():
            if isinstance(arg, int) and not isinstance(arg, bool) and 100 <= arg < 600:
                self.last = f"HTTP {arg}"
                return
            if isinstance(arg, BaseException):
                self.last = type(arg).__name__
                return


def _export_failures_logged_once(export: TraceExport, problems: _ExportProblems) -> Any:
    """The SDK's OTLP exporter behind a wrapper that logs an outage once (and its end)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class OnceLoggingExporter(SpanExporter):
        def __init__(self) -> None:
            self.inner = OTLPSpanExporter()
            self.failing = False
            self.dropped = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            problems.last = None
            try:
                result = self.inner.export(spans)
            except Exception as exc:  # the processor would log it per batch
                problems.last = type(exc).__name__
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS:
                if self.failing:
                    self.failing = False
                    logger.warning(
                        "traces: the OTLP endpoint (%s) takes spans again; %d span(s) were "
                        "dropped while it did not",
                        export.endpoint_variable,
                        self.dropped,
                    )
                    self.dropped = 0
                return result
            self.dropped += len(spans)
            if not self.failing:
                self.failing = True
                logger.warning(
                    "traces: the OTLP endpoint (%s) did not take %d span(s) (%s); spans are "
                    "dropped until it does, and run_python calls go on as usual (said once, "
                    "until it works again)",
                    export.endpoint_variable,
                    len(spans),
                    problems.last or "export failed",
                )
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

    return OnceLoggingExporter()


def _start(export: TraceExport) -> tuple[TracerProvider, Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    problems = _ExportProblems()
    for name in _SDK_LOGGERS:
        sdk_logger = logging.getLogger(name)
        sdk_logger.addHandler(problems)
        sdk_logger.propagate = False
    resource = Resource.create({})  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(
            Resource({"service.name": SERVICE_NAME, "service.version": __version__})
        )
    exporter = _export_failures_logged_once(export, problems)
    # Shut down by us, within SHUTDOWN_TIMEOUT: the SDK's own exit hook would wait up to 30 s.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, exporter


async def _shut_down(provider: TracerProvider, exporter: Any) -> None:
    """Export what is queued, waiting at most :data:`SHUTDOWN_TIMEOUT`."""
    # The SDK's shutdown joins its export thread for up to 30 s: it runs in a daemon thread of
    # its own, which the process does not wait for at exit.
    done = threading.Thread(target=provider.shutdown, name="trace-export-shutdown", daemon=True)
    done.start()
    await anyio.to_thread.run_sync(done.join, SHUTDOWN_TIMEOUT)
    if done.is_alive():
        exporter.shutdown()  # ends the exporter's retries
        logger.warning(
            "traces: the spans still queued were not exported within %g s of shutdown and are "
            "dropped",
            SHUTDOWN_TIMEOUT,
        )


@asynccontextmanager
async def exporting_traces(export: TraceExport | None) -> AsyncIterator[None]:
    """Export the bridge's spans while in the block (nothing at all when ``export`` is None);
    on the way out, flush what is queued within :data:`SHUTDOWN_TIMEOUT`.

    Entered by the server's lifespan, not around the process: ``serve --http`` ends by raising
    again the signal that stopped it, so nothing after its lifespan runs.
    """
    if export is None:
        yield
        return
    also_mask(export.secrets)
    provider, exporter = await anyio.to_thread.run_sync(_start, export)  # imports the SDK
    tracing.enable(provider)
    logger.info("traces: exported over OTLP/HTTP (endpoint from %s)", export.endpoint_variable)
    try:
        yield
    finally:
        tracing.disable()
        with anyio.CancelScope(shield=True):
            await _shut_down(provider, exporter)

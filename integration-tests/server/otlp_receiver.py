"""A real OTLP/HTTP trace receiver for tests: the wire format decoded by the official
``opentelemetry-proto`` package (``ExportTraceServiceRequest``), served on loopback.

It keeps every request's raw body (to prove what never reaches a collector) and every span, and
answers as a collector does (``ExportTraceServiceResponse``, protobuf). ``hold=True`` makes it a
collector that takes the request and never answers (until :meth:`OtlpReceiver.release`).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

MAX_BODY = 16 * 1024 * 1024


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    kind: int
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any]


@dataclass
class OtlpReceiver:
    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    """Set once a request is being held (``hold=True``)."""
    _release: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def release(self) -> None:
        self._release.set()

    def take(self, body: bytes, headers: dict[str, str]) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(_received(span, resource))
        with self._changed:
            self.bodies.append(body)
            self.headers.append(headers)
            self.spans.extend(spans)
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout: float) -> bool:
        """Block until ``found(spans)`` (True) or ``timeout`` (False); for a worker thread."""
        with self._changed:
            return self._changed.wait_for(lambda: found(self.spans), timeout)


def _received(span: Span, resource: dict[str, Any]) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        kind=span.kind,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        attributes={a.key: _value(a.value) for a in span.attributes},
        status_code=span.status.code,
        resource=resource,
    )


@contextmanager
def otlp_receiver(*, hold: bool = False, port: int = 0) -> Iterator[OtlpReceiver]:
    """Serve ``POST /v1/traces`` on 127.0.0.1 (``port``, or a free one) while in the block."""
    receiver = OtlpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/v1/traces" or not 0 < length <= MAX_BODY:
                self.send_error(404 if self.path != "/v1/traces" else 400)
                return
            body = self.rfile.read(length)
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if hold:
                receiver.held.set()
                receiver._release.wait(120)
                return  # no answer: the connection is closed
            receiver.take(body, {k.lower(): v for k, v in self.headers.items()})
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release()
        server.shutdown()
        server.server_close()
        thread.join(10)

"""A minimal OTLP/HTTP traces receiver on 127.0.0.1 for tests: takes ``POST /v1/traces``
(binary protobuf, as the OpenTelemetry SDK's OTLP/HTTP exporter sends it, gzip or not), decodes it
with the protocol's own messages (``opentelemetry-proto``) and keeps each span, with its resource's
attributes, as a plain dict."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(value: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` (as `MessageToDict` gives it) as a Python value."""
    (kind, inner), = value.items()
    if kind == "arrayValue":
        return [_value(v) for v in inner.get("values", [])]
    if kind == "intValue":
        return int(inner)
    return inner


def attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {a["key"]: _value(a["value"]) for a in items}


class OTLPReceiver:
    """`spans`: every span received (name, kind, ids, attributes, status, events, resource);
    `requests`: the paths and headers of the exports; `received` is set at each export."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.received = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                export = ExportTraceServiceRequest.FromString(body)
                receiver.requests.append({"path": self.path, "headers": dict(self.headers)})
                for resource_spans in MessageToDict(export).get("resourceSpans", []):
                    resource = attributes(resource_spans.get("resource", {}).get("attributes", []))
                    for scope in resource_spans.get("scopeSpans", []):
                        for span in scope.get("spans", []):
                            span["attributes"] = attributes(span.get("attributes", []))
                            span["resource"] = resource
                            receiver.spans.append(span)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                receiver.received.set()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "OTLPReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

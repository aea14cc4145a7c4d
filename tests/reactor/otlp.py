"""A tiny OTLP/HTTP trace receiver for the tests: decodes the protobuf the exporter posts."""

from __future__ import annotations

from typing import Any


class Receiver:
    """A tiny OTLP/HTTP trace receiver on 127.0.0.1: decodes what the exporter posts."""

    def __init__(self) -> None:
        import http.server
        import threading

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        received = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                received.requests.append(message)
                received.paths.append(self.path)
                received.content_types.append(self.headers["Content-Type"])
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def spans(self) -> list[Any]:
        """Every span received so far (``opentelemetry.proto`` ``Span`` messages)."""
        return [
            span
            for request in list(self.requests)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

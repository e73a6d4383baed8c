"""A stoppable /metrics HTTP server for one registry (prometheus_client's, plus close())."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, addr: str, port: int) -> None:
        self._httpd, self._thread = start_http_server(port, addr, registry)
        self.port: int = self._httpd.server_address[1]

    def close(self) -> None:
        """Stop answering: later connections are refused, like a process that exited."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

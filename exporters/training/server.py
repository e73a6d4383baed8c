"""A stoppable /metrics HTTP server for one registry (prometheus_client's, plus close()), which
also knows when it was last scraped (so a finishing process can wait for one more scrape)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector

MAX_FINAL_WAIT_S = 120.0


class _ScrapeClock(Collector):
    """Yields no metric; notes each collection (a scrape, or exposition())."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0
        self.times: list[float] = []  # monotonic times of the last two scrapes

    def collect(self) -> Iterator:
        with self.cond:
            self.count += 1
            self.times = [*self.times[-1:], time.monotonic()]
            self.cond.notify_all()
        return iter(())

    def describe(self) -> list:
        return []


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, addr: str, port: int) -> None:
        self._clock = _ScrapeClock()
        registry.register(self._clock)
        self._registry = registry
        self._httpd, self._thread = start_http_server(port, addr, registry)
        self.port: int = self._httpd.server_address[1]

    def wait_for_next_scrape(self, timeout: float | None = None) -> bool:
        """Block until the next collection after now; False on timeout. Without a timeout,
        twice the last interval between scrapes plus 1 s (capped); never scraped: no wait."""
        clock = self._clock
        with clock.cond:
            if timeout is None:
                if len(clock.times) < 2:
                    return False
                timeout = min(2 * (clock.times[1] - clock.times[0]) + 1.0, MAX_FINAL_WAIT_S)
            seen = clock.count
            return clock.cond.wait_for(lambda: clock.count > seen, timeout=timeout)

    def close(self) -> None:
        """Stop answering: later connections are refused, like a process that exited."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._registry.unregister(self._clock)

"""The postmortem's data access: times as users write them, and Prometheus's HTTP API.

Stdlib urllib with bounded timeouts; every query is logged for the draft's Data appendix.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime

from trainsignals.generator.spec.durations import format_duration

DEFAULT_PROMETHEUS = "http://127.0.0.1:9090"
POINTS = 200  # query_range resolution: about this many points per series
MIN_STEP = 0.05  # seconds; Prometheus accepts fractional steps (time-compressed tests)


# --- time -------------------------------------------------------------------------------------
def parse_when(value: str) -> float:
    """Unix seconds of `value`: a number of seconds, or RFC 3339 (a naive time means UTC)."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{value!r} is not a time; write RFC 3339 (2026-01-31T14:05:00Z) or unix seconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def iso(ts: float | None) -> str:
    if ts is None:
        return "-"
    moment = datetime.fromtimestamp(ts, UTC)
    # Sub-second precision only matters for time-compressed test runs.
    spec = "milliseconds" if ts != int(ts) and moment.microsecond >= 1000 else "seconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def human(seconds: float | None) -> str:
    """A readable duration; sub-minute values keep a decimal (compressed test runs)."""
    if seconds is None:
        return "-"
    if seconds < 0:
        return "-" + human(-seconds)
    if seconds < 1:
        return f"{seconds:.2g}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return format_duration(seconds)


def step_for(start: float, end: float, points: int = POINTS) -> float:
    """query_range step giving about `points` points over [start, end]."""
    raw = max((end - start) / points, MIN_STEP)
    return round(raw, 3) if raw < 10 else float(math.ceil(raw))


# --- Prometheus HTTP API ----------------------------------------------------------------------
@dataclass
class Prometheus:
    """A minimal client that also records every query it ran (for the Data appendix)."""

    url: str = DEFAULT_PROMETHEUS
    timeout: float = 10.0
    log: list[tuple[str, str]] = field(default_factory=list)  # (what, PromQL)

    def get(self, path: str, **params: str) -> dict:
        """The `data` of a GET on the HTTP API; a clear RuntimeError where it fails."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.url.rstrip('/')}{path}{query}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:  # 400/422 carry Prometheus's own error text
            try:
                detail = json.load(exc).get("error", "")
            except ValueError:
                detail = ""
            raise RuntimeError(f"{url}: HTTP {exc.code} {detail}".strip()) from None
        except OSError as exc:
            raise RuntimeError(f"cannot reach Prometheus at {self.url}: {exc}") from None
        if body.get("status") != "success":
            raise RuntimeError(f"{url}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str, at: float) -> list[dict]:
        """Instant query at `at` (unix seconds): the result vector."""
        self.log.append((f"query at {iso(at)}", expr))
        return self.get("/api/v1/query", query=expr, time=f"{at:.3f}")["result"]

    def vector(self, expr: str) -> list[dict]:
        """Instant query now: the result vector (not logged: readiness asks many)."""
        return self.get("/api/v1/query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        self.log.append((f"query_range step={step:g}s", expr))
        data = self.get(
            "/api/v1/query_range",
            query=expr,
            start=f"{start:.3f}",
            end=f"{end:.3f}",
            step=f"{step:g}",
        )
        return data["result"]


def points(result: list[dict]) -> list[tuple[float, float]]:
    """The first series of a matrix result as (time, value), NaN/Inf dropped."""
    if not result:
        return []
    out = [(float(t), float(v)) for t, v in result[0]["values"]]
    return [(t, v) for t, v in out if math.isfinite(v)]

"""`trainsignals postmortem`: a blameless postmortem draft for one job and one time window.

Everything comes from Prometheus's HTTP API (stdlib urllib, bounded timeouts):
- the incident timeline from `ALERTS{training_job="J"}` (query_range, ~200 points): for each
  alert name + labels the first pending, first firing and resolved times;
- the golden signals (the recorded series of generator/recording.py) before, during and after
  the window, drawn with matplotlib (postmortem_plot.py): UTC time axis, units, thresholds,
  alert firing bands and the onset marked;
- impact figures: longest time without step progress, tokens not processed vs the spec's
  floor, GPU-hours affected.

The draft is rendered with jinja2 from generator/templates/postmortem.md.j2. It fills what the
data can fill and leaves prompts for the humans where judgement is needed.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import click
import jinja2

from trainsignals import __version__
from trainsignals.cli_options import jobs_option
from trainsignals.generator.durations import format_duration
from trainsignals.generator.spec import JobSpec
from trainsignals.goodput import LABELS as BADPUT_LABELS
from trainsignals.goodput import ROWS as BADPUT_ROWS
from trainsignals.goodput import Breakdown, measure

TEMPLATES = Path(__file__).resolve().parent.parent / "generator" / "templates"
DEFAULT_PROMETHEUS = "http://127.0.0.1:9090"
POINTS = 200  # query_range resolution: about this many points per series
MIN_STEP = 0.05  # seconds; Prometheus accepts fractional steps (time-compressed tests)
# ALERTS labels that describe the sample, not the alert instance.
STATE_LABELS = {"__name__", "alertstate"}


@dataclass(frozen=True)
class Signal:
    key: str  # file name of the plot
    title: str
    record: str  # recording rule (generator/recording.py)
    unit: str


SIGNALS: tuple[Signal, ...] = (
    Signal("tokens", "Throughput (tokens/s)", "job:trainsignals_tokens:rate5m", "tokens/s"),
    Signal(
        "step_time_p95",
        "Step time p95 (s)",
        "job:trainsignals_step_duration_seconds:p95_5m",
        "s",
    ),
    Signal("mfu", "MFU", "job:trainsignals_mfu:ratio_rate5m", "ratio"),
    Signal("loss", "Loss", "job:trainsignals_loss:avg", ""),
    Signal("data_wait", "Data-wait share", "job:trainsignals_data_wait:ratio_rate5m", "ratio"),
)
LAST_STEP_AGE = "job:trainsignals_last_step:age_seconds"


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

    def _get(self, path: str, params: dict[str, str]) -> dict:
        url = f"{self.url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
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
        return self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        self.log.append((f"query_range step={step:g}s", expr))
        data = self._get(
            "/api/v1/query_range",
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )
        return data["result"]


def points(result: list[dict]) -> list[tuple[float, float]]:
    """The first series of a matrix result as (time, value), NaN/Inf dropped."""
    if not result:
        return []
    out = [(float(t), float(v)) for t, v in result[0]["values"]]
    return [(t, v) for t, v in out if math.isfinite(v)]


# --- timeline ---------------------------------------------------------------------------------
def runs(times: Sequence[float], step: float) -> list[tuple[float, float]]:
    """Consecutive sample times grouped into (first, last) runs; a missing step is a gap."""
    out: list[tuple[float, float]] = []
    for t in sorted(times):
        if out and t - out[-1][1] <= 1.5 * step:
            out[-1] = (out[-1][0], t)
        else:
            out.append((t, t))
    return out


@dataclass
class AlertEvent:
    """One alert instance (alert name + labels) within the window."""

    alertname: str
    labels: dict[str, str]  # without alertname, alertstate
    severity: str
    first_pending: float | None
    first_firing: float | None
    resolved: float | None  # None: still pending/firing at the end of the window
    episodes: int  # firing runs; more than one means it resolved and fired again
    active_at_start: bool  # already pending/firing at the window's first sample

    @property
    def sort_key(self) -> tuple[float, str]:
        first = self.first_pending if self.first_pending is not None else self.first_firing
        return (first or 0.0, self.alertname)

    @property
    def label_text(self) -> str:
        skip = {"severity", "team", "training_job", "job"}
        shown = {k: v for k, v in sorted(self.labels.items()) if k not in skip}
        return ", ".join(f"{k}={v}" for k, v in shown.items())


def build_timeline(result: list[dict], start: float, end: float, step: float) -> list[AlertEvent]:
    """Alert events from a query_range result of ALERTS (both alertstates), sorted by onset.

    A sample at query time t means the alert was in that state at some evaluation in
    (t - step, t]; Prometheus writes a stale marker when an alert resolves, so a run of samples
    ends within a step of the resolution. `resolved` is the first query time without it.
    """
    grouped: dict[tuple, dict[str, list[float]]] = {}
    labels_of: dict[tuple, dict[str, str]] = {}
    for series in result:
        metric = series["metric"]
        labels = {k: v for k, v in metric.items() if k not in STATE_LABELS}
        key = tuple(sorted(labels.items()))
        labels_of[key] = labels
        state = metric.get("alertstate", "firing")
        times = [float(t) for t, _ in series["values"]]
        grouped.setdefault(key, {"pending": [], "firing": []})[state].extend(times)
    events = []
    for key, states in grouped.items():
        labels = dict(labels_of[key])
        alertname = labels.pop("alertname", "?")
        all_runs = runs(states["pending"] + states["firing"], step)
        last = all_runs[-1][1]
        resolved = None if last >= end - 0.5 * step else min(last + step, end)
        events.append(
            AlertEvent(
                alertname=alertname,
                labels=labels,
                severity=labels.get("severity", "?"),
                first_pending=min(states["pending"], default=None),
                first_firing=min(states["firing"], default=None),
                resolved=resolved,
                episodes=len(runs(states["firing"], step)),
                active_at_start=all_runs[0][0] <= start + 0.5 * step,
            )
        )
    return sorted(events, key=lambda e: e.sort_key)


@dataclass(frozen=True)
class Detection:
    earliest_sign: float  # first pending of any alert, or the window's start
    first_page: AlertEvent | None
    time_to_page: float | None
    late: list[tuple[AlertEvent, float]]  # fired after the first page: (event, seconds later)
    tickets: list[AlertEvent]  # fired as tickets only


def detection(events: list[AlertEvent], start: float) -> Detection:
    pendings = [e.first_pending for e in events if e.first_pending is not None]
    earliest = min(pendings, default=start)
    pages = [e for e in events if e.severity == "page" and e.first_firing is not None]
    first_page = min(pages, key=lambda e: e.first_firing or 0.0, default=None)
    fired = [e for e in events if e.first_firing is not None]
    late = []
    if first_page is not None and first_page.first_firing is not None:
        late = [
            (e, e.first_firing - first_page.first_firing)
            for e in fired
            if e is not first_page and e.first_firing is not None
        ]
    return Detection(
        earliest_sign=earliest,
        first_page=first_page,
        time_to_page=(
            first_page.first_firing - earliest
            if first_page is not None and first_page.first_firing is not None
            else None
        ),
        late=late,
        tickets=[e for e in fired if e.severity == "ticket"],
    )


# --- the report -------------------------------------------------------------------------------
@dataclass
class SignalView:
    signal: Signal
    query: str
    plot: str  # path relative to the Markdown file
    before: float | None
    during: float | None
    after: float | None
    low: float | None
    high: float | None


def _mean(series: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    vals = [v for t, v in series if lo <= t <= hi]
    return sum(vals) / len(vals) if vals else None


def fmt(value: float | None) -> str:
    if value is None:
        return "no data"
    if value == 0 or 0.01 <= abs(value) < 1e5:
        return f"{value:.3g}" if abs(value) < 1 else f"{value:,.1f}"
    return f"{value:.3g}"


@dataclass
class Impact:
    duration: float
    gpus: int | None
    gpu_hours: float | None
    max_step_age: float | None
    floor: float | None
    tokens_lost: float | None
    seconds_below_floor: float
    seconds_without_data: float


def impact(
    spec: JobSpec | None,
    tokens: list[tuple[float, float]],
    step_age: list[tuple[float, float]],
    start: float,
    end: float,
    step: float,
) -> Impact:
    duration = end - start
    gpus = spec.shape.gpus if spec else None
    floor = spec.tokens_per_second_floor if spec else None
    inside = [(t, v) for t, v in tokens if start <= t <= end]
    # Each sample stands for one step of time; gaps are reported, not guessed.
    below = [(t, v) for t, v in inside if floor is not None and v < floor]
    lost = sum((floor - v) * step for _, v in below) if floor is not None else None
    covered = len(inside) * step
    ages = [v for t, v in step_age if start <= t <= end]
    return Impact(
        duration=duration,
        gpus=gpus,
        gpu_hours=gpus * duration / 3600 if gpus else None,
        max_step_age=max(ages) if ages else None,
        floor=floor,
        tokens_lost=lost,
        seconds_below_floor=len(below) * step,
        seconds_without_data=max(0.0, duration - covered),
    )


@dataclass
class Postmortem:
    job: str
    start: float
    end: float
    spec: JobSpec | None
    events: list[AlertEvent]
    detection: Detection
    impact: Impact
    signals: list[SignalView]
    queries: list[tuple[str, str]]
    prometheus: str
    step: float
    plot_step: float
    badput: Breakdown | None = None  # goodput accounting over the window (trainsignals.goodput)

    @property
    def fired(self) -> list[AlertEvent]:
        return [e for e in self.events if e.first_firing is not None]

    @property
    def pending_only(self) -> list[AlertEvent]:
        return [e for e in self.events if e.first_firing is None]

    def runbook(self, alertname: str) -> str:
        base = self.spec.links.runbook_base_url if self.spec else "runbooks"
        return f"{base}/{alertname}.md"


def default_out(job: str, start: float) -> Path:
    return Path("postmortems") / f"{job}-{datetime.fromtimestamp(start, UTC):%Y-%m-%d}.md"


def threshold(spec: JobSpec | None, key: str) -> tuple[float | None, str]:
    """The spec's bound the alerts use for this signal, and its legend label."""
    if spec is None:
        return None, ""
    if key == "tokens":
        return spec.tokens_per_second_floor, "throughput floor"
    if key == "step_time_p95":
        return spec.objectives.step_time_max_seconds, "step-time bound"
    if key == "mfu":
        return spec.objectives.mfu_min_ratio, "MFU floor"
    if key == "data_wait":
        return spec.objectives.data_wait_max_ratio, "data-wait ceiling"
    return None, ""


def collect(
    prom: Prometheus, job: str, start: float, end: float, spec: JobSpec | None, plot_dir: Path
) -> Postmortem:
    """Query Prometheus, write the plots into `plot_dir`, and return what the template needs."""
    # matplotlib costs ~0.4 s to import: only the postmortem command pays it.
    from trainsignals.postmortem_plot import PlotSpec, firing_bands, plot

    if end <= start:
        raise ValueError("--to must be after --from")
    selector = f'{{training_job="{job}"}}'
    step = step_for(start, end)
    alerts = prom.query_range(f"ALERTS{selector}", start, end, step)
    events = build_timeline(alerts, start, end, step)

    # Before / during / after: half the window's length on each side, at most up to now.
    pad = 0.5 * (end - start)
    p0, p1 = start - pad, end + pad
    plot_step = step_for(p0, p1)
    bands = firing_bands(events, p1)
    onset = detection(events, start).earliest_sign
    plot_dir.mkdir(parents=True, exist_ok=True)
    views = []
    tokens: list[tuple[float, float]] = []
    for signal in SIGNALS:
        expr = f"{signal.record}{selector}"
        series = points(prom.query_range(expr, p0, p1, plot_step))
        if signal.key == "tokens":
            tokens = series
        png = plot_dir / f"{signal.key}.png"
        look = PlotSpec(signal.title, signal.unit, *threshold(spec, signal.key))
        png.write_bytes(plot(series, p0, p1, (start, end), bands, plot_step, look, onset))
        values = [v for _, v in series]
        views.append(
            SignalView(
                signal,
                expr,
                f"{plot_dir.name}/{png.name}",
                _mean(series, p0, start - 1e-9),
                _mean(series, start, end),
                _mean(series, end + 1e-9, p1),
                min(values, default=None),
                max(values, default=None),
            )
        )
    step_age = points(prom.query_range(f"{LAST_STEP_AGE}{selector}", start, end, step))
    badput = None
    if spec is not None:
        try:  # the incident's badput: the goodput command's computation over the window
            badput = measure(prom, spec, start, end)
        except RuntimeError:
            badput = None  # no time accounting in the window (older instrumentation)
    return Postmortem(
        job=job,
        start=start,
        end=end,
        spec=spec,
        events=events,
        detection=detection(events, start),
        impact=impact(spec, tokens, step_age, start, end, plot_step),
        signals=views,
        queries=list(prom.log),
        prometheus=prom.url,
        step=step,
        plot_step=plot_step,
        badput=badput,
    )


def render(pm: Postmortem) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Markdown, not HTML
    )
    env.filters |= {"iso": iso, "human": human, "fmt": fmt}
    template = env.get_template("postmortem.md.j2")
    return template.render(
        pm=pm, version=__version__, cell=_cell, badput_rows=BADPUT_ROWS, badput_labels=BADPUT_LABELS
    )


def _cell(value: object) -> str:
    # A pipe would end the Markdown table cell.
    return str(value).replace("|", "\\|").replace("\n", " ")


def write_postmortem(
    job: str,
    start: float,
    end: float,
    out: Path | None = None,
    spec: JobSpec | None = None,
    prometheus: str = DEFAULT_PROMETHEUS,
    timeout: float = 10.0,
) -> tuple[Path, Postmortem]:
    """Write the draft (and its plots in a folder named after it); return its path."""
    out = out or default_out(job, start)
    prom = Prometheus(prometheus, timeout)
    pm = collect(prom, job, start, end, spec, out.with_suffix(""))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(pm), encoding="utf-8")
    return out, pm


# --- command ----------------------------------------------------------------------------------
def _find_spec(jobs_dir: Path, job: str) -> JobSpec | None:
    from trainsignals.generator.loader import SpecError, load_specs, spec_files

    paths = spec_files(jobs_dir) if jobs_dir.is_dir() else []
    try:
        specs = load_specs(paths) if paths else []
    except SpecError as exc:
        raise click.ClickException("\n".join(exc.problems)) from None
    return next((s for s in specs if s.name == job), None)


def _time_arg(_ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_when(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


@click.command("postmortem")
@click.option("--job", required=True, help="Training job name (the training_job label).")
@click.option("--from", "start", required=True, callback=_time_arg, help="RFC 3339 or unix s.")
@click.option("--to", "end", required=True, callback=_time_arg, help="RFC 3339 or unix s.")
@click.option("--prometheus", default=DEFAULT_PROMETHEUS, show_default=True, help="Base URL.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Markdown file [default: postmortems/<job>-<from date>.md]; plots go in a folder "
    "of the same name beside it.",
)
@jobs_option("Folder of job specs (owners, team, rotation, shape, floors).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Per query, s.")
def postmortem_command(
    job: str,
    start: float,
    end: float,
    prometheus: str,
    out: Path | None,
    jobs_dir: Path,
    timeout: float,
) -> None:
    """Draft a blameless postmortem for JOB between --from and --to from Prometheus data."""
    if end <= start:
        raise click.BadParameter("must be after --from", param_hint="--to")
    spec = _find_spec(jobs_dir, job)
    if spec is None:
        click.echo(
            f"note: no spec for {job!r} in {jobs_dir}/; owners and floors left blank", err=True
        )
    try:
        path, pm = write_postmortem(job, start, end, out, spec, prometheus, timeout)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    fired = ", ".join(sorted({e.alertname for e in pm.fired})) or "no alerts fired"
    click.echo(f"wrote {path} ({len(pm.signals)} plots in {path.with_suffix('')}/; {fired})")

"""`trainsignals postmortem`: a blameless postmortem draft for one job and one time window.

Everything comes from Prometheus's HTTP API (stdlib urllib, bounded timeouts;
../query.py), and what Alertmanager suppressed from its inhibition rules and silences
(delivery.py):
- the incident timeline from `ALERTS{training_job="J"}` (query_range, ~200 points): for each
  alert name + labels the first pending, first firing and resolved times
  (timeline.py); pages are the page alerts Alertmanager let through;
- the golden signals (signals.py: the recorded series of
  generator/signals/recording.py) before, during and after the window, up to the newest sample
  and never past now, drawn with matplotlib (plot.py): UTC time axis, units,
  thresholds, each alert's firing band and the onset marked and named;
- impact figures (impact.py): longest time without step progress, tokens not
  processed vs the spec's floor, GPU-hours affected.

The draft is rendered with jinja2 from generator/templates/postmortem.md.j2. It fills what the
data can fill and leaves prompts for the humans where judgement is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import click
import jinja2

from trainsignals import __version__
from trainsignals.generator.spec.job import JobSpec
from trainsignals.jobs import find_job, jobs_option
from trainsignals.ops.goodput import LABELS as BADPUT_LABELS
from trainsignals.ops.goodput import ROWS as BADPUT_ROWS
from trainsignals.ops.goodput import Breakdown, measure
from trainsignals.ops.postmortem.delivery import Suppression, load_suppression, mark_delivery
from trainsignals.ops.postmortem.impact import Impact, impact
from trainsignals.ops.postmortem.signals import (
    GPU_COUNT,
    LAST_STEP_AGE,
    SIGNALS,
    SignalView,
    threshold,
)
from trainsignals.ops.postmortem.timeline import (
    AlertEvent,
    Detection,
    build_timeline,
    detection,
    onset_name,
)
from trainsignals.ops.query import (
    DEFAULT_PROMETHEUS,
    Prometheus,
    human,
    iso,
    parse_when,
    points,
    step_for,
)

# Where the package's templates are installed (a path from this file breaks in a wheel, where
# generator/ is trainsignals/generator/).
TEMPLATES = Path(str(files("trainsignals.generator") / "templates"))


# --- the report -------------------------------------------------------------------------------


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
    badput: Breakdown | None = (
        None  # goodput accounting over the window (trainsignals.ops.goodput)
    )
    suppression: str | None = None  # where Alertmanager's inhibitions and silences came from
    drawn: float = 0.0  # when the draft was made: no data is read past it

    @property
    def pages(self) -> list[AlertEvent]:
        """Pages that reached a pager (Alertmanager suppressed none of their firing)."""
        return [e for e in self.events if e.paged]

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


def newest_sample(prom: Prometheus, expr: str, at: float) -> float | None:
    """Time of the newest sample of `expr` at or before `at`: Prometheus answers a query with
    the last sample for 5 minutes after it, which past it would be invented data."""
    result = prom.query(f"max(timestamp({expr}))", at)
    return float(result[0]["value"][1]) if result else None


def collect(
    prom: Prometheus,
    job: str,
    start: float,
    end: float,
    spec: JobSpec | None,
    plot_dir: Path,
    suppression: Suppression | None = None,
    now: float | None = None,
) -> Postmortem:
    """Query Prometheus, write the plots into `plot_dir`, and return what the template needs.

    `suppression`: Alertmanager's inhibition rules and silences, to tell the pages that
    reached a pager from those it suppressed. Nothing is queried past `now` (the time the
    draft is made): Prometheus would repeat the last sample there.
    """
    # matplotlib costs ~0.4 s to import: only the postmortem command pays it.
    from trainsignals.ops.postmortem.plot import PlotSpec, firing_bands, plot

    if end <= start:
        raise ValueError("--to must be after --from")
    drawn = time.time() if now is None else now
    selector = f'{{training_job="{job}"}}'
    step = step_for(start, end)
    alerts = prom.query_range(f"ALERTS{selector}", start, min(end, drawn), step)
    events = mark_delivery(build_timeline(alerts, start, end, step), suppression)
    found = detection(events, start)

    # Before / during / after: half the window's length on each side, at most up to now.
    pad = 0.5 * (end - start)
    p0, p1 = start - pad, min(end + pad, drawn)
    plot_step = step_for(p0, p1)
    bands = firing_bands(events, p1)
    onset_alert = onset_name(events, found.earliest_sign, step)
    plot_dir.mkdir(parents=True, exist_ok=True)
    views = []
    tokens: list[tuple[float, float]] = []
    for signal in SIGNALS:
        expr = f"{signal.record}{selector}"
        series = points(prom.query_range(expr, p0, p1, plot_step))
        newest = newest_sample(prom, expr, p1)
        series = [(t, v) for t, v in series if newest is not None and t <= newest + 1e-6]
        if signal.key == "tokens":
            tokens = series
        png = plot_dir / f"{signal.key}.png"
        look = PlotSpec(signal.title, signal.unit, *threshold(spec, signal.key))
        onset = (found.earliest_sign, onset_alert) if onset_alert else None
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
                newest,
            )
        )
    step_age = points(prom.query_range(f"{LAST_STEP_AGE}{selector}", start, min(end, drawn), step))
    # GPU-hours count the GPUs that ran, not the spec's shape (GPU_COUNT in signals.py).
    gpu_counts = points(prom.query_range(f"sum({GPU_COUNT}{selector})", p0, min(end, drawn), step))
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
        detection=found,
        impact=impact(spec, tokens, step_age, start, end, plot_step, gpu_counts),
        signals=views,
        queries=list(prom.log),
        prometheus=prom.url,
        step=step,
        plot_step=plot_step,
        badput=badput,
        suppression=suppression.source if suppression else None,
        drawn=drawn,
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
    suppression: Suppression | None = None,
) -> tuple[Path, Postmortem]:
    """Write the draft (and its plots in a folder named after it); return its path."""
    out = out or default_out(job, start)
    prom = Prometheus(prometheus, timeout)
    pm = collect(prom, job, start, end, spec, out.with_suffix(""), suppression)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(pm), encoding="utf-8")
    return out, pm


# --- command ----------------------------------------------------------------------------------
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
@click.option(
    "--alertmanager",
    default=None,
    help="Alertmanager base URL: its inhibition rules and silences tell the pages that reached "
    "a pager from those it suppressed [default: the rules of --alertmanager-config].",
)
@click.option(
    "--alertmanager-config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("alerts/alertmanager.yaml"),
    show_default=True,
    help="Alertmanager configuration to read inhibition rules from without --alertmanager.",
)
@jobs_option("Folder of job specs (owners, team, rotation, shape, floors).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Per query, s.")
def postmortem_command(
    job: str,
    start: float,
    end: float,
    prometheus: str,
    out: Path | None,
    alertmanager: str | None,
    alertmanager_config: Path,
    jobs_dir: Path,
    timeout: float,
) -> None:
    """Draft a blameless postmortem for JOB between --from and --to from Prometheus data."""
    if end <= start:
        raise click.BadParameter("must be after --from", param_hint="--to")
    spec = find_job(jobs_dir, job)
    if spec is None:
        click.echo(
            f"note: no spec for {job!r} in {jobs_dir}/; owners and floors left blank", err=True
        )
    try:
        suppression = load_suppression(alertmanager, alertmanager_config, timeout)
        if suppression is None:
            click.echo(
                f"note: no Alertmanager (--alertmanager) and no {alertmanager_config}: pages "
                "are the page alerts that fired, unchecked against inhibitions and silences",
                err=True,
            )
        path, pm = write_postmortem(job, start, end, out, spec, prometheus, timeout, suppression)
    except (RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    fired = ", ".join(sorted({e.alertname for e in pm.fired})) or "no alerts fired"
    pages = ", ".join(sorted({e.alertname for e in pm.pages})) or "none"
    click.echo(
        f"wrote {path} ({len(pm.signals)} plots in {path.with_suffix('')}/; {fired}; "
        f"pages that reached a pager: {pages})"
    )

"""`trainsignals goodput`: a job's goodput (ETTR) and badput breakdown over any time range.

The same definitions as the recording rules (generator/signals/goodput.py), evaluated by Prometheus
as instant queries at the range's end with the range as the window, on the raw counters: any
range works, including ones older than the recording rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click

from trainsignals.generator.signals.goodput import CATEGORIES, PLAIN, window_exprs
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.jobs import find_job, jobs_option
from trainsignals.ops.query import Prometheus, parse_when

ROWS = ("goodput", *CATEGORIES)
LABELS = {"goodput": "goodput (productive)"}


@dataclass(frozen=True)
class Breakdown:
    """Seconds per category (job wall-clock time, averaged over the ranks) in [start, end]."""

    start: float
    end: float
    wall: float
    seconds: dict[str, float]

    def share(self, category: str) -> float:
        return self.seconds[category] / self.wall if self.wall > 0 else 0.0

    @property
    def ettr(self) -> float:
        return self.share("goodput")


def _window(seconds: float) -> str:
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _scalar(result: list[dict]) -> float | None:
    return float(result[0]["value"][1]) if result else None


def measure(prom: object, spec: JobSpec, start: float, end: float) -> Breakdown:
    """Query `prom` (a postmortem.Prometheus) for the breakdown of [start, end]."""
    if end <= start:
        raise ValueError("--to must be after --from")
    length = end - start
    exprs = window_exprs(RuleContext(spec), _window(length), length)
    query = prom.query  # type: ignore[attr-defined]
    activity = {
        r["metric"].get("activity", ""): float(r["value"][1]) for r in query(exprs["activity"], end)
    }
    wall = _scalar(query(exprs["wall"], end))
    if wall is None:
        raise RuntimeError(
            f"no training targets or time accounting of {spec.name!r} in that range "
            "(trainsignals_time_seconds_total, up); is it the right job and Prometheus?"
        )
    steps = _scalar(query(exprs["steps"], end)) or 0.0
    progress = _scalar(query(exprs["progress"], end)) or 0.0
    # The rules' productive share: new high-water steps among the steps completed.
    fraction = min(max(progress / steps, 0.0), 1.0) if steps > 0 else 0.0
    train = activity.get("train", 0.0)
    seconds = {"goodput": train * fraction, "lost_progress": train * (1 - fraction)}
    for category in PLAIN:
        seconds[category] = activity.get(category, 0.0)
    seconds["recovery"] = max(wall - sum(activity.values()), 0.0)
    return Breakdown(start, end, wall, {c: seconds[c] for c in ROWS})


def table(job: str, b: Breakdown) -> str:
    when = " to ".join(
        datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds") for t in (b.start, b.end)
    )
    lines = [
        f"goodput of {job} from {when} ({b.wall / 3600:.2f} h of wall time)",
        f"{'category':<22} {'hours':>9} {'share':>8}",
    ]
    for category in ROWS:
        name = LABELS.get(category, category)
        lines.append(
            f"{name:<22} {b.seconds[category] / 3600:>9.3f} {100 * b.share(category):>7.2f}%"
        )
    total = sum(b.seconds.values())
    lines.append(f"{'total':<22} {total / 3600:>9.3f} {100 * total / b.wall:>7.2f}%")
    lines.append(f"ETTR (effective training time ratio): {100 * b.ettr:.2f}%")
    return "\n".join(lines)


@click.command("goodput")
@click.option("--job", required=True, help="Training job name (its spec is in --jobs).")
@click.option("--from", "start", required=True, help="RFC 3339 or unix seconds.")
@click.option("--to", "end", required=True, help="RFC 3339 or unix seconds.")
@click.option("--prometheus", default="http://127.0.0.1:9090", show_default=True)
@jobs_option("Folder of job specs (the job's selector labels and scrape jobs).")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Per query, s.")
def goodput_command(
    job: str, start: str, end: str, prometheus: str, jobs_dir: Path, timeout: float
) -> None:
    """Print JOB's goodput (ETTR) and badput per category between --from and --to."""
    try:
        t0, t1 = parse_when(start), parse_when(end)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if t1 <= t0:
        raise click.BadParameter("must be after --from", param_hint="--to")
    spec = find_job(jobs_dir, job)
    if spec is None:
        raise click.ClickException(
            f"no spec named {job!r} in {jobs_dir}/: pass --jobs with the folder of job specs"
        )
    try:
        breakdown = measure(Prometheus(prometheus, timeout), spec, t0, t1)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(table(job, breakdown))

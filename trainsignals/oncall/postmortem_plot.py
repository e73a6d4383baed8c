"""The postmortem's signal plots, drawn with matplotlib's Agg backend (no display needed).

One PNG per golden signal: the series against a UTC time axis, the unit on the y axis, the
spec's threshold as a dashed line, the incident window shaded, each firing alert as a strip
along the top (first firing to resolved) in its own colour, named in the legend and at the
strip's start, and the fault onset (the first sign of the alerts that fired) as a vertical
line naming its alert. Deterministic: fixed size and DPI, no timestamp in the PNG metadata.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import matplotlib

matplotlib.use("Agg")  # before pyplot: never a GUI backend

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

SIZE = (640, 240)  # pixels: room for the axes text and a legend below the plot
DPI = 100
SERIES, BAND, ONSET, THRESHOLD = "#1f5ac8", "#ffe4c4", "#6a1b9a", "#555555"
# One colour per alert name, in order of first firing (red first: usually the page).
FIRING = ("#d22828", "#e67e22", "#8e44ad", "#16a085", "#7f8c8d", "#c0392b")


@dataclass(frozen=True)
class PlotSpec:
    title: str
    unit: str  # y-axis label; "" for a dimensionless value
    threshold: float | None = None  # the spec's bound for this signal, drawn dashed
    threshold_label: str = ""


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def plot(
    series: list[tuple[float, float]],
    t0: float,
    t1: float,
    band: tuple[float, float],
    firing: Sequence[tuple[float, float, str]],
    step: float,
    spec: PlotSpec,
    onset: tuple[float, str] | None = None,
    size: tuple[int, int] = SIZE,
) -> bytes:
    """The signal as PNG bytes (see draw)."""
    fig = draw(series, t0, t1, band, firing, step, spec, onset, size)
    try:
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
        return out.getvalue()
    finally:
        plt.close(fig)


def draw(
    series: list[tuple[float, float]],
    t0: float,
    t1: float,
    band: tuple[float, float],
    firing: Sequence[tuple[float, float, str]],
    step: float,
    spec: PlotSpec,
    onset: tuple[float, str] | None = None,
    size: tuple[int, int] = SIZE,
) -> Figure:
    """The figure. `firing`: (first firing, resolved or window end, alert name) per alert
    instance; `onset`: (time, alert name) of the first sign. Close it with plt.close."""
    fig, ax = plt.subplots(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI)
    try:
        ax.axvspan(_utc(band[0]), _utc(band[1]), color=BAND, zorder=0, label="incident window")
        colours: dict[str, str] = {}
        for a, b, name in firing:
            new = name not in colours
            colour = colours.setdefault(name, FIRING[len(colours) % len(FIRING)])
            ax.axvspan(
                _utc(a), _utc(max(b, a + step)), ymin=0.93, ymax=1.0, color=colour, zorder=3,
                label=f"{name} firing" if new else None,
            )  # fmt: skip
            if new and t0 <= a <= t1:
                ax.annotate(
                    name, (_utc(a), 0.92), xycoords=("data", "axes fraction"), fontsize=5,
                    color=colour, va="top", ha="left",
                )  # fmt: skip
        if onset is not None and t0 <= onset[0] <= t1:
            ax.axvline(
                _utc(onset[0]), color=ONSET, linewidth=1.5, label=f"onset: {onset[1]} pending"
            )
        if spec.threshold is not None:
            ax.axhline(
                spec.threshold, color=THRESHOLD, linestyle="--", linewidth=1,
                label=spec.threshold_label or "threshold",
            )  # fmt: skip
        # Gaps where samples are missing: a new segment after a jump of more than 1.5 steps.
        segments: list[list[tuple[float, float]]] = []
        for point in series:
            if segments and point[0] - segments[-1][-1][0] <= 1.5 * step:
                segments[-1].append(point)
            else:
                segments.append([point])
        for i, seg in enumerate(segments):
            ax.plot(
                [_utc(t) for t, _ in seg], [v for _, v in seg], color=SERIES, linewidth=1.3,
                marker="o" if len(seg) == 1 else None, markersize=2,
                label=spec.title if i == 0 else None,
            )  # fmt: skip
        if not series:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="grey")
        ax.set_xlim(_utc(t0), _utc(t1))
        locator = mdates.AutoDateLocator(minticks=3, maxticks=6)
        ax.xaxis.set_major_locator(locator)
        formatter = mdates.ConciseDateFormatter(locator, tz=UTC)
        # Ticks always read as a clock time (a bare "20" could be minutes or seconds).
        formatter.formats = ["%Y", "%b", "%d", "%H:%M", "%H:%M", "%H:%M:%S"]
        ax.xaxis.set_major_formatter(formatter)
        ax.set_xlabel("time (UTC)", fontsize=7)
        ax.set_ylabel(spec.unit or spec.title.lower(), fontsize=7)
        ax.set_title(spec.title, fontsize=8, loc="left")
        ax.tick_params(labelsize=6)
        ax.grid(True, linewidth=0.3, alpha=0.6)
        ax.xaxis.get_offset_text().set_fontsize(6)
        # Below the axes, so it never hides the data.
        ax.legend(
            fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=5, frameon=False
        )
        fig.tight_layout(pad=0.3)
        return fig
    except BaseException:
        plt.close(fig)
        raise


def firing_bands(events: Sequence[object], end: float) -> list[tuple[float, float, str]]:
    """(first firing, resolved or `end`, alert name) of each alert event that fired."""
    bands = []
    for e in events:
        first = getattr(e, "first_firing", None)
        if first is not None:
            resolved = getattr(e, "resolved", None)
            name = getattr(e, "alertname", "alert")
            bands.append((first, resolved if resolved is not None else end, name))
    return sorted(bands)


__all__ = ["PlotSpec", "draw", "firing_bands", "plot"]

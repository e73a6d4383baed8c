"""The postmortem's signal plots, drawn with matplotlib's Agg backend (no display needed).

One PNG per golden signal: the series against a UTC time axis, the unit on the y axis, the
spec's threshold as a dashed line, the incident window shaded, each firing alert in its own
lane above the signal (first firing to resolved, its own colour, named at the lane's left),
and the fault onset (the first sign of the incident) as a vertical line naming its alert.
Deterministic: fixed size and DPI, no timestamp in the PNG metadata.
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
from matplotlib.axes import Axes
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
    instance; `onset`: (time, alert name) of the first sign. Close it with plt.close.

    The alerts get a lane each in a strip above the signal, named by the lane's tick label:
    names written at their strips' starts overlapped into unreadable text when several alerts
    fired together, and a legend entry per alert was wider than the figure."""
    lanes = _lanes(firing)
    # Constrained layout keeps the lane names, the axis labels and the legend inside the figure.
    fig = plt.figure(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI, layout="constrained")
    fig.get_layout_engine().set(w_pad=0.03, h_pad=0.03, hspace=0.02)
    try:
        if lanes:
            grid = fig.add_gridspec(2, 1, height_ratios=[len(lanes), LANES_HEIGHT])
            ax = fig.add_subplot(grid[1])
            strip = fig.add_subplot(grid[0], sharex=ax)
        else:
            ax, strip = fig.add_subplot(), None
        ax.axvspan(_utc(band[0]), _utc(band[1]), color=BAND, zorder=0, label="incident window")
        if strip is not None:
            _draw_lanes(strip, lanes, firing, band, step)
        if onset is not None and t0 <= onset[0] <= t1:
            for axes in (ax, strip):
                if axes is not None:
                    axes.axvline(
                        _utc(onset[0]), color=ONSET, linewidth=1.5,
                        label=f"onset: {onset[1]} pending" if axes is ax else None,
                    )  # fmt: skip
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
        (strip or ax).set_title(spec.title, fontsize=8, loc="left")
        ax.tick_params(labelsize=6)
        ax.grid(True, linewidth=0.3, alpha=0.6)
        ax.xaxis.get_offset_text().set_fontsize(6)
        # Below the axes, so it never hides the data; as many columns as fit the width.
        _fitting_legend(fig, ax)
        return fig
    except BaseException:
        plt.close(fig)
        raise


LANES_HEIGHT = 9  # the signal's height in lanes: 5 lanes take a third of the axes
MAX_LANES = 6


def _lanes(firing: Sequence[tuple[float, float, str]]) -> list[str]:
    """One lane per alert name in order of first firing; past MAX_LANES, one lane for the rest."""
    names = list(dict.fromkeys(name for _, _, name in sorted(firing)))
    if len(names) <= MAX_LANES:
        return names
    return [*names[: MAX_LANES - 1], f"{len(names) - MAX_LANES + 1} other alerts"]


def _draw_lanes(
    strip: Axes,
    lanes: list[str],
    firing: Sequence[tuple[float, float, str]],
    band: tuple[float, float],
    step: float,
) -> None:
    strip.axvspan(_utc(band[0]), _utc(band[1]), color=BAND, zorder=0)
    for a, b, name in firing:
        lane = lanes.index(name) if name in lanes else len(lanes) - 1
        colour = FIRING[lane % len(FIRING)]
        left = mdates.date2num(_utc(a))
        width = mdates.date2num(_utc(max(b, a + step))) - left
        strip.barh(lane, width, left=left, height=0.7, color=colour, zorder=3)
    strip.set_ylim(len(lanes) - 0.5, -0.5)  # the first to fire on top
    strip.set_yticks(range(len(lanes)), lanes, fontsize=6)
    for label, lane in zip(strip.get_yticklabels(), range(len(lanes)), strict=True):
        label.set_color(FIRING[lane % len(FIRING)])
    strip.tick_params(axis="x", labelbottom=False, length=0)
    strip.tick_params(axis="y", length=0)
    strip.grid(True, axis="x", linewidth=0.3, alpha=0.6)
    for side in ("top", "right", "bottom"):
        strip.spines[side].set_visible(False)


def _fitting_legend(fig: Figure, ax: Axes) -> None:
    """The legend of `ax` below the axes, in as many columns (at most 4) as fit the figure's
    width: five columns of long labels ran off both edges."""
    handles, labels = ax.get_legend_handles_labels()
    width = fig.get_figwidth() * fig.dpi
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(4, len(labels)), 0, -1):
        legend = fig.legend(
            handles, labels, fontsize=6, loc="outside lower center", ncol=ncol, frameon=False,
            handlelength=1.5, columnspacing=1.0,
        )  # fmt: skip
        if ncol == 1 or legend.get_window_extent(renderer).width <= 0.98 * width:
            return
        legend.remove()


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

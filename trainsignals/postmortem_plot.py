"""The postmortem's signal plots, drawn with matplotlib's Agg backend (no display needed).

One PNG per golden signal: the series against a UTC time axis, the unit on the y axis, the
spec's threshold as a dashed line, the incident window shaded, each firing alert as a red strip
along the top (first firing to resolved), and the fault onset (the earliest sign: first
pending alert, or the window's start) as a vertical line. Deterministic: fixed size and DPI,
no timestamp in the PNG metadata.
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

SIZE = (640, 240)  # pixels: room for the axes text and a legend below the plot
DPI = 100
SERIES, BAND, FIRING, ONSET, THRESHOLD = "#1f5ac8", "#ffe4c4", "#d22828", "#6a1b9a", "#555555"


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
    firing: Sequence[tuple[float, float]],
    step: float,
    spec: PlotSpec,
    onset: float | None = None,
    size: tuple[int, int] = SIZE,
) -> bytes:
    """The signal as PNG bytes. `firing`: (first firing, resolved or window end) per alert."""
    fig, ax = plt.subplots(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI)
    try:
        ax.axvspan(_utc(band[0]), _utc(band[1]), color=BAND, zorder=0, label="incident window")
        for i, (a, b) in enumerate(firing):
            ax.axvspan(
                _utc(a), _utc(max(b, a + step)), ymin=0.93, ymax=1.0, color=FIRING, zorder=3,
                label="alert firing" if i == 0 else None,
            )  # fmt: skip
        if onset is not None and t0 <= onset <= t1:
            ax.axvline(_utc(onset), color=ONSET, linewidth=1.5, label="onset (first sign)")
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
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
        return out.getvalue()
    finally:
        plt.close(fig)


def firing_bands(events: Sequence[object], end: float) -> list[tuple[float, float]]:
    """(first firing, resolved or `end`) of each alert event that fired."""
    bands = []
    for e in events:
        first = getattr(e, "first_firing", None)
        if first is not None:
            resolved = getattr(e, "resolved", None)
            bands.append((first, resolved if resolved is not None else end))
    return sorted(bands)


__all__ = ["PlotSpec", "firing_bands", "plot"]

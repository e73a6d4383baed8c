"""The dashboard's "Goodput" row: ETTR over 1h, 1d and the dashboard's range, and badput.

Series from generator/signals/goodput.py; the range figure averages the 1h ratios over `$__range`.
"""

from __future__ import annotations

from grafanalib import core as g

from trainsignals.generator.dashboards.kit import GREEN, RED, PanelBuilder
from trainsignals.generator.signals.goodput import badput_name, goodput_name


def goodput_panels(b: PanelBuilder) -> list[g.Panel]:
    r = b.r
    slo = next((s for s in b.spec.slos if s.sli == "goodput"), None)
    floor = [(GREEN, None)] if slo is None else [(RED, None), (GREEN, slo.objective)]
    ettr = b.stat(
        "goodput",
        "Goodput (ETTR)",
        "Effective training time ratio: time in steps that moved the job forward over wall "
        "time, over the last hour, the last day, and the dashboard's time range (the mean of "
        "the 1h ratios). Badput: start-up, checkpoint save and restore, eval, data wait, steps "
        "redone after a restart, recovery (no process alive), other."
        + (f" Red below the SLO objective {slo.objective:g}." if slo else ""),
        b.targets(
            (f"{goodput_name('1h')}{r}", "last 1h"),
            (f"{goodput_name('1d')}{r}", "last 1d"),
            (f"avg_over_time({goodput_name('1h')}{r}[$__range])", "dashboard range"),
        ),
        "percentunit",
        floor,
        w=6,
    )
    breakdown = b.series(
        "badput",
        "Where the time goes (1h)",
        "Goodput and each badput category as shares of wall time over the last hour, "
        "stacked: they add up to 100%.",
        [
            b.target(f"{goodput_name('1h')}{r}", "goodput", "A"),
            b.target(f"{badput_name('1h')}{r}", "{{category}}", "B"),
        ],
        "percentunit",
        w=18,
        stacking={"mode": "normal", "group": "A"},
        fillOpacity=60,
    )
    return [b.layout.row("Goodput"), ettr, breakdown]

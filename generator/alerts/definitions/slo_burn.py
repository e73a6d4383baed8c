"""Service level objectives: multi-window, multi-burn-rate alerts (see generator/signals/slo.py)."""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.recovery import paged_incident_ended_within
from trainsignals.generator.alerts.model import AlertGroup, Rule
from trainsignals.generator.signals import slo
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.faults import FaultCase, from_onset, stall

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
SLO_ERROR_BUDGET_BURN_FAST = "SloErrorBudgetBurnFast"
SLO_ERROR_BUDGET_BURN_SLOW = "SloErrorBudgetBurnSlow"
BUDGET = "{{ $labels.slo }} SLO of {{ $labels.training_job }}"


@GROUP.alert(
    SLO_ERROR_BUDGET_BURN_FAST,
    signal="slo",
    severity="page",
    incident_consequence=True,
    meaning="An SLO burns its error budget fast (SRE workbook: 2% of a 30-day budget in 1h or "
    "5% in 6h, each confirmed by a short window).",
)
def burn_fast(ctx: RuleContext) -> Rule | None:
    if not ctx.spec.slos:
        return None
    return Rule(
        # Goodput lost to an incident that already paged stays in the burn's windows for up
        # to 6h after it ended: that is the same incident (issue 16: a restart loop paged twice).
        expr=f"({slo.burn_expr(ctx, slo.FAST)})" + paged_incident_ended_within(ctx, 6 * 3600),
        for_seconds=120,
        summary=f"{BUDGET} burns its error budget fast",
        description=f"The {BUDGET} loses {{{{ $value | humanizePercentage }}}} of its events: at "
        "this rate a 30-day error budget is gone within days. Long and short windows agree, so "
        "the burn is happening now.",
        panel="slo",
        threshold=slo.describe(ctx, slo.FAST),
        window="1h&5m, 6h&30m",
        # A hang spends every SLO's budget: no time in steps, no throughput while "training".
        faults=[FaultCase("", 70, labels=("slo",), job_fault=from_onset(stall))],
    )


@GROUP.alert(
    SLO_ERROR_BUDGET_BURN_SLOW,
    signal="slo",
    severity="ticket",
    meaning="An SLO burns its error budget slowly but steadily (10% of the budget in 1d or "
    "3d): it will be exhausted before the period ends.",
)
def burn_slow(ctx: RuleContext) -> Rule | None:
    if not ctx.spec.slos:
        return None
    return Rule(
        expr=slo.burn_expr(ctx, slo.SLOW),
        for_seconds=3600,
        summary=f"{BUDGET} burns its error budget steadily",
        description=f"The {BUDGET} loses {{{{ $value | humanizePercentage }}}} of its events over "
        "a day or more: the budget runs out before the period ends unless this is fixed.",
        panel="slo",
        threshold=slo.describe(ctx, slo.SLOW),
        window="1d&2h, 3d&6h",
        faults=[FaultCase("", 100, labels=("slo",), job_fault=from_onset(stall))],
    )

"""Blind alerts: an input a paging or ticketing alert needs is absent while the job runs.

An alert whose input series does not exist can never fire, and nobody notices: a rank started
without the step-time bucket, a node whose GPU exporter is not in service discovery, a
checkpoint directory the instrumentation was not given. The inputs come from the definitions
themselves: every raw series selector the job's other page and ticket alerts read, directly
or through recording rules (parsed with promql-parser, trainsignals/series_check.py). Series
that exist only after an event, or are read with a fallback, are left out
(series_check.EVENT_ONLY, trainsignals/optional_series.py).
"""

from __future__ import annotations

from ..alert_model import AlertGroup, Rule
from ..faults import FAULT_ONSET, FaultCase
from ..promql import RuleContext

GROUP = AlertGroup()
NAME = "AlertInputMissing"
# A slow start-up (loading a large checkpoint) reports its loss only after the first step.
FOR_SECONDS = 1800
STALENESS = 5  # minutes Prometheus still returns a series after its last sample


def required_inputs(ctx: RuleContext) -> list[tuple[str, str, tuple[str, ...]]]:
    """(metric name, selector text, alerts that need it) for every input of the job's other
    page and ticket alerts that must exist while its training targets are up."""
    # Imported here: these modules import the alert catalogue, which imports this module.
    from trainsignals.optional_series import MIG_INSTANCE_MATCHER
    from trainsignals.series_check import EVENT_ONLY, Matcher, selectors

    from ..alert_catalog import ALERTS
    from ..alerts import firing_expr, severity
    from ..recording import recording_groups

    records = {
        rule["record"]: rule["expr"]
        for group in recording_groups(ctx)
        for rule in group["rules"]
        if "record" in rule
    }
    alerts = {}
    for definition in ALERTS:
        if definition.name == NAME or severity(ctx, definition.name) not in ("page", "ticket"):
            continue
        rule = definition.rule(ctx)
        if rule is not None:
            alerts[rule.name] = firing_expr(ctx, rule)
    gate = ctx.training_targets()
    mig = Matcher(*MIG_INSTANCE_MATCHER)
    found = []
    for selector in selectors(records, alerts, []):
        if (
            not selector.alerts
            or selector.name in EVENT_ONLY
            # A histogram's buckets: its _count is checked (a bucket at the step-time bound
            # has a fallback).
            or any(m.label == "le" for m in selector.matchers)
            or mig in selector.matchers  # MIG instances only: empty without MIG
            or selector.text() == f"up{gate}"  # the gate itself
        ):
            continue
        found.append((selector.name, selector.text(), tuple(sorted(selector.alerts))))
    return found


def _labelled(expr: str, series: str, alerts: tuple[str, ...]) -> str:
    """`expr` with the labels the ticket names: the series and the alerts it blinds."""
    with_series = f'label_replace({expr}, "series", `{series}`, "", "")'
    return f'label_replace({with_series}, "alerts", "{", ".join(alerts)}", "", "")'


def missing_expr(ctx: RuleContext, inputs: list[tuple[str, str, tuple[str, ...]]]) -> str:
    """One branch per input, joined with `or` (each carries its own `series` label).

    A target's `up` is checked per node (a node whose ranks are up but whose GPU exporter is
    in no service discovery: GpuLost, GpuExporterDown and NodeDown are blind there); any
    other series for the job (where it exists on one node the pipeline works).
    """
    ranks_up = f"up{ctx.training_targets()} == 1"
    branches = []
    for name, text, alerts in inputs:
        if name == "up":
            expr = f"count by (node) ({ranks_up}) unless on (node) count by (node) ({text})"
        else:
            expr = f"count({ranks_up}) > 0 unless on () count({text})"
        branches.append(_labelled(expr, text, alerts))
    return " or ".join(branches)


@GROUP.alert(
    NAME,
    signal="infrastructure",
    severity="ticket",
    meaning="A series that one of the job's page or ticket alerts reads is absent while the "
    "job's training targets are up: that alert cannot fire. The ticket names the series and "
    "the alerts; a target's `up` is checked per node (a node with ranks but no GPU exporter).",
)
def alert_input_missing(ctx: RuleContext) -> Rule | None:
    inputs = required_inputs(ctx)
    if not inputs:
        return None
    gpu_up = next((i for i in inputs if i[1] == f"up{ctx.gpu_targets()}"), None)
    if gpu_up is None:
        raise ValueError(f"{NAME}: no alert reads up{ctx.gpu_targets()}, the tested input")

    def without_gpu_exporter(rule_ctx: RuleContext, minutes: int) -> list:
        """Every target up, but node-0's GPU exporter leaves service discovery at onset."""
        from ..rule_tests import gpu_series, target_series

        series = target_series(rule_ctx, minutes) + gpu_series(rule_ctx, minutes)
        for s in series:
            if s.name == "up" and s.labels == {
                **rule_ctx.spec.selector_labels,
                "job": rule_ctx.spec.scrape_jobs.gpu,
                "node": "node-0",
            }:
                s.values[FAULT_ONSET:] = [None] * (len(s.values) - FAULT_ONSET)
        return series

    return Rule(
        expr=missing_expr(ctx, inputs),
        for_seconds=FOR_SECONDS,
        summary="{{ $labels.training_job }}: {{ $labels.series }} is missing"
        "{{ with $labels.node }} on {{ . }}{{ end }}; blind: {{ $labels.alerts }}",
        description="No series matches {{ $labels.series }}"
        "{{ with $labels.node }} on node {{ . }}{{ end }} while the job's training targets are "
        "up, so {{ $labels.alerts }} cannot fire. Run `trainsignals readiness` to see which "
        "label or exporter is wrong.",
        panel="targets_up",
        threshold="an input series absent",
        window="now",
        faults=[
            FaultCase(
                "",
                STALENESS + FOR_SECONDS // 60 + 2,
                labels=("node",),
                raw_series=without_gpu_exporter,
                extra_labels={"series": gpu_up[1], "alerts": ", ".join(gpu_up[2])},
                what="on a node whose GPU exporter target vanished",
            )
        ],
    )

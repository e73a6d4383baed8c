"""Blind alerts: an input a paging or ticketing alert needs is absent while the job runs.

An alert whose input series does not exist can never fire, and nobody notices: a rank started
without the step-time bucket, a node whose GPU exporter is not in service discovery, a
checkpoint directory the instrumentation was not given. The inputs come from the definitions
themselves: every raw series selector the job's other page and ticket alerts read, directly
or through recording rules (trainsignals/metrics/promql_reads.py: firm_inputs). Series that
exist only after an event, or are read with a fallback, are left out (series_check.EVENT_ONLY,
trainsignals/metrics/optional_series.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from trainsignals.generator.alerts.model import AlertGroup, AlertRule, Rule, firing_expr
from trainsignals.generator.signals.fabric import NODE_EXPORTER_JOB
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import recorded_exprs
from trainsignals.generator.testkit.fabric_series import ib_series
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase
from trainsignals.generator.testkit.job_series import gpu_series, target_series
from trainsignals.metrics.optional_series import MIG_INSTANCE_MATCHER
from trainsignals.metrics.promql_reads import Matcher, firm_inputs
from trainsignals.metrics.series_check import EVENT_ONLY, Selector

GROUP = AlertGroup()
NAME = "AlertInputMissing"
# A slow start-up (loading a large checkpoint) reports its loss only after the first step.
FOR_SECONDS = 1800
STALENESS = 5  # minutes Prometheus still returns a series after its last sample


def required_inputs(
    ctx: RuleContext, others: Sequence[AlertRule]
) -> list[tuple[str, str, tuple[str, ...]]]:
    """(metric name, selector text, alerts that need it) for every input of the job's other
    alerts (`others`: its page and ticket alerts, as alerts.rules.alert_rules builds them)
    that must exist while its training targets are up."""
    records = recorded_exprs(ctx)
    needed: dict[str, set[str]] = {}
    names: dict[str, str] = {}
    memo: dict[str, frozenset] = {}  # what each recording rule reads, for every alert
    mig = Matcher(*MIG_INSTANCE_MATCHER)
    gate = f"up{ctx.training_targets()}"
    # node_exporter's own `up` is NodeExporterDown's subject (stopped) and
    # ScrapeTargetsVanished's (gone from discovery), not an input every node must have.
    node_exporter_up = f"up{ctx.raw(job=NODE_EXPORTER_JOB)}"
    for rule in others:
        if rule.name == NAME:
            continue
        for name, matchers in firm_inputs(firing_expr(ctx, rule), records, memo):
            text = Selector(name, matchers).text()
            if (
                name in EVENT_ONLY
                # A histogram's buckets: its _count is checked (a bucket at the step-time
                # bound has a fallback).
                or any(m.label == "le" for m in matchers)
                or mig in matchers  # MIG instances only: empty without MIG
                or text in (gate, node_exporter_up)  # the gate itself
            ):
                continue
            needed.setdefault(text, set()).add(rule.name)
            names[text] = name
    return [(names[t], t, tuple(sorted(needed[t]))) for t in sorted(needed)]


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
    # The job-wide gate is the recorded rank count, not count(up == 1) again in every branch:
    # on a 512-rank job that recount was more than half of the whole rule file's cost.
    # Every rank up, not just one: a missing input means the targets are scraped and still do
    # not export it (a misconfiguration). A series gone because its rank died (GpuLost takes
    # rank 0 and its process_start_time_seconds{rank="0"}) is the target being down, which
    # TrainingTargetsDown and the incident that killed it already report: no ticket telling
    # on-call to run `readiness` (`make demo SCENARIO=gpu_lost` sent one).
    job_running = f"job:trainsignals_ranks_up:sum{ctx.recorded()} >= {ctx.spec.shape.gpus}"
    branches = []
    for name, text, alerts in inputs:
        if name == "up":
            expr = f"count by (node) ({ranks_up}) unless on (node) count by (node) ({text})"
        else:
            expr = f"{job_running} unless on () count({text})"
        branches.append(_labelled(expr, text, alerts))
    return " or ".join(branches)


@GROUP.alert(
    NAME,
    signal="infrastructure",
    severity="ticket",
    meaning="A series that one of the job's page or ticket alerts reads is absent while all "
    "the job's training targets are up: that alert cannot fire. The ticket names the series and "
    "the alerts; a target's `up` is checked per node (a node with ranks but no GPU exporter). "
    "A series gone with a rank that died is not missing: the rank is down.",
    reads_other_alerts=True,
)
def alert_input_missing(ctx: RuleContext, others: Sequence[AlertRule]) -> Rule | None:
    inputs = required_inputs(ctx, others)
    if not inputs:
        return None
    gpu_up = next((i for i in inputs if i[1] == f"up{ctx.gpu_targets()}"), None)
    if gpu_up is None:
        raise ValueError(f"{NAME}: no alert reads up{ctx.gpu_targets()}, the tested input")

    def without_gpu_exporter(rule_ctx: RuleContext, minutes: int) -> list:
        """Every target up, but node-0's GPU exporter leaves service discovery at onset."""
        series = target_series(rule_ctx, minutes) + gpu_series(rule_ctx, minutes)
        if any(name.startswith("node_infiniband_") for name, _, _ in inputs):
            series += ib_series(rule_ctx, minutes, set(), [])  # node_exporter, as when healthy
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
        "{{ with $labels.node }} on node {{ . }}{{ end }} while all the job's training targets "
        "are up, so {{ $labels.alerts }} cannot fire{{ if $labels.node }}, and the GPU alerts "
        "(GpuLost, ECC, XID, throttling) see nothing of that node{{ end }}. Run `trainsignals "
        "readiness` to see which label or exporter is wrong.",
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

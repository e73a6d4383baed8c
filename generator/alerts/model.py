"""One alert, one definition.

An alert is a function decorated with `@group.alert(...)` in a module of
generator/alerts/definitions/: the decorator says what the alert means, its severity per
recovery mode, who owns it and which incident it belongs to (for inhibition); the function
builds its PromQL from the spec and names the fault its generated promtool test injects. Adding
an alert is one such definition plus its runbook template
(generator/templates/runbook_<Alert>.md.j2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from trainsignals.generator.signals.faults import FaultCase
from trainsignals.generator.signals.promql import RuleContext

MODES = ("manual", "auto_restart")
SEVERITIES = ("page", "ticket", "off")
OWNERS = ("job", "infra")


@dataclass(frozen=True)
class AlertRule:
    """An alert built for one spec: what render_alert, the dashboard and the runbook need."""

    name: str
    expr: str
    for_seconds: int  # nominal (unscaled)
    summary: str
    description: str
    panel: str  # key of generator/panels.PANEL_IDS
    threshold: str  # for `explain` and the runbook: the value that fires it, in words
    window: str  # the evaluation window(s), in words
    faults: tuple[FaultCase, ...] = ()  # at least one: the generated test of each fault
    # Nominal seconds the alert keeps firing after its condition last held (0: none), for
    # intermittent faults: one NaN every few minutes is one incident, one page episode.
    keep_firing_for: int = 0


@dataclass(frozen=True)
class Rule:
    """What a definition's function returns; the decorator adds the alert's name."""

    expr: str
    for_seconds: int
    summary: str
    description: str
    panel: str
    threshold: str
    window: str
    faults: tuple[FaultCase, ...] | list[FaultCase] = ()
    keep_firing_for: int = 0  # see AlertRule


@dataclass(frozen=True)
class AlertDef:
    name: str
    signal: str  # golden signal / area, for `explain` and the runbook index
    meaning: str
    default_severity: str  # with recovery.mode manual
    auto_severity: str | None  # with recovery.mode auto_restart; None: the same
    owner: str  # "job" (the job's team) or "infra" (who repairs hardware)
    # Inhibition roles, read by generator/routing/alertmanager.py.
    node_scoped: bool  # explained by NodeDown of its node
    progress_symptom: bool  # follows from ranks that stopped or slowed
    incident_consequence: bool  # part of a no-progress / crash-loop incident
    build: Callable[..., Rule | None] = field(repr=False)
    # True: `build` also gets the rules of the alerts defined before it that the spec enables
    # (AlertInputMissing reads their inputs). The rules are built in definition order
    # (generator/alerts/rules.py), so no definition needs the catalogue it is part of.
    reads_other_alerts: bool = False

    def severity_for(self, mode: str) -> str:
        if mode == "auto_restart" and self.auto_severity is not None:
            return self.auto_severity
        return self.default_severity

    def rule(self, ctx: RuleContext, others: Sequence[AlertRule] = ()) -> AlertRule | None:
        """The alert for this spec; None when the spec has nothing for it to watch."""
        built = self.build(ctx, others) if self.reads_other_alerts else self.build(ctx)
        if built is None:
            return None
        faults = tuple(replace(f, alert=self.name) for f in built.faults)
        if not faults:
            raise ValueError(f"{self.name}: a definition names at least one fault to test")
        return AlertRule(
            self.name,
            built.expr,
            built.for_seconds,
            built.summary,
            built.description,
            built.panel,
            built.threshold,
            built.window,
            faults,
            built.keep_firing_for,
        )


class AlertGroup:
    """The definitions of one module, in the order they are written."""

    def __init__(self) -> None:
        self.definitions: list[AlertDef] = []

    def alert(
        self,
        name: str,
        *,
        signal: str,
        meaning: str,
        severity: str,
        auto_restart: str | None = None,
        owner: str = "job",
        node_scoped: bool = False,
        progress_symptom: bool = False,
        incident_consequence: bool = False,
        reads_other_alerts: bool = False,
    ) -> Callable[[Callable[..., Rule | None]], Callable[..., Rule | None]]:
        for value in (severity, auto_restart or severity):
            if value not in SEVERITIES:
                raise ValueError(f"{name}: severity {value!r} is not one of {SEVERITIES}")
        if owner not in OWNERS:
            raise ValueError(f"{name}: owner {owner!r} is not one of {OWNERS}")

        def register(build: Callable[..., Rule | None]) -> Callable[..., Rule | None]:
            self.definitions.append(
                AlertDef(
                    name,
                    signal,
                    " ".join(meaning.split()),
                    severity,
                    auto_restart,
                    owner,
                    node_scoped,
                    progress_symptom,
                    incident_consequence,
                    build,
                    reads_other_alerts,
                )
            )
            return build

        return register


EVALUATION_SECONDS = 60  # generator/deploy/prometheus_config.py EVALUATION_INTERVAL


def firing_expr(ctx: RuleContext, alert: AlertRule) -> str:
    """The rule's expression, held true for `keep_firing_for` after its condition last held.

    Prometheus (>= 2.42) has a `keep_firing_for` field, but vmalert 1.79.5 (Debian's, which
    runs these same files) rejects it ("unknown fields in rule: keep_firing_for"). A subquery
    keeps the expression's series for the window instead, on both engines, sampled every
    (nominal) minute, the evaluation interval: the step is explicit because vmalert sends
    its `-datasource.queryStep` (5m by default) as the default subquery step. Unlike the
    field, it also holds a pending condition, so `for` counts from the first time the
    condition held within the window.
    """
    if not alert.keep_firing_for:
        return alert.expr
    return (
        f"max_over_time(({alert.expr})"
        f"[{ctx.range(alert.keep_firing_for)}:{ctx.duration(EVALUATION_SECONDS)}])"
    )

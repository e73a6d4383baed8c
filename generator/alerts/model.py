"""One alert, one definition.

An alert is a function decorated with `@group.alert(...)` in a module of
generator/alerts/definitions/: the decorator says what the alert means, its severity per
recovery mode, who owns it, what it explains (`explains=`: the alerts it is the cause of),
which incident it belongs to and whether it is a hardware fault; the function
builds its PromQL from the spec and names the fault its generated promtool test injects. Adding
an alert is one such definition plus its runbook template
(generator/templates/runbook_<Alert>.md.j2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.faults import FaultCase

MODES = ("manual", "auto_restart")
SEVERITIES = ("page", "ticket", "off")
OWNERS = ("job", "infra")

# Roles an alert can hold, so a cause explains a whole family without naming each member.
NODE_SCOPED = "node_scoped"  # per-GPU / per-node: explained by its node being down
PROGRESS_SYMPTOM = "progress_symptom"  # follows from ranks that stopped or slowed
INCIDENT_CONSEQUENCE = "incident_consequence"  # part of a no-progress / crash-loop incident
ROLES = (NODE_SCOPED, PROGRESS_SYMPTOM, INCIDENT_CONSEQUENCE)
# Incidents: alerts of one incident page once; what follows a page of it is that incident.
PROGRESS_INCIDENT = "progress"  # a job that stopped making progress
CHECKPOINT_INCIDENT = "checkpoint"  # a job whose work is not saved (failing checkpoints)


@dataclass(frozen=True)
class Explains:
    """The declaring alert is the cause of `alerts` (by name) and of every alert holding one of
    `roles`, when the labels in `equal` are equal: Alertmanager mutes them while it fires
    (generator/routing/inhibit.py derives one inhibit rule per declaration, `why` its
    comment). `target_labels` narrows the targets (GpuXidCritical with xid="79" only).
    A value may list alternatives, "48|95" (a regex matcher). `page_only`: only the cause's
    page mutes them, never its ticket. Several alerts may share
    one declaration (one rule, their names alternated). An alert never explains itself."""

    why: str
    alerts: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    equal: tuple[str, ...] = ("training_job",)
    target_labels: tuple[tuple[str, str], ...] = ()
    page_only: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.roles) - set(ROLES)
        if unknown:
            raise ValueError(f"explains: unknown roles {sorted(unknown)}; use {ROLES}")
        if not self.alerts and not self.roles:
            raise ValueError(f"explains {self.why[:40]!r}...: names no alert and no role")

    def label_matchers(self) -> list[str]:
        """`target_labels` as Alertmanager matchers: `xid="79"`, `xid=~"48|95"`."""
        return [
            f'{name}=~"{value}"' if "|" in value else f'{name}="{value}"'
            for name, value in self.target_labels
        ]


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
    # Annotations besides summary, description and the links (e.g. `suspects`), as pairs.
    annotations: tuple[tuple[str, str], ...] = ()


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
    annotations: Mapping[str, str] = field(default_factory=dict)  # see AlertRule


@dataclass(frozen=True)
class AlertDef:
    name: str
    signal: str  # golden signal / area, for `explain` and the runbook index
    meaning: str
    default_severity: str  # with recovery.mode manual
    auto_severity: str | None  # with recovery.mode auto_restart; None: the same
    owner: str  # "job" (the job's team) or "infra" (who repairs hardware)
    # Inhibition roles (ROLES): what the causes' `explains` name as a family.
    node_scoped: bool  # explained by NodeDown of its node
    progress_symptom: bool  # follows from ranks that stopped or slowed
    incident_consequence: bool  # part of a no-progress / crash-loop incident
    build: Callable[..., Rule | None] = field(repr=False)
    # True: `build` also gets the rules of the alerts defined before it that the spec enables
    # (AlertInputMissing reads their inputs). The rules are built in definition order
    # (generator/alerts/rules.py), so no definition needs the catalogue it is part of.
    reads_other_alerts: bool = False
    explains: tuple[Explains, ...] = ()  # what this alert is the cause of
    incident: str | None = None  # e.g. PROGRESS_INCIDENT: its pages are that incident's
    hardware_fault: bool = False  # a fault of a node's hardware (counted per node)
    # A non-fatal sign against a node's hardware (counted per node, a fraction of an incident
    # each: generator/nodes/). Resolved at registration (AlertGroup.alert): declared, or by
    # default every infra-owned, node-scoped alert that is no hardware fault.
    hardware_ticket: bool = False

    @property
    def roles(self) -> tuple[str, ...]:
        held = (self.node_scoped, self.progress_symptom, self.incident_consequence)
        return tuple(role for role, has in zip(ROLES, held, strict=True) if has)

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
            tuple(sorted(built.annotations.items())),
        )


# Every definition of every group, in registration order: the incident lists are read from it
# while rules are built, once generator/alerts/definitions has imported every group (the
# catalogue does, and seals it; a list read before that would be silently short).
_REGISTERED: list[AlertDef] = []
_SEALED: list[bool] = [False]


def seal(definitions: Sequence[AlertDef]) -> None:
    """Called by the catalogue once every definition module is imported."""
    if sorted(d.name for d in definitions) != sorted(d.name for d in _REGISTERED):
        raise ValueError("generator/alerts/definitions lists a group twice or misses one")
    _REGISTERED[:] = definitions  # the catalogue's order, not the modules' import order
    _SEALED[0] = True


def _registered() -> list[AlertDef]:
    if not _SEALED[0]:
        raise RuntimeError(
            "alert definitions read before the catalogue imported them all: import "
            "trainsignals.generator.alerts.catalog first"
        )
    return _REGISTERED


def incident_alerts(incident: str) -> tuple[str, ...]:
    """Names of the alerts that declare `incident=incident`, in definition order."""
    return tuple(d.name for d in _registered() if d.incident == incident)


def hardware_fault_alerts() -> tuple[str, ...]:
    """Names of the alerts that declare `hardware_fault=True`, in definition order."""
    return tuple(d.name for d in _registered() if d.hardware_fault)


def hardware_ticket_alerts() -> tuple[str, ...]:
    """Names of the alerts that are evidence against a node's hardware without killing a job
    (`hardware_ticket`: declared, or derived), in definition order."""
    return tuple(d.name for d in _registered() if d.hardware_ticket)


def is_hardware_ticket(
    declared: bool | None, owner: str, node_scoped: bool, hardware_fault: bool
) -> bool:
    """`hardware_ticket=` as declared; undeclared (None): an alert the infra team gets about one
    node (owner infra, node-scoped) that is no hardware fault: a non-fatal XID, pending row
    remaps, throttling, a flapping port, a node that dropped off the network and came back, a
    fail-slow GPU, link or host, NVML errors, an exporter hung on the node while its ranks
    answer (often a wedged driver). A hardware fault is never also a ticket."""
    if hardware_fault:
        return False
    if declared is not None:
        return declared
    return owner == "infra" and node_scoped


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
        explains: tuple[Explains, ...] = (),
        incident: str | None = None,
        hardware_fault: bool = False,
        hardware_ticket: bool | None = None,
    ) -> Callable[[Callable[..., Rule | None]], Callable[..., Rule | None]]:
        for value in (severity, auto_restart or severity):
            if value not in SEVERITIES:
                raise ValueError(f"{name}: severity {value!r} is not one of {SEVERITIES}")
        if owner not in OWNERS:
            raise ValueError(f"{name}: owner {owner!r} is not one of {OWNERS}")

        def register(build: Callable[..., Rule | None]) -> Callable[..., Rule | None]:
            definition = AlertDef(
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
                explains,
                incident,
                hardware_fault,
                is_hardware_ticket(hardware_ticket, owner, node_scoped, hardware_fault),
            )
            self.definitions.append(definition)
            _REGISTERED.append(definition)
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

"""THE scenario table: what each fault does, when, and which alerts it must raise.

End-to-end tests read `SCENARIOS`: run `duration` simulated seconds with the fault at
`fault_at`, then expect exactly `alerts_for(spec)` to have fired (alert name -> severity).
`later_alerts` are consequences that only fire in longer runs (or that Alertmanager may
inhibit); they are listed so a longer run is not a surprise.

Thresholds assumed (defaults of generator/spec/job.py, windows in simulated time): see
simulator/README.md. Healthy values sit at 1.5x the MFU floor, 5% data wait, 65 C, 75% memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW
from trainsignals.generator.alerts.definitions.gpu_conditions import (
    GPU_EXPORTER_NVML_ERRORS,
    GPU_TEMPERATURE_HIGH,
    GPU_THERMAL_THROTTLING,
)
from trainsignals.generator.alerts.definitions.gpu_faults import (
    GPU_LOST,
    GPU_REMAPPED_ROWS_PENDING,
    GPU_UNCORRECTABLE_ECC_ERRORS,
    GPU_XID_CRITICAL,
    GPU_XID_ERROR,
)
from trainsignals.generator.alerts.definitions.loss_checkpoint import (
    CHECKPOINT_DISK_ALMOST_FULL,
    CHECKPOINT_DISK_FILLING_UP,
    CHECKPOINT_TOO_OLD,
    LOSS_DIVERGING,
    LOSS_PLATEAU,
    NON_FINITE_LOSS,
)
from trainsignals.generator.alerts.definitions.reachability import NODE_DOWN
from trainsignals.generator.alerts.definitions.recovery import (
    TRAINING_CRASH_LOOPING,
    TRAINING_NO_PROGRESS,
)
from trainsignals.generator.alerts.definitions.training import (
    DATA_LOADER_STARVED,
    DROPPED_BATCHES_ABOVE_TOLERANCE,
    MFU_BELOW_FLOOR,
    STEP_TIME_ABOVE_BOUND,
    THROUGHPUT_BELOW_FLOOR,
    TRAINING_STALLED,
    TRAINING_TARGETS_DOWN,
)
from trainsignals.generator.spec.job import JobSpec, Recovery

from .scenarios_culprit import CULPRIT_SCENARIOS
from .scenarios_fabric import FABRIC_SCENARIOS
from .scenarios_peers import PEER_SCENARIOS

MINUTE, HOUR = 60, 3600

# A GPU or rank named by position; -1 means "the last one" (resolved against the shape).
GpuRef = tuple[int, int]  # (node, gpu index on the node)


@dataclass(frozen=True)
class Conditions:
    """What differs from healthy while the fault is active. Defaults are healthy."""

    speed_loss_per_hour: float = 0.0  # compute speed lost per simulated hour since onset
    speed_floor: float = 0.05  # where that loss levels off (a leak that reaches steady state)
    speed: float = 1.0  # compute speed factor (thermal throttling slows the whole job)
    data_wait_ratio: float | None = None  # share of step time waiting for data
    stalled: bool = False  # surviving ranks make no progress (hung collective)
    loss: str = "normal"  # normal | nan | diverge | plateau
    dropped_ratio: float = 0.0  # dropped batches per step
    disk_fill_per_hour: float = 0.0  # share of the checkpoint disk filled per simulated hour
    checkpoints_fail: bool = False
    crashed_ranks: tuple[int, ...] = ()  # processes gone: endpoints stop answering
    down_nodes: tuple[int, ...] = ()  # every endpoint of the node stops answering
    lost_gpus: tuple[GpuRef, ...] = ()  # FakeGpu.lost
    hot_gpus: tuple[GpuRef, ...] = ()  # 91 C, thermal slowdown reasons, clocks down
    ecc_gpus: tuple[GpuRef, ...] = ()  # uncorrectable ECC errors and a pending row remap
    # (node, gpu, xid, seconds after onset): each injected once through the NVML event path.
    xids: tuple[tuple[int, int, int, int], ...] = ()
    ib_down: tuple[int, ...] = ()  # nodes whose InfiniBand port mlx5_0/1 goes down for good
    ib_flapping: tuple[int, ...] = ()  # nodes whose port goes down 30 s every 10 min
    slow_gpus: tuple[tuple[int, int, float], ...] = ()  # (node, gpu, SM clock factor)
    slow_links: tuple[tuple[int, float, float], ...] = ()  # (node, throughput x, wait x)
    slow_hosts: tuple[tuple[int, float], ...] = ()  # (node, own-work factor of its ranks)
    data_stuck: tuple[int, ...] = ()  # ranks whose data wait never ends (GPU idle)
    crash_job: bool = False  # every process dies at onset (a torchrun-style job failure)
    restart_after: int | None = None  # seconds after onset the launcher has them all back
    restore_seconds: int = 60  # the restarted job loads its last checkpoint for this long
    # From onset, every this many seconds all processes die and a new incarnation starts at
    # once; each restores the checkpoint, then dies in start-up, before its first step.
    restart_loop: int | None = None
    # At onset training ends cleanly: every rank marks phase "done" (TrainingMetrics.finish(),
    # which waits for the next scrape) and exits; the job's file_sd files become empty.
    complete: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    timeline: str
    fault: Conditions
    expected_alerts: dict[str, str]
    duration: int  # simulated seconds: enough for expected_alerts, short of later_alerts
    fault_at: int = 30 * MINUTE  # after startup and warm-up, inside a training stretch
    later_alerts: dict[str, str] = field(default_factory=dict)
    step_slowdown: float = 1.0  # worst step-time factor over `duration` (StepTimeAboveBound)
    # The spec's `recovery:` section for this scenario (default: the base spec's, manual).
    recovery: dict[str, object] = field(default_factory=dict)

    def spec_for(self, spec: JobSpec) -> JobSpec:
        """The spec the scenario runs with: the base one, with the scenario's recovery mode."""
        if not self.recovery:
            return spec
        return spec.model_copy(update={"recovery": Recovery.model_validate(self.recovery)})

    def alerts_for(self, spec: JobSpec) -> dict[str, str]:
        """expected_alerts with the spec's severity overrides, its `off`s and optional rules.

        StepTimeAboveBound exists only when the spec sets step_time_max_seconds; it is
        expected when the slowed step (healthy step time x step_slowdown) exceeds the bound.
        """
        from .profile import JobProfile  # the healthy step time comes from the profile

        alerts = dict(self.expected_alerts)
        bound = spec.objectives.step_time_max_seconds
        if bound and JobProfile.from_spec(spec).step_seconds * self.step_slowdown > bound:
            alerts[STEP_TIME_ABOVE_BOUND] = "ticket"
        for name, severity in spec.alerts.items():
            if name in alerts:
                alerts[name] = severity
        return {name: sev for name, sev in sorted(alerts.items()) if sev != "off"}


_SCENARIOS = (
    Scenario(
        "healthy",
        "Startup 2m, warm-up 10m at 40%->100% throughput, then training with a checkpoint "
        "pause (1m) every max(checkpoint_max_age/4, 10m) and an eval pause (3m) every hour; "
        "loss decays as a power law with 1% noise. Nothing fires over a simulated day.",
        Conditions(),
        {},
        duration=24 * HOUR,
        fault_at=0,
    ),
    Scenario(
        "data_loader_starvation",
        "From fault_at: 80% of each step waits for data, steps take 4.75x longer, GPU "
        "utilization drops to ~19%, tokens/s falls to ~0.2x nominal (MFU ~0.09, below the "
        f"throughput floor). {DATA_LOADER_STARVED} and {THROUGHPUT_BELOW_FLOOR} fire ~20m later.",
        Conditions(data_wait_ratio=0.80),
        {DATA_LOADER_STARVED: "ticket", THROUGHPUT_BELOW_FLOOR: "page"},
        duration=30 * MINUTE + 45 * MINUTE,
        later_alerts={MFU_BELOW_FLOOR: "ticket"},
        step_slowdown=4.75,
    ),
    Scenario(
        "nan_loss",
        "From fault_at every rank reports a NaN loss each step (the loss gauge keeps the last "
        f"finite value, the non-finite counter rises). {NON_FINITE_LOSS} fires ~1m later.",
        Conditions(loss="nan"),
        {NON_FINITE_LOSS: "page"},
        duration=30 * MINUTE + 20 * MINUTE,
        later_alerts={LOSS_PLATEAU: "ticket"},
    ),
    Scenario(
        "loss_divergence",
        "From fault_at the loss grows as exp(t/10m) (capped at 1e6x): above 2x its 1h "
        f"average after ~15m; {LOSS_DIVERGING} fires ~20m after onset.",
        Conditions(loss="diverge"),
        {LOSS_DIVERGING: "page"},
        duration=30 * MINUTE + 40 * MINUTE,
    ),
    Scenario(
        "loss_plateau",
        "From fault_at the loss stops improving (flat at its onset value, 1% noise). The rule "
        "compares 1h loss averages 6h apart, so the older average lies inside the plateau "
        f"from onset + 7h; with its 1h `for`, {LOSS_PLATEAU} fires ~8h after onset.",
        Conditions(loss="plateau"),
        {LOSS_PLATEAU: "ticket"},
        duration=30 * MINUTE + 8 * HOUR + 45 * MINUTE,
    ),
    Scenario(
        "hang",
        "From fault_at no rank completes a step (NCCL-style hang): phase stays train, GPUs "
        f"at 100% utilization, counters flat. {TRAINING_STALLED} fires ~11m after onset. The speed "
        "alerts stay silent: a hang adds no time in steps, so it never reads as a slow job "
        "(one fault pages once).",
        Conditions(stalled=True),
        {TRAINING_STALLED: "page"},
        duration=30 * MINUTE + 35 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
    Scenario(
        "crash",
        "At fault_at the last rank's process exits (its endpoint stops answering, its GPU "
        f"goes idle); the other ranks hang in the next collective (their {TRAINING_STALLED} is "
        f"inhibited by {TRAINING_TARGETS_DOWN}). Fires ~2m after onset.",
        Conditions(crashed_ranks=(-1,), stalled=True),
        {TRAINING_TARGETS_DOWN: "page"},
        duration=30 * MINUTE + 15 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
    Scenario(
        "gpu_lost",
        "At fault_at GPU 0 of node 0 falls off the bus (every NVML query: gpu_is_lost, "
        f"trainsignals_gpu_up 0) and its rank (rank 0) dies; the others hang. {GPU_LOST} pages "
        f"~1m after onset; {TRAINING_TARGETS_DOWN} (~2m) is inhibited by {GPU_LOST}.",
        Conditions(lost_gpus=((0, 0),), crashed_ranks=(0,), stalled=True),
        {GPU_LOST: "page"},
        duration=30 * MINUTE + 10 * MINUTE,
        later_alerts={GPU_EXPORTER_NVML_ERRORS: "ticket", CHECKPOINT_TOO_OLD: "page"},
    ),
    Scenario(
        "thermal_throttling",
        "From fault_at GPU 0 of node 0 runs at 91 C with sw/hw thermal slowdown active and SM "
        "clocks at 60%; the synchronous job slows 10% (MFU ~0.41, still above its floor). "
        f"{GPU_TEMPERATURE_HIGH} fires ~10m, {GPU_THERMAL_THROTTLING} ~20m after onset.",
        Conditions(hot_gpus=((0, 0),), speed=0.9),
        # Clocks at 60% of its peers: the fail-slow ticket names the same GPU.
        {GPU_THERMAL_THROTTLING: "ticket", GPU_TEMPERATURE_HIGH: "ticket", GPU_FAIL_SLOW: "ticket"},
        duration=30 * MINUTE + 45 * MINUTE,
        step_slowdown=1.12,
    ),
    Scenario(
        "mfu_leak",
        "From fault_at compute speed drops 6% per simulated hour (fragmentation-style leak) "
        "and levels off at 60% of healthy speed after ~6.7h: MFU ~0.27, under the 0.30 floor, "
        "while tokens/s stay well above the page floor (half the floor's throughput). The 6h "
        f"MFU while stepping crosses the floor ~9h after onset and {MFU_BELOW_FLOOR} "
        "fires an hour later: the slow leak is a ticket, never a page.",
        Conditions(speed_loss_per_hour=0.06, speed_floor=0.6),
        {MFU_BELOW_FLOOR: "ticket"},
        duration=30 * MINUTE + 11 * HOUR,
        step_slowdown=1 / 0.6,
    ),
    Scenario(
        "dropped_batches",
        "From fault_at 3% of batches are dropped (one every ~33 steps). The 6h dropped share "
        f"passes 1% ~15m after onset; {DROPPED_BATCHES_ABOVE_TOLERANCE} fires ~45m after onset.",
        Conditions(dropped_ratio=0.03),
        {DROPPED_BATCHES_ABOVE_TOLERANCE: "ticket"},
        duration=30 * MINUTE + 90 * MINUTE,
    ),
    Scenario(
        "disk_filling",
        "From fault_at the checkpoint disk fills at 20% of its size per simulated hour from "
        f"55% free: {CHECKPOINT_DISK_FILLING_UP} fires within ~1.5h, "
        f"{CHECKPOINT_DISK_ALMOST_FULL} when free < 10% (~2h20m after onset). At 0 free "
        "(~2h45m) checkpoints start failing.",
        Conditions(disk_fill_per_hour=0.20),
        {CHECKPOINT_DISK_FILLING_UP: "ticket", CHECKPOINT_DISK_ALMOST_FULL: "page"},
        duration=30 * MINUTE + 2 * HOUR + 45 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
    Scenario(
        "stale_checkpoint",
        "From fault_at checkpoints still pause training but never succeed (the timestamp "
        f"stops moving). {CHECKPOINT_TOO_OLD} fires checkpoint_max_age + 10m after the last "
        "success (42m): ~2h52m simulated, <= 2h10m after onset with the default 2h.",
        Conditions(checkpoints_fail=True),
        {CHECKPOINT_TOO_OLD: "page"},
        duration=HOUR + 2 * HOUR + 30 * MINUTE,
        fault_at=HOUR,  # after the first checkpoint (42m), so one success is on record
    ),
    Scenario(
        "ecc_uncorrectable",
        "At fault_at the last GPU of node 0 reports 2 uncorrectable (and 16 corrected) ECC errors "
        "and a pending row remap; training continues. Both alerts fire within ~1m.",
        Conditions(ecc_gpus=((0, -1),)),
        {GPU_UNCORRECTABLE_ECC_ERRORS: "page", GPU_REMAPPED_ROWS_PENDING: "ticket"},
        duration=30 * MINUTE + 15 * MINUTE,
    ),
    Scenario(
        "xid_error",
        "At fault_at node 0 reports XID 74 (NVLink error, in xid_page_codes) on GPU 0, and "
        "XID 13 (graphics engine exception, an application fault) on its last GPU at onset "
        "and again 2m later (the exporter does not pre-seed 13, so the second one is the "
        "increase rules see); training continues. Both alerts fire within ~3m.",
        Conditions(xids=((0, 0, 74, 0), (0, -1, 13, 0), (0, -1, 13, 2 * MINUTE))),
        {GPU_XID_CRITICAL: "page", GPU_XID_ERROR: "ticket"},
        duration=30 * MINUTE + 15 * MINUTE,
    ),
    Scenario(
        "node_down",
        "At fault_at every endpoint of the last node (its ranks and its GPU exporter) stops "
        f"answering; ranks elsewhere hang. {NODE_DOWN} fires ~2m after onset and Alertmanager "
        f"inhibits the rest ({TRAINING_TARGETS_DOWN}, {TRAINING_STALLED}...).",
        Conditions(down_nodes=(-1,), stalled=True),
        {NODE_DOWN: "page"},
        duration=30 * MINUTE + 15 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
    # recovery.mode auto_restart (torchrun / the scheduler restarts the job): a restart inside
    # the budget reaches nobody; one that never comes back pages once, as no progress.
    Scenario(
        "restart_heals",
        "auto_restart job. At fault_at (50m, after the 42m checkpoint) every process dies; the "
        "launcher has them back 4m later: 2m start-up, 1m checkpoint restore, then the lost "
        "steps are redone. Nothing reaches anyone over the next hour: no page, no ticket "
        f"(under manual, {TRAINING_TARGETS_DOWN} would page ~2m after onset).",
        Conditions(crash_job=True, restart_after=4 * MINUTE),
        {},
        duration=50 * MINUTE + HOUR,
        fault_at=50 * MINUTE,
        recovery={"mode": "auto_restart", "restart_budget": "15m"},
    ),
    Scenario(
        "restart_never_back",
        "auto_restart job. At fault_at (50m) every process dies and the launcher never brings "
        f"them back. {TRAINING_NO_PROGRESS} pages once the restart budget (15m) has passed since "
        f"the last step; {TRAINING_TARGETS_DOWN} (a ticket under auto_restart, after budget + 5m) "
        "is covered by that page.",
        Conditions(crash_job=True),
        {TRAINING_NO_PROGRESS: "page"},
        duration=50 * MINUTE + 25 * MINUTE,
        fault_at=50 * MINUTE,
        later_alerts={TRAINING_TARGETS_DOWN: "ticket", CHECKPOINT_TOO_OLD: "page"},
        recovery={"mode": "auto_restart", "restart_budget": "15m"},
    ),
    Scenario(
        "restart_loop",
        "auto_restart job. From fault_at (50m) a new incarnation every 15m: each restores the "
        "42m checkpoint (its step and time), then dies in start-up before its first step. "
        f"Progress is durable: {TRAINING_NO_PROGRESS} pages once, restart budget + 1m after the "
        "last real step (before, each incarnation's start reset the clock and only the crash "
        f"loop paged, an hour later). {TRAINING_CRASH_LOOPING} does not page as well.",
        Conditions(restart_loop=15 * MINUTE),
        {TRAINING_NO_PROGRESS: "page"},
        duration=50 * MINUTE + 20 * MINUTE,
        fault_at=50 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
        recovery={"mode": "auto_restart"},
    ),
    Scenario(
        "completed",
        "manual job. At fault_at (50m) training ends cleanly: every rank reports phase done, "
        "then exits, and the job's targets leave service discovery. Completion is no "
        f"incident: nothing fires for the next 30m (before, {TRAINING_TARGETS_DOWN} paged ~2m "
        "later and kept firing).",
        Conditions(complete=True),
        {},
        duration=50 * MINUTE + 30 * MINUTE,
        fault_at=50 * MINUTE,
    ),
    Scenario(
        "completed_auto_restart",
        "auto_restart job. At fault_at (50m) training ends cleanly, as in `completed`. "
        f"Nothing fires for the next 30m (before, {TRAINING_NO_PROGRESS} paged once the restart "
        "budget had passed).",
        Conditions(complete=True),
        {},
        duration=50 * MINUTE + 30 * MINUTE,
        fault_at=50 * MINUTE,
        recovery={"mode": "auto_restart"},
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        *_SCENARIOS,
        *(
            Scenario(**{**p, "fault": Conditions(**p["fault"])})
            for p in (*FABRIC_SCENARIOS, *PEER_SCENARIOS, *CULPRIT_SCENARIOS)
        ),
    )
}

# Goodput's restart: not in the e2e alert matrix (what pages for it is the recovery mode's
# business), used by the goodput tests: `Simulation(spec, "restart")`.
RESTART = Scenario(
    "restart",
    "At fault_at (1h35m, 23m after the 1h12m checkpoint) every process dies; the launcher "
    "restarts them 4m later: 2m start-up, 1m restoring the checkpoint, then the steps since "
    "it are redone (lost progress) before the job moves forward again.",
    Conditions(crash_job=True, restart_after=4 * MINUTE),
    {},
    duration=3 * HOUR,
    fault_at=HOUR + 35 * MINUTE,
)


def scenario_named(scenario: str | Scenario) -> Scenario:
    """A scenario given by name (the matrix's or "restart") or as itself."""
    if not isinstance(scenario, str):
        return scenario
    if scenario == RESTART.name:
        return RESTART
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
    return SCENARIOS[scenario]

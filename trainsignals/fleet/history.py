"""The fault model of the fleet replay: a seeded Llama-3-scale interruption history.

Ground truth lives here and nowhere else: every interruption (cause, fault time, recovery,
node, GPU, UUID), the incidents automation does not fix, and the job's productive time. The
emitter turns this history into series; the evaluator never reads it, the report compares.

Scale: the fault timeline is drawn for the whole job (2,048 nodes x 8 GPUs, 54 days, Llama 3's
interruption counts, "The Llama 3 Herd of Models", table 5). Shorter runs keep the rate: the
counts are scaled to the run length by largest remainder.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

MINUTE = 60
HOUR = 3600
DAY = 86400

FLEET_NODES = 2048
GPUS_PER_NODE = 8
FULL_DAYS = 54


@dataclass(frozen=True)
class Cause:
    """One row of Llama 3's interruption table and what it looks like to the exporters."""

    name: str
    count: int  # interruptions in 54 days on 16,384 GPUs
    scope: str  # "gpu", "node" or "job" (no hardware to blame)
    xid: int | None = None  # XID the GPU reports, for GPU faults that have one
    detect_s: int = 120  # fault to process exit (NCCL timeout / watchdog / crash)

    @property
    def hardware(self) -> bool:
        return self.scope != "job"


# Signatures are a modelling choice, stated so they can be argued with:
# faulty GPU falls off the bus (XID 79, GPU answers no queries); HBM3: double-bit ECC (XID 48,
# uncorrected ECC, row remap pending); SRAM: uncontained ECC (XID 95); GSP timeout (XID 119);
# SDC: the restart's health check fails the GPU's row remapping; thermal: throttles and runs
# hot for 40 minutes, then drops off; node-level faults take the host off the network.
MIX: tuple[Cause, ...] = (
    Cause("faulty_gpu", 148, "gpu", 79),
    Cause("gpu_hbm3", 72, "gpu", 48),
    Cause("software_bug", 54, "job", detect_s=0),
    Cause("network_switch_cable", 35, "node"),
    Cause("host_maintenance", 32, "node"),
    Cause("gpu_sram", 19, "gpu", 95),
    Cause("gpu_system_processor", 17, "gpu", 119),
    Cause("nic", 7, "node"),
    Cause("nccl_watchdog_timeout", 7, "job", detect_s=300),
    Cause("silent_data_corruption", 6, "gpu", detect_s=0),
    Cause("gpu_thermal", 6, "gpu"),
    Cause("other_host", 16, "node"),
)
PLANNED_STOPS = 47
THERMAL_LEAD_S = 40 * MINUTE  # a thermal fault throttles this long before the crash

# The job's rhythm (what a healthy incarnation does).
CHECKPOINT_EVERY_S = 30 * MINUTE
CHECKPOINT_SAVE_S = 1 * MINUTE  # blocking part of a save
EVAL_EVERY_S = 6 * HOUR
EVAL_S = 2 * MINUTE
DATA_WAIT_RATIO = 0.02  # share of step time waiting for the data loader
STARTUP_S = (2 * MINUTE, 5 * MINUTE)  # process start to first step: init + checkpoint restore
RELAUNCH_S = (1 * MINUTE, 3 * MINUTE)  # processes gone: drain, reschedule, rendezvous

# Incidents automation does not fix, as (kind, share of the run where it starts, duration).
INCIDENTS: tuple[tuple[str, float, int], ...] = (
    # every restart dies in start-up (a broken image, a config the restore chokes on)
    ("restart_loop", 0.10, 2 * HOUR),
    ("crash_loop", 0.20, 2 * HOUR),  # a bad node the health check passes: crash after crash
    # A crash, then the job's pods stay Pending (no capacity): no rank target is scraped for
    # hours while the nodes' exporters run on. One incident until the pods are scheduled.
    ("dead_job", 0.28, 6 * HOUR),
    ("hang", 0.40, 90 * MINUTE),  # ranks up, no steps; the watchdog misses it
    # every save fails, and the job restarts every 110 minutes from the last good one
    ("checkpoint_broken_restarts", 0.50, 4 * HOUR),
    ("checkpoint_stall", 0.60, 6 * HOUR),  # saves silently stop; training goes on
    ("throughput_leak", 0.78, 14 * HOUR),  # steps slow down to half speed over 10 hours
)
CRASH_LOOP_PERIOD_S = 8 * MINUTE
RESTART_LOOP_PERIOD_S = 15 * MINUTE
CHECKPOINT_RESTART_PERIOD_S = 110 * MINUTE
# The job completes (a clean exit, phase "done") this long before the replay ends, or an hour
# after the leak is fixed if that is later: nothing may page for the rest of the run, while
# the GPU exporter DaemonSet on its nodes is scraped on (it is never removed for one job).
# Three days: well past any one-day memory of "completed" in the rules.
COMPLETION_TAIL_S = 3 * DAY
DEAD_PENDING_AFTER_S = 2 * MINUTE  # a dead job's exited pods are deleted, new ones Pending
LEAK_RAMP_S = 10 * HOUR
LEAK_FLOOR = 0.5


def gpu_uuid(node: str, gpu: int) -> str:
    digest = hashlib.sha256(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


@dataclass
class Interruption:
    """One stop of the job and its automatic restart. Times are seconds from the run start."""

    cause: str
    scope: str  # gpu, node, job, planned
    fault_s: int  # the fault (or the planned stop)
    down_s: int  # processes exit
    up_s: int  # processes back (node drained and replaced by then)
    first_step_s: int  # first step after the restart
    node: str = ""
    gpu: int | None = None
    xid: int | None = None
    incident: str = ""  # set for the restarts of a crash-loop incident

    @property
    def hardware(self) -> bool:
        return self.scope in ("gpu", "node") and not self.incident

    @property
    def uuid(self) -> str:
        return gpu_uuid(self.node, self.gpu) if self.gpu is not None else ""

    @property
    def restart_cost_s(self) -> int:
        return self.first_step_s - self.fault_s


@dataclass
class Incident:
    """Something automation does not fix: a human is needed, so exactly one page is right."""

    kind: str
    start_s: int
    end_s: int
    node: str = ""
    fixed_s: int = 0  # when the fix takes effect, if before end_s (a restart that works)

    @property
    def healed_s(self) -> int:
        """From here on the incident's page may resolve; before, it is still needed."""
        return self.fixed_s or self.end_s


@dataclass
class History:
    seed: int
    days: float
    interruptions: list[Interruption] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    completed_s: int = 0  # the job's clean exit (0: it runs to the end)
    failslows: list = field(default_factory=list)  # failslow.FailSlow, in time order
    lemons: tuple[str, ...] = ()  # nodes failing LEMON_RATE_X as often (failslow.py)
    tickets: list = field(default_factory=list)  # failslow.Ticket: non-fatal evidence, by time

    @property
    def wall_s(self) -> int:
        # Whole minutes (the timeline's resolution); round: 2.8 days is 241919.99... s.
        return round(self.days * DAY) // MINUTE * MINUTE

    @property
    def hardware_faults(self) -> list[Interruption]:
        return [i for i in self.interruptions if i.hardware]


def scaled_counts(days: float) -> dict[str, int]:
    """Interruptions per cause for a run of `days`, Llama 3's rate (largest remainder)."""
    rows = [(c.name, c.count) for c in MIX] + [("planned", PLANNED_STOPS)]
    exact = {name: count * days / FULL_DAYS for name, count in rows}
    counts = {name: int(value) for name, value in exact.items()}
    total = round(sum(exact.values()))
    by_remainder = sorted(exact, key=lambda n: (-(exact[n] - counts[n]), n))
    for name in by_remainder[: total - sum(counts.values())]:
        counts[name] += 1
    return counts


def build_interruptions(days: float = FULL_DAYS, seed: int = 405) -> History:
    rng = random.Random(seed)
    history = History(seed=seed, days=days)
    wall = history.wall_s
    # Incidents first, at fixed points of the run; interruptions keep clear of them so each
    # incident is judged on its own (a restart would also mask a stale checkpoint or a leak).
    blocked: list[tuple[int, int]] = []
    for kind, share, duration in INCIDENTS:
        start = int(wall * share) // MINUTE * MINUTE
        history.incidents.append(Incident(kind, start, start + duration))
        blocked.append((start - 45 * MINUTE, start + duration + 45 * MINUTE))
    # The clean exit, and no faults after it: a completed job has no GPUs left to break.
    leak_end = next(i.end_s for i in history.incidents if i.kind == "throughput_leak")
    done = max(wall - COMPLETION_TAIL_S, leak_end + HOUR) // MINUTE * MINUTE
    history.completed_s = done if done <= wall - 30 * MINUTE else 0  # short runs: no room
    if history.completed_s:
        blocked.append((history.completed_s - 30 * MINUTE, wall))

    causes = {c.name: c for c in MIX}
    kinds = [name for name, n in sorted(scaled_counts(days).items()) for _ in range(n)]
    rng.shuffle(kinds)
    times = _spread(rng, len(kinds), wall, blocked)
    members = [f"gpu-n{i:04d}" for i in range(FLEET_NODES)]
    spares = 0
    for kind, fault in zip(kinds, times, strict=True):
        if kind == "planned":
            down = fault + CHECKPOINT_SAVE_S  # an on-demand checkpoint, then a clean stop
            up = down + rng.randrange(4, 9) * MINUTE
            history.interruptions.append(
                Interruption("planned", "planned", fault, down, up, up + _pick(rng, STARTUP_S))
            )
            continue
        cause = causes[kind]
        index = rng.randrange(FLEET_NODES)
        down = fault + cause.detect_s
        up = down + _pick(rng, RELAUNCH_S)
        interruption = Interruption(
            cause.name,
            cause.scope,
            fault,
            down,
            up,
            up + _pick(rng, STARTUP_S),
            node=members[index],
            gpu=rng.randrange(GPUS_PER_NODE) if cause.scope == "gpu" else None,
            xid=cause.xid,
        )
        history.interruptions.append(interruption)
        if cause.hardware:  # drained: a spare with a new hostname takes its place
            members[index] = f"gpu-s{spares:04d}"
            spares += 1

    by_kind = {i.kind: i for i in history.incidents}
    _restart_loop(history, by_kind["restart_loop"])
    _checkpoint_restarts(history, by_kind["checkpoint_broken_restarts"])
    loop = by_kind["crash_loop"]
    loop.node = members[rng.randrange(FLEET_NODES)]
    t = loop.start_s
    while t < loop.end_s:
        down = t + MINUTE
        up = down + 2 * MINUTE
        history.interruptions.append(
            Interruption(
                "crash_loop",
                "node",
                t,
                down,
                up,
                up + 2 * MINUTE,
                node=loop.node,
                incident="crash_loop",
            )
        )
        t += CRASH_LOOP_PERIOD_S
    loop.fixed_s = history.interruptions[-1].up_s  # the bad node drained: that restart holds
    dead = by_kind["dead_job"]
    history.interruptions.append(
        Interruption(
            "dead_job",
            "job",
            dead.start_s,
            dead.start_s + MINUTE,
            dead.end_s,  # the pods are scheduled at last
            dead.end_s + 4 * MINUTE,
            incident="dead_job",
        )
    )
    # The hang and the leak end when a human restarts the job (the hang loses its progress).
    hang, leak = by_kind["hang"], by_kind["throughput_leak"]
    history.interruptions.append(
        Interruption(
            "hang",
            "job",
            hang.start_s,
            hang.end_s,
            hang.end_s + 2 * MINUTE,
            hang.end_s + 5 * MINUTE,
            incident="hang",
        )
    )
    history.interruptions.append(
        Interruption(
            "manual_restart",
            "planned",
            leak.end_s,
            leak.end_s + CHECKPOINT_SAVE_S,
            leak.end_s + 3 * MINUTE,
            leak.end_s + 6 * MINUTE,
            incident="throughput_leak",
        )
    )
    history.interruptions.sort(key=lambda i: i.fault_s)
    return history


def _restart_loop(history: History, incident: Incident) -> None:
    """Every RESTART_LOOP_PERIOD_S a new incarnation, which dies in start-up, before its first
    step; a human fixes it at the end (that restart reaches its first step)."""
    t = incident.start_s
    while t < incident.end_s:
        period = min(RESTART_LOOP_PERIOD_S, incident.end_s - t)
        last = t + period >= incident.end_s
        up = t + 3 * MINUTE
        first = up + 3 * MINUTE if last else t + period
        history.interruptions.append(
            Interruption("restart_loop", "job", t, t + MINUTE, up, first, incident="restart_loop")
        )
        if last:  # the human's fix: this incarnation reaches its first step
            incident.fixed_s = t
        t += period


def _checkpoint_restarts(history: History, incident: Incident) -> None:
    """Saves fail for the whole incident; the job restarts every CHECKPOINT_RESTART_PERIOD_S
    (from the last good checkpoint, which gets older and older)."""
    t = incident.start_s + CHECKPOINT_RESTART_PERIOD_S
    while t < incident.end_s:
        history.interruptions.append(
            Interruption(
                "software_bug",
                "job",
                t,
                t + 2 * MINUTE,
                t + 4 * MINUTE,
                t + 7 * MINUTE,
                incident="checkpoint_broken_restarts",
            )
        )
        t += CHECKPOINT_RESTART_PERIOD_S


def _pick(rng: random.Random, bounds: tuple[int, int]) -> int:
    return rng.randrange(bounds[0] // MINUTE, bounds[1] // MINUTE + 1) * MINUTE


def _spread(rng: random.Random, n: int, wall: int, blocked: list[tuple[int, int]]) -> list[int]:
    """n fault times on whole minutes, at least 40 minutes apart, outside `blocked`.

    Uniform order statistics over the free time minus each event's 40 minutes, mapped back
    onto the free intervals (blocked intervals only widen the gaps).
    """
    gap = 40 * MINUTE
    free: list[tuple[int, int]] = []
    cursor = 2 * HOUR
    for start, end in sorted(blocked):
        if start > cursor:
            free.append((cursor, start))
        cursor = max(cursor, end)
    free.append((cursor, wall - 2 * HOUR))
    slack = sum(end - start for start, end in free) - n * gap
    if slack <= 0:
        raise ValueError(f"{n} interruptions do not fit in {wall / DAY:g} days; run longer")
    times: list[int] = []
    for k, offset in enumerate(sorted(rng.uniform(0, slack) for _ in range(n))):
        position = offset + k * gap
        for start, end in free:
            if position < end - start:
                times.append(start + int(position) // MINUTE * MINUTE)
                break
            position -= end - start
    return times

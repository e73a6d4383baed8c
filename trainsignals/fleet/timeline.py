"""Minute-by-minute state of the replayed job, and the ground truth of its goodput.

`simulate(history, slots)` walks the run one minute at a time: what phase the ranks are in,
their counters, which node holds each stored slot, which GPU shows which fault. The emitter
only formats these minutes; the ground-truth badput is summed here, from the same walk.

Minute m covers [60 m, 60 m + 60) seconds of the run; its sample is written at 60 (m + 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainsignals.exporters.training.timeaccount import ACTIVITIES

from .failslow import OWN_SHARE, WAIT_TICKS_S, FailSlow
from .history import (
    CHECKPOINT_EVERY_S,
    DATA_WAIT_RATIO,
    DEAD_PENDING_AFTER_S,
    EVAL_EVERY_S,
    EVAL_S,
    FLEET_NODES,
    LEAK_FLOOR,
    LEAK_RAMP_S,
    MINUTE,
    THERMAL_LEAD_S,
    History,
    Interruption,
)

STEP_SECONDS = 6.0  # nominal step time
IB_BYTES_MINUTE = 2.4e10  # each InfiniBand traffic counter's growth per minute
FIRST_STARTUP_S = 5 * MINUTE
BADPUT = ("startup", "checkpoint", "eval", "data_wait", "lost", "recovery")


@dataclass(slots=True)
class Minute:
    alive: bool  # training processes up (scrapes succeed)
    phase: str  # startup, train, checkpoint, eval (meaningful while alive)
    steps: float  # steps of this incarnation so far (counters restart with the process)
    step_seconds: float  # current step time
    data_wait: float  # seconds waited for data in this incarnation
    # Run seconds of the incarnation's last completed step / the newest checkpoint, as the
    # ranks report them: a new incarnation reports the checkpoint it restored and no step
    # until its first; None: none yet (absent).
    last_step: int | None
    last_checkpoint: int | None
    loss: float
    busy: float  # GPU utilization
    incarnation: int
    process_start: int
    nodes: tuple[str, ...]  # hostname in each stored slot
    down_slots: frozenset[int] = frozenset()  # slots whose host is off the network
    gpu_faults: tuple[tuple[int, int, Interruption], ...] = ()  # (slot, gpu, fault) shown
    global_step: float = 0.0  # the trainer's step: back to the checkpoint's after a restart
    # Seconds of this incarnation per activity (exporters/training/timeaccount.ACTIVITIES).
    activity: tuple[float, ...] = ()
    # The ranks' targets left service discovery (the job completed, or its pods are Pending);
    # the exporters of its nodes (GPU DaemonSet, node_exporter) are scraped on.
    gone: bool = False
    # Fail-slows (failslow.py): (slot, fail-slow) shown now; a healthy rank's own work in this
    # incarnation and what the slow rank did on top; per slot, the bytes its InfiniBand port
    # is behind its peers' and its transmit wait ticks.
    slow: tuple[tuple[int, FailSlow], ...] = ()
    own_work: float = 0.0
    slow_own: float = 0.0
    slow_rank: tuple[int, int] | None = None  # (slot, local rank) slow_own belongs to
    # A hang's culprit: (slot, local rank) stuck in a data wait open this long, GPU idle.
    stuck: tuple[int, int] | None = None
    stuck_for: float = 0.0
    ib_deficit: tuple[float, ...] = ()
    ib_wait: tuple[float, ...] = ()


@dataclass
class Truth:
    wall_s: int
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(BADPUT, 0.0))
    productive_s: float = 0.0
    # Training seconds fail-slows took (the job stepping at the slowest rank's pace): a
    # throughput loss, so it is no badput of the time-based ETTR, like the throughput leak.
    slow_s: float = 0.0

    @property
    def ettr(self) -> float:
        return self.productive_s / self.wall_s


def _slot_plan(history: History, slots: int) -> list[tuple[int, tuple[str, ...]]]:
    """(from second, hostnames of the slots) per incarnation.

    Slot 0..W-1 store W of the job's nodes. Each incarnation shows the node its ending fault
    will hit (in a rotating slot) and the node of a fail-slow in it (in another slot); the
    other 2,048 - W nodes run in lockstep and would only repeat the healthy series under
    other hostnames.
    """
    nodes = [f"gpu-n{FLEET_NODES - slots + i:04d}" for i in range(slots)]
    plan: list[tuple[int, tuple[str, ...]]] = []
    start = 0
    for k, interruption in enumerate(history.interruptions):
        if interruption.node and interruption.node not in nodes:
            nodes[k % slots] = interruption.node
        _show_failslows(history, nodes, start, interruption.fault_s, interruption.node)
        plan.append((start, tuple(nodes)))
        start = interruption.up_s
    _show_failslows(history, nodes, start, history.wall_s, "")
    plan.append((start, tuple(nodes)))
    return plan


def _show_failslows(history: History, nodes: list[str], start: int, end: int, keep: str) -> None:
    """Put the node of each fail-slow of [start, end) in a slot, never the slot of `keep`
    (the node the incarnation's ending fault hits)."""
    for failslow in history.failslows:
        if start <= failslow.start_s < end and failslow.node not in nodes:
            free = [i for i, node in enumerate(nodes) if node != keep]
            nodes[free[-1]] = failslow.node


def simulate(history: History, slots: int) -> tuple[list[Minute], Truth]:
    wall = history.wall_s
    # A job that completed is measured over its life, not the silence after it.
    truth = Truth(history.completed_s or wall)
    plan = _slot_plan(history, slots)
    stall = next(i for i in history.incidents if i.kind == "checkpoint_stall")
    broken = next((i for i in history.incidents if i.kind == "checkpoint_broken_restarts"), stall)
    leak = next(i for i in history.incidents if i.kind == "throughput_leak")
    stops = history.interruptions
    minutes: list[Minute] = []

    k = 0  # next interruption
    plan_index = 0
    incarnation = 0
    process_start = 0
    first_step = FIRST_STARTUP_S
    steps = data_wait = 0.0
    last_step: int | None = None
    last_checkpoint: int | None = None
    kept_checkpoint: int | None = None  # when the checkpoint a restart restores was written
    kept_progress = progress = 0.0  # steps kept by the last checkpoint / done overall
    since_checkpoint_s = 0.0  # training seconds since the last successful checkpoint
    train_clock = 0  # training seconds of this incarnation (drives checkpoints, evals)
    pending: list[str] = []  # checkpoint / eval minutes queued by the train clock

    account = dict.fromkeys(ACTIVITIES, 0.0)  # what this incarnation's ranks account
    own = slow_own = 0.0  # a healthy rank's own work, the slow rank's on top (incarnation)
    slow_rank: tuple[int, int] | None = None
    ib_deficit: dict[str, float] = {}  # per node, for good (node counters never reset)
    ib_wait: dict[str, float] = {}
    for m in range(wall // MINUTE):
        t = m * MINUTE
        while plan_index + 1 < len(plan) and plan[plan_index + 1][0] <= t:
            plan_index += 1
        nodes = plan[plan_index][1]
        current: Interruption | None = stops[k] if k < len(stops) else None
        if current is not None and t >= current.up_s:
            # The processes are back: a new incarnation with fresh counters, in start-up (its
            # process start time and no step yet) until its first step.
            k += 1
            incarnation += 1
            process_start, first_step = current.up_s, current.first_step_s
            steps = data_wait = 0.0
            account = dict.fromkeys(ACTIVITIES, 0.0)
            own = slow_own = 0.0
            slow_rank = None
            last_step, last_checkpoint = None, kept_checkpoint
            progress = kept_progress
            train_clock = 0
            pending = []
            current = stops[k] if k < len(stops) else None

        if history.completed_s and t >= history.completed_s:
            # The last minute says "done" (TrainingMetrics.finish()), then the job is gone.
            done = t == history.completed_s
            minutes.append(
                Minute(
                    alive=done,
                    phase="done",
                    steps=steps,
                    step_seconds=STEP_SECONDS,
                    data_wait=data_wait,
                    last_step=last_step,
                    last_checkpoint=last_checkpoint,
                    loss=1.7 + 6.0 / (1 + progress / 2000) ** 0.5,
                    busy=0.0,
                    incarnation=incarnation,
                    process_start=process_start,
                    nodes=nodes,
                    global_step=progress,
                    activity=tuple(account[a] for a in ACTIVITIES),
                    gone=not done,
                    own_work=own,
                    slow_own=slow_own,
                    slow_rank=slow_rank,
                    ib_deficit=tuple(ib_deficit.get(n, 0.0) for n in nodes),
                    ib_wait=tuple(ib_wait.get(n, 0.0) for n in nodes),
                )
            )
            if done:  # the final minute is after the job's life (its wall time ends here)
                account["other"] += MINUTE
            continue
        alive, phase, busy, step_seconds = True, "train", 0.97, STEP_SECONDS
        stuck, stuck_for = None, 0.0
        slow = tuple(
            (nodes.index(f.node), f) for f in history.failslows if f.active(t) and f.node in nodes
        )
        for slot, failslow in slow:
            if failslow.own_factor != 1 and failslow.gpu is not None:
                slow_rank = (slot, failslow.gpu)
            if failslow.kind == "link":
                lag = IB_BYTES_MINUTE * (1 - failslow.factor)
                ib_deficit[failslow.node] = ib_deficit.get(failslow.node, 0.0) + lag
                if failslow.congested:
                    waited = ib_wait.get(failslow.node, 0.0) + WAIT_TICKS_S * MINUTE
                    ib_wait[failslow.node] = waited
        category, gone = "", False
        if current is not None and t >= current.fault_s:
            if t == current.fault_s and current.scope != "planned":
                lost = since_checkpoint_s * (1 - DATA_WAIT_RATIO)
                truth.seconds["lost"] += lost
                truth.productive_s -= lost
                since_checkpoint_s = 0.0
            if t < current.down_s:
                if current.scope == "planned":  # on-demand checkpoint, then a clean stop
                    # Every rank announces the stop (TrainingMetrics.stopping()) after the save.
                    phase, category = "stopping", "checkpoint"
                    kept_progress = progress
                    last_checkpoint = kept_checkpoint = t + MINUTE
                    since_checkpoint_s = 0.0
                else:  # stuck in a collective until the watchdog or the crash
                    category, busy = "recovery", 1.0
                    if current.incident == "hang" and current.node in nodes:
                        stuck = (nodes.index(current.node), current.gpu or 0)
                        stuck_for = t + MINUTE - current.fault_s
            elif t < current.up_s:
                alive, busy, category = False, 0.0, "recovery"
                unscheduled = current.incident == "dead_job"
                gone = unscheduled and t >= current.down_s + DEAD_PENDING_AFTER_S
            else:
                phase, category, busy = "startup", "startup", 0.3
        elif t < first_step:
            phase, category, busy = "startup", "startup", 0.3
        elif pending:
            phase = category = pending.pop(0)
            busy = 0.5
            failing = stall.start_s <= t < stall.end_s or broken.start_s <= t < broken.end_s
            if phase == "checkpoint" and not failing:
                kept_progress = progress
                last_checkpoint = kept_checkpoint = t + MINUTE
                since_checkpoint_s = 0.0
        else:
            speed = 1.0
            if leak.start_s <= t < leak.end_s:
                speed = 1 - (1 - LEAK_FLOOR) * min(1.0, (t - leak.start_s) / LEAK_RAMP_S)
            # Synchronous training: every step waits for the slowest rank (the fail-slow).
            slowdown = max((f.slowdown for _, f in slow), default=1.0)
            step_seconds = STEP_SECONDS / speed * slowdown
            training_s = MINUTE * (1 - DATA_WAIT_RATIO)
            own += training_s * OWN_SHARE / slowdown
            slow_own += sum(training_s * OWN_SHARE / slowdown * (f.own_factor - 1) for _, f in slow)
            truth.slow_s += training_s * (1 - 1 / slowdown)
            done = MINUTE * (1 - DATA_WAIT_RATIO) / step_seconds
            steps += done
            progress += done
            data_wait += MINUTE * DATA_WAIT_RATIO
            last_step = t + MINUTE - 2
            truth.productive_s += MINUTE * (1 - DATA_WAIT_RATIO)
            truth.seconds["data_wait"] += MINUTE * DATA_WAIT_RATIO
            since_checkpoint_s += MINUTE
            train_clock += MINUTE
            if train_clock % CHECKPOINT_EVERY_S == 0:
                pending.append("checkpoint")
            if train_clock % EVAL_EVERY_S == 0:
                pending.extend(["eval"] * (EVAL_S // MINUTE))
        if category:
            truth.seconds[category] += MINUTE
        if alive:
            if category == "recovery":  # stuck in a collective: neither step nor pause
                account["other"] += MINUTE
            elif phase == "train":
                account["train"] += MINUTE * (1 - DATA_WAIT_RATIO)
                account["data_wait"] += MINUTE * DATA_WAIT_RATIO
            else:
                saving = phase in ("checkpoint", "stopping")  # a planned stop saves first
                account["checkpoint_save" if saving else phase] += MINUTE

        down_slots: set[int] = set()
        faults: list[tuple[int, int, Interruption]] = []
        for nearby in stops[max(0, k - 1) : k + 2]:
            _overlay(nearby, t, nodes, down_slots, faults)
        minutes.append(
            Minute(
                alive=alive,
                phase=phase,
                steps=steps,
                step_seconds=step_seconds,
                data_wait=data_wait,
                last_step=last_step,
                last_checkpoint=last_checkpoint,
                loss=1.7 + 6.0 / (1 + progress / 2000) ** 0.5,
                busy=busy,
                incarnation=incarnation,
                process_start=process_start,
                nodes=nodes,
                down_slots=frozenset(down_slots),
                gpu_faults=tuple(faults),
                global_step=progress,
                activity=tuple(account[a] for a in ACTIVITIES),
                gone=gone,
                slow=slow,
                own_work=own,
                slow_own=slow_own,
                slow_rank=slow_rank,
                ib_deficit=tuple(ib_deficit.get(n, 0.0) for n in nodes),
                ib_wait=tuple(ib_wait.get(n, 0.0) for n in nodes),
                stuck=stuck,
                stuck_for=stuck_for,
            )
        )
    return minutes, truth


def _overlay(
    fault: Interruption,
    t: int,
    nodes: tuple[str, ...],
    down_slots: set[int],
    faults: list[tuple[int, int, Interruption]],
) -> None:
    """What a hardware fault shows on its node until the node is drained (the restart)."""
    if not fault.node or fault.node not in nodes or t >= fault.up_s:
        return
    lead = THERMAL_LEAD_S if fault.cause == "gpu_thermal" else 0
    if t < fault.fault_s - lead:
        return
    slot = nodes.index(fault.node)
    if fault.scope == "node" and not fault.incident:
        if t >= fault.fault_s:
            down_slots.add(slot)
    elif fault.gpu is not None:
        faults.append((slot, fault.gpu, fault))

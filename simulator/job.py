"""Simulation: a synthetic training job with fake GPUs, a fault, and a deterministic clock.

Time compression: the timeline (phases, fault onset, loss curve, leaks, disk filling) runs in
simulated seconds, `time_scale` times faster than real time; every per-second quantity
(counters, step durations, gauges) is nominal per REAL second, and timestamps are real Unix
times. Real time of simulated second t is `start_time + t / time_scale`.

The clock moves in fixed ticks (min(10 s, 0.25 s x time_scale) simulated), so the series
depend only on the seed and the simulated time reached, never on how advance_to was called.
Tests step it with advance_to(); start() serves HTTP and drives it from the wall clock.
"""

from __future__ import annotations

import math
import random
import threading
import time
from pathlib import Path

from trainsignals.exporters.training import TrainingMetrics
from trainsignals.exporters.training.disk import DiskUsage
from trainsignals.generator.spec.job import JobSpec

from .cluster import MAX_GPUS_PER_NODE, MAX_NODES, Node, Rank, build_cluster, effective_spec
from .culprit import host_factors, own_work, pace, stuck_ranks
from .onset import fault_onset
from .profile import JobProfile
from .scenarios import Conditions, Scenario, scenario_named
from .serving import Endpoints
from .targets import Target
from .truth import GroundTruth

__all__ = ["MAX_GPUS_PER_NODE", "MAX_NODES", "Simulation", "effective_spec"]

HEALTHY = Conditions()


class Simulation:
    """A running (or stepped) simulated job. Rules for it must come from `self.spec`.

    `spec` is the effective spec: the input spec with the simulated shape, so MFU, the
    throughput floor and the expected target count match what is served.
    """

    def __init__(
        self,
        spec: JobSpec,
        scenario: str | Scenario = "healthy",
        *,
        time_scale: float = 1.0,
        seed: int = 0,
        nodes: int | None = None,
        gpus_per_node: int | None = None,
        fault_at: float | None = None,
        host: str = "127.0.0.1",
        base_port: int = 0,
        targets_dir: Path | None = None,
        start_time: float | None = None,
    ) -> None:
        scenario = scenario_named(scenario)
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.spec = effective_spec(spec, nodes, gpus_per_node)
        self.scenario = scenario
        self.profile = JobProfile.from_spec(self.spec)
        self.time_scale = float(time_scale)
        self.fault_at = float(scenario.fault_at if fault_at is None else fault_at)
        stall_real = self.spec.objectives.stall_after / self.time_scale
        if self.profile.step_seconds * 3 > stall_real:
            raise ValueError(
                f"time_scale {time_scale:g} is too large: the healthy step "
                f"({self.profile.step_seconds:g} s, real) would look like a stall "
                f"(stall_after {self.spec.objectives.stall_after} s / {time_scale:g} = "
                f"{stall_real:.2f} s real); use at most "
                f"{self.spec.objectives.stall_after / (3 * self.profile.step_seconds):g}"
            )
        self.host, self.base_port, self.targets_dir = host, base_port, targets_dir
        self.start_time = time.time() if start_time is None else start_time
        self.tick = min(10.0, 0.25 * self.time_scale)  # simulated seconds per tick
        self.sim_time = 0.0
        self._ticks = 0
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._phase = "startup"
        self._step_progress = 0.0  # real seconds into the current step
        self._next_step: float | None = None
        self._dropped_debt = 0.0
        self._onset_done = False
        self._xids_sent: set[int] = set()  # positions in Conditions.xids already injected
        self._thread: threading.Thread | None = None
        # Goodput: the job's global step, its last checkpoint and high-water mark, and the
        # ground truth (real seconds per goodput category, see generator/signals/goodput.py).
        self._global_step = self._checkpoint_step = self._high_water = 0
        self._restarted_at: float | None = None
        self._checkpoint_time: float | None = None  # Unix time of the last good save
        self._loop_restarts = 0  # restarts of a restart loop so far
        self._completed = False
        self._restoring = False
        self._restore_scopes: list = []
        self._stepped = False  # a step completed since the processes (re)started
        # The ranks' clock: a tick's state covers the tick's interval, so what changes at a
        # tick (phase, restart) happens at its start; scrapes see its end.
        self._metrics_now = self.start_time
        self.truth = GroundTruth()
        self._stop = threading.Event()
        self.finished = threading.Event()
        self._build()

    # --- construction ------------------------------------------------------------------
    def _build(self) -> None:
        self.nodes, self.ranks = build_cluster(
            self.spec,
            self.profile,
            self.host,
            lambda node, rank, local: self._metrics(node, rank, local, self.start_time),
        )
        self.endpoints = Endpoints(
            self.nodes,
            self.ranks,
            self.spec.selector_labels,
            self.host,
            self.base_port,
            self.targets_dir,
        )

    def _metrics(self, node: Node, rank: int, local: int, started: float) -> TrainingMetrics:
        return TrainingMetrics(
            rank=rank,
            local_rank=local,
            world_size=self.spec.shape.gpus,
            node=node.name,
            labels=self.spec.selector_labels,
            checkpoint_dir=self.spec.checkpoint_path or f"/checkpoints/{self.spec.name}",
            start_time=started,
            step_time_bound=self.spec.objectives.step_time_max_seconds,
            disk_usage=lambda _path: DiskUsage(self.profile.disk_size_bytes, node.disk_free),
            clock=lambda: self._metrics_now,
        )

    def _restart(self, t: float) -> None:
        """The launcher brings every process back: new incarnations, counters from zero."""
        self._restarted_at, self._stepped = t, False
        started = self._metrics_now  # the tick's start
        for node in self.nodes:
            for r in node.ranks:
                r.metrics.stop_http_server()
                r.metrics = self._metrics(node, r.rank, r.local_rank, started)
                r.target.registry = r.metrics.registry
                r.up = True
                if self.endpoints.serving:
                    self.endpoints.serve_rank(r)
        self._phase = "startup"

    def _restart_phase(self, t: float, c: Conditions, live: list[Rank]) -> str | None:
        """startup, then the checkpoint restore, after a restart; None once training again."""
        if self._restarted_at is None:
            return None
        restore_at = self._restarted_at + self.profile.startup_seconds
        restore = restore_at <= t < restore_at + c.restore_seconds
        if restore and not self._restoring:
            self._restoring = True
            self._global_step = self._checkpoint_step
            self._restore_scopes = [
                r.metrics.checkpoint_restore(
                    step=self._checkpoint_step, timestamp=self._checkpoint_time
                )
                for r in live
            ]
            for scope in self._restore_scopes:
                scope.__enter__()
        elif not restore and self._restoring:
            self._restoring = False
            for scope in self._restore_scopes:
                scope.__exit__()
        # A restart loop's incarnations die in start-up: they never reach a step.
        return "startup" if t < restore_at + c.restore_seconds or c.restart_loop else None

    # --- clock -------------------------------------------------------------------------
    def real_time_at(self, sim_seconds: float) -> float:
        return self.start_time + sim_seconds / self.time_scale

    def advance_to(self, sim_seconds: float) -> None:
        """Run every whole tick up to sim_seconds (simulated); never goes backwards."""
        with self._lock:
            while (self._ticks + 1) * self.tick <= sim_seconds + 1e-9:
                self._ticks += 1
                self.sim_time = self._ticks * self.tick
                self._step(self.sim_time, self.tick / self.time_scale)

    def advance(self, sim_seconds: float) -> None:
        self.advance_to(self.sim_time + sim_seconds)

    @property
    def phase(self) -> str:
        """The job's current phase (what every live rank reports)."""
        return self._phase

    @property
    def fault_active(self) -> bool:
        return self.scenario.name != "healthy" and self.sim_time >= self.fault_at

    def conditions(self) -> Conditions:
        return self.scenario.fault if self.fault_active else HEALTHY

    # --- one tick ----------------------------------------------------------------------
    def _complete(self) -> None:
        """Training ended cleanly: each rank marks phase done and waits for its next scrape
        (TrainingMetrics.finish()), then exits; the scheduler releases the nodes, and the
        job's file_sd files (ranks, GPU exporters, node_exporters) become empty."""
        self._completed = True
        for r in self.ranks:
            if r.up:
                r.metrics.finish()
        for r in self.ranks:
            r.take_down()
        self.endpoints.withdraw()

    def _step(self, t: float, dt_real: float) -> None:
        self._metrics_now = self.real_time_at(t - self.tick)
        c = self.conditions()
        if self.fault_active and not self._onset_done:
            self._onset_done = True
            fault_onset(c, self.nodes, self.ranks, self.endpoints)
        elapsed_h = max(0.0, t - self.fault_at) / 3600 if self.fault_active else 0.0
        for i, (n, g, xid, after) in enumerate(c.xids):
            if i not in self._xids_sent and t >= self.fault_at + after:
                self._xids_sent.add(i)
                node = self.nodes[n]
                node.backend.inject_xid(node.gpus[g].index, xid)
        for n in c.ib_flapping:
            self.nodes[n].fabric.flap(t - self.fault_at)
        now = self.real_time_at(t)
        if (
            c.restart_after is not None
            and self._restarted_at is None
            and t >= self.fault_at + c.restart_after
        ):
            self._restart(t)
        if c.restart_loop and self.fault_active:
            due = int((t - self.fault_at) // c.restart_loop) + 1
            if due > self._loop_restarts:
                self._loop_restarts = due
                self._restart(t)
        if c.complete and self.fault_active and not self._completed:
            self._complete()
        live = [r for r in self.ranks if r.up]

        phase = self._restart_phase(t, c, live) or (
            "train" if c.stalled else self.profile.phase_at(t)
        )
        if phase != self._phase:
            if self._phase == "checkpoint" and live and self._checkpoint_succeeds(c):
                self._checkpoint_step = self._global_step
                self._checkpoint_time = now
                for r in live:
                    r.metrics.checkpoint_saved(timestamp=now)
            for r in live:
                r.metrics.phase(phase)
            self._phase = phase

        speed = self.profile.speed_at(t) * c.speed
        speed *= max(c.speed_floor, 1.0 - c.speed_loss_per_hour * elapsed_h)
        wait = self.profile.data_wait_ratio if c.data_wait_ratio is None else c.data_wait_ratio
        compute = self.profile.step_seconds * (1.0 - self.profile.data_wait_ratio) / speed
        compute *= pace(host_factors(c, self.nodes))  # a slow host's ranks set the step
        step_seconds = compute / (1.0 - wait)

        self._metrics_now = now
        stepping = phase in ("train", "warmup") and not c.stalled and bool(live)
        self.truth.tick(
            live=bool(live),
            restoring=self._restoring,
            phase=phase,
            stepping=stepping,
            seconds=dt_real,
            unfinished_step=self._step_progress,
        )
        if stepping:
            self._step_progress += dt_real
            while True:
                if self._next_step is None:
                    self._next_step = step_seconds * math.exp(self._rng.gauss(0.0, 0.03))
                if self._step_progress < self._next_step:
                    break
                self._step_progress -= self._next_step
                # The step ended inside this tick: its exact end, for the time accounting.
                ended = now - self._step_progress
                self._complete_step(live, t, ended, self._next_step, wait, c)
                self._next_step = None
        else:
            self._step_progress, self._next_step = 0.0, None

        for node in self.nodes:
            node.tick_hardware(
                self.profile,
                phase=phase,
                stalled=c.stalled,
                data_wait_ratio=wait,
                waiting=stuck_ranks(c, self.ranks),
                hot_gpus={node.gpus[g].index for n, g in c.hot_gpus if self.nodes[n] is node},
                disk_filled=c.disk_fill_per_hour * elapsed_h,
                seconds=dt_real,
                rng=self._rng,
                clock_factors={
                    node.gpus[g].index: f for n, g, f in c.slow_gpus if self.nodes[n] is node
                },
            )
            # Collective traffic moves while the ranks step (not in pauses, nor when hung).
            links = {n: (tx, wt) for n, tx, wt in c.slow_links}
            node.fabric.carry(
                self.tick,
                busy=phase in ("train", "warmup") and not c.stalled,
                slow=links.get(self.nodes.index(node), (1.0, 1.0)),
            )

    def _checkpoint_succeeds(self, c: Conditions) -> bool:
        if c.checkpoints_fail:
            return False
        # A full disk fails the write (1% of the disk is about one checkpoint).
        return all(n.disk_free > 0.01 * self.profile.disk_size_bytes for n in self.nodes if n.up)

    def _complete_step(
        self, live: list[Rank], t: float, now: float, seconds: float, wait: float, c: Conditions
    ) -> None:
        p = self.profile
        self.truth.step(
            seconds,
            wait,
            first=not self._stepped,
            new_progress=self._global_step + 1 > self._high_water,
        )
        self._global_step += 1
        self._high_water = max(self._high_water, self._global_step)
        self._stepped = True
        self._dropped_debt += c.dropped_ratio
        dropped = int(self._dropped_debt)
        self._dropped_debt -= dropped
        hosts = host_factors(c, self.nodes)
        for r in live:
            m = r.metrics
            m.add_data_wait(wait * seconds * (1.0 + self._rng.uniform(-0.1, 0.1)))
            own = own_work(hosts, r.node, seconds, wait, self._rng)
            m.observe_step(seconds, p.tokens_per_step, p.samples_per_step, now, own)
            m.loss(p.faulty_loss(t, c.loss, self.fault_at, 1.0 + self._rng.gauss(0.0, 0.01)))
            if dropped:
                m.batch_dropped(dropped)

    # --- endpoints (simulator/serving.py) ----------------------------------------------
    def targets(self) -> list[Target]:
        """Every endpoint, training ranks first; `port` is set once start() served them."""
        return self.endpoints.targets()

    def is_up(self, target: Target) -> bool:
        return self.endpoints.is_up(target)

    def scrape(self, target: Target) -> str | None:
        """What the endpoint answers now (without HTTP); None when it is down."""
        return self.endpoints.scrape(target)

    def serve(self) -> None:
        """Open the HTTP endpoints and write the file_sd files (no clock thread)."""
        self.endpoints.serve()

    def start(self, duration: float | None = None) -> None:
        """Serve, then advance with the wall clock in a daemon thread until stop().

        With `duration` (simulated seconds) the clock stops there and `finished` is set.
        """
        self.serve()
        self._thread = threading.Thread(
            target=self._run, args=(duration,), name="trainsignals-sim", daemon=True
        )
        self._thread.start()

    def _run(self, duration: float | None) -> None:
        real_tick = self.tick / self.time_scale
        while not self._stop.is_set():
            target = (time.time() - self.start_time) * self.time_scale
            if duration is not None and target >= duration:
                self.advance_to(duration)
                self.finished.set()
                return
            self.advance_to(target)
            self._stop.wait(real_tick)

    def stop(self) -> None:
        """Stop the clock, close every endpoint and the GPU exporters' XID threads."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.endpoints.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

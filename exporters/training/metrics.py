"""TrainingMetrics: the handful of calls a training loop makes, exported for Prometheus.

Every object owns a private CollectorRegistry, so several ranks (or tests, or the simulator)
can live in one process. Series carry `node`, `rank`, `local_rank` and the constant `labels`
(which must equal the spec's selector labels: the scrape config attaches the same ones with
`honor_labels: true`). Names and help texts are the catalogue's
(trainsignals/metrics/training.py): each series is created from its entry.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from trainsignals import __version__
from trainsignals.metrics.training import OWN_WORK, PHASES, help_text

from .disk import CheckpointDiskCollector, DiskUsageFn, WithoutCreated, real_disk_usage
from .ownwork import CollectiveTimer, OwnWork
from .scopes import (
    ActivityScope,
    CheckpointScope,
    LazyGauge,
    PhaseScope,
    StepTimer,
    WaitTimer,
)
from .server import MetricsServer
from .timeaccount import PHASE_ACTIVITY, TimeAccount, TimeAccountCollector
from .torchrun import LaunchEnv, read_env

# Port scheme: one endpoint per rank, base + local_rank, so ranks of a node never collide.
DEFAULT_BASE_PORT = 9850

# Steps from 50 ms (small models) to a minute (huge pipelines), ~2x apart.
STEP_BUCKETS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)

# Set to the spec's objectives.step_time_max_seconds: the step-time alert reads the bucket at it.
STEP_TIME_BOUND_ENV = "TRAINSIGNALS_STEP_TIME_BOUND_SECONDS"


def step_buckets(bound: float | None) -> tuple[float, ...]:
    """The default buckets plus one exactly at the job's step-time bound.

    Between buckets a quantile is interpolated: with buckets at 2 s and 5 s a job stepping in
    1.9 s +-5% "has" a p95 near 4.7 s. With a bucket at the bound, the share of steps over it
    (p95 > bound exactly when more than 5% are) is counted, not guessed.
    """
    if bound is None:
        return STEP_BUCKETS
    if not bound > 0:
        raise ValueError(f"step_time_bound must be a positive number of seconds, got {bound!r}")
    return tuple(sorted({*STEP_BUCKETS, float(bound)}))


# Labels the object sets itself (plus `job` and `instance`, which the scrape sets).
RESERVED_LABELS = frozenset(
    {"node", "rank", "local_rank", "phase", "path", "world_size", "version", "le"}
    | {"job", "instance"}
)


class TrainingMetrics:
    """Per-rank training metrics. Create one per process, early (its start time matters)."""

    def __init__(
        self,
        rank: int = 0,
        local_rank: int = 0,
        world_size: int = 1,
        node: str | None = None,
        labels: dict[str, str] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        *,
        start_time: float | None = None,
        restart_count: int = 0,
        step_time_bound: float | None = None,
        disk_usage: DiskUsageFn = real_disk_usage,
        clock: Callable[[], float] = time.time,
    ) -> None:
        labels = dict(sorted((labels or {}).items()))
        clash = RESERVED_LABELS.intersection(labels)
        if clash:
            raise ValueError(f"labels {sorted(clash)} are set by TrainingMetrics itself")
        if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank} of {world_size}")
        self.rank, self.local_rank, self.world_size = rank, local_rank, world_size
        self.restart_count = restart_count
        self.launch = LaunchEnv(
            rank, local_rank, world_size, local_rank + 1, restart_count=restart_count
        )
        # On Kubernetes the host name is the pod's: NODE_NAME (downward API spec.nodeName),
        # when the pod sets it, is the node's.
        self.node = node or os.environ.get("NODE_NAME") or socket.gethostname()
        # Metrics live in an inner registry; the exposed one filters out the `_created`
        # series prometheus_client adds (not in the metric table, and noise to every scrape).
        inner = CollectorRegistry(auto_describe=True)
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(WithoutCreated(inner))
        self._server: MetricsServer | None = None

        names = ["node", "rank", "local_rank", *labels]
        values = [self.node, str(rank), str(local_rank), *labels.values()]
        reg = inner

        def family(cls: Any, name: str, extra: tuple[str, ...] = (), **kw: Any) -> Any:
            # The catalogue's name (prometheus_client takes a counter's `_total` name as is).
            return cls(name, help_text(name), [*names, *extra], registry=reg, **kw)

        def child(cls: Any, name: str, **kw: Any) -> Any:
            return family(cls, name, **kw).labels(*values)

        self._steps = child(Counter, "trainsignals_steps_total")
        self._failed = child(Counter, "trainsignals_failed_steps_total")
        self._tokens = child(Counter, "trainsignals_tokens_total")
        self._samples = child(Counter, "trainsignals_samples_total")
        # No loss series until the first finite loss: a 0 placeholder would drag the
        # loss averages (LossDiverging compares against avg_over_time) towards zero.
        self._loss_family = family(Gauge, "trainsignals_loss")
        self._loss_labels = values
        self._loss: Any = None
        self._nonfinite = child(Counter, "trainsignals_nonfinite_losses_total")
        self._data_wait = child(Counter, "trainsignals_data_wait_seconds_total")
        self.own = OwnWork(child(Counter, OWN_WORK))
        self._dropped = child(Counter, "trainsignals_batches_dropped_total")
        self._duration = child(
            Histogram,
            "trainsignals_step_duration_seconds",
            buckets=step_buckets(step_time_bound),
        )
        # Progress is durable: no last-step or last-checkpoint time until this process
        # completes a step or saves one, or restores a checkpoint (its step and save time).
        # A new incarnation must not report its own start as progress, or every restart
        # would reset "time since the last step" and "checkpoint age" (issue 16).
        self._last_step = LazyGauge(
            family(Gauge, "trainsignals_last_step_timestamp_seconds"), values
        )
        self._last_checkpoint = LazyGauge(
            family(Gauge, "trainsignals_last_checkpoint_timestamp_seconds"), values
        )
        started = time.time() if start_time is None else start_time
        # Restarts as data: a new incarnation shows as a new start time (and, under torchrun,
        # a higher restart count); the recording rules count restarts from rank 0's.
        child(Gauge, "trainsignals_process_start_time_seconds").set(started)
        child(Gauge, "trainsignals_incarnation").set(restart_count)

        info = family(Gauge, "trainsignals_training_info", ("world_size", "version"))
        info.labels(*values, str(world_size), __version__).set(1)

        phase = family(Gauge, "trainsignals_phase", ("phase",))
        self._phases = {p: phase.labels(*values, p) for p in PHASES}
        self._phase = "startup"
        self._phases["startup"].set(1)

        # Goodput time accounting (timeaccount.py): `clock` is Unix time (the simulator's own).
        self._clock = clock
        self._account = TimeAccount(clock, started if start_time is not None else clock())
        inner.register(TimeAccountCollector(self._account, names, values))

        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        if self.checkpoint_dir is not None:
            disk = CheckpointDiskCollector(self.checkpoint_dir, names, values, disk_usage)
            self.registry.register(disk)

    # --- construction from the launcher's environment ---------------------------------
    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **kwargs: Any) -> TrainingMetrics:
        """Configure from torchrun's variables (see torchrun.py); no argument is required.

        TRAINSIGNALS_STEP_TIME_BOUND_SECONDS, when set, is the spec's step-time bound.
        Missing variables mean a single-process run (rank 0 of 1, first incarnation). Other
        arguments pass through to the constructor. `metrics.launch` keeps what was read
        (group_rank, restart_count, ...).
        """
        launch = read_env(environ)
        bound = (os.environ if environ is None else environ).get(STEP_TIME_BOUND_ENV)
        metrics = cls(
            rank=launch.rank,
            local_rank=launch.local_rank,
            world_size=launch.world_size,
            restart_count=launch.restart_count,
            step_time_bound=float(bound) if bound else None,
            **kwargs,
        )
        metrics.launch = launch
        return metrics

    # --- the hot path ------------------------------------------------------------------
    def step(self, tokens: float = 0, samples: float = 0) -> StepTimer:
        """`with metrics.step(tokens=n, samples=b):` around one optimizer step.

        On normal exit: one step, its duration, tokens and samples, and the last-step time.
        When the block raises: one failed step (the exception propagates).
        """
        return StepTimer(self, tokens, samples)

    def observe_step(
        self,
        seconds: float,
        tokens: float = 0,
        samples: float = 0,
        timestamp: float | None = None,
        own_work: float | None = None,
    ) -> None:
        """Record a step timed elsewhere (or simulated): the non-context-manager form.

        `own_work`: the step's own work, when known; else `seconds` less the data and
        collective waits since the previous step (ownwork.py).
        """
        self._duration.observe(seconds)
        self.own.step(seconds, own_work)
        self._steps.inc()
        if tokens:
            self._tokens.inc(tokens)
        if samples:
            self._samples.inc(samples)
        now = self._clock() if timestamp is None else timestamp
        self._last_step.set(now)
        self._account.step_done(seconds, now)

    def loss(self, value: float) -> None:
        """Finite values set the gauge; NaN/inf count as non-finite and keep the last value."""
        value = float(value)
        if math.isfinite(value):
            if self._loss is None:
                self._loss = self._loss_family.labels(*self._loss_labels)
            self._loss.set(value)
        else:
            self._nonfinite.inc()

    def data_wait(self) -> WaitTimer:
        """`with metrics.data_wait(): batch = next(it)`: time spent waiting for data."""
        return WaitTimer(self._data_wait, self._account, self.own)

    def add_data_wait(self, seconds: float) -> None:
        self._data_wait.inc(seconds)
        self._account.wait_seconds += seconds
        self.own.blocked += seconds

    def collective_wait(self) -> CollectiveTimer:
        """`with metrics.collective_wait(): dist.all_reduce(t)`: time blocked in a collective
        (or a pipeline recv, a barrier), which is not this rank's own work."""
        return CollectiveTimer(self.own)

    def add_collective_wait(self, seconds: float) -> None:
        self.own.blocked += seconds

    # --- rarer events ------------------------------------------------------------------
    def batch_dropped(self, n: int = 1) -> None:
        self._dropped.inc(n)

    def step_failed(self) -> None:
        self._failed.inc()
        self.own.skip()

    def checkpoint_saved(self, timestamp: float | None = None) -> None:
        """Call after a checkpoint is durably written (not when it starts)."""
        self._last_checkpoint.set(time.time() if timestamp is None else timestamp)

    def finish(self, wait_for_scrape: float | None = None) -> None:
        """Training ended cleanly: phase "done", so the rules tell a finished job from a
        dead one (its targets then leave service discovery, which is no incident).

        The marker must be scraped before the process exits. When a scraper has been
        seen, this waits for its next scrape: at most `wait_for_scrape` seconds (default:
        twice the last interval between scrapes plus a second, at most 120 s). Never
        scraped (no Prometheus, a test): no wait.
        """
        self.phase("done")
        if self._server is not None:
            self._server.wait_for_next_scrape(wait_for_scrape)

    def stopping(self, wait_for_scrape: float | None = None) -> None:
        """A planned stop (an operator's restart, a maintenance window, a resubmit with new
        settings): phase "stopping", before the clean exit. Every rank must announce it; the
        rules then read neither the exit nor the restart after it as an incident (recovery
        mode manual pages every unannounced restart). Call it only where the stop is
        deliberate: torchrun sends SIGTERM to the surviving ranks when one rank crashes, so a
        plain SIGTERM handler would announce crashes too. Waits for a scrape as finish()."""
        self.phase("stopping")
        if self._server is not None:
            self._server.wait_for_next_scrape(wait_for_scrape)

    def phase(self, name: str) -> PhaseScope:
        """Switch phase now; `with metrics.phase("eval"):` switches back on exit."""
        if name not in self._phases:
            raise ValueError(f"unknown phase {name!r}; use one of {', '.join(PHASES)}")
        previous = self._phase
        if name != previous:
            # Raise the new phase before lowering the old one: never a scrape with no phase.
            self._phases[name].set(1)
            self._phases[previous].set(0)
            self._phase = name
            self._account.switch(PHASE_ACTIVITY[name])
        return PhaseScope(self, previous)

    @property
    def current_phase(self) -> str:
        return self._phase

    # --- goodput: checkpoints and the global step ---------------------------------------
    def checkpoint_restore(
        self, step: int | None = None, timestamp: float | None = None
    ) -> ActivityScope:
        """`with metrics.checkpoint_restore(step=N, timestamp=T): load()`: time it as
        checkpoint_restore.

        `step` is the checkpoint's global step: the global step gauge continues from it, so
        steps redone after a restart are visible (and counted as lost progress).
        `timestamp` is when the checkpoint was saved (Unix time; e.g. its file's mtime): the
        newest checkpoint is that old, not this process's start (a job whose saves fail must
        not look checkpointed by each restart). The last-step time stays absent until this
        process steps: the rules remember the job's last step across restarts.
        """
        if step is not None:
            self.set_global_step(step)
        if timestamp is not None:
            self._last_checkpoint.set_max(timestamp)
        return ActivityScope(self._account, "checkpoint_restore")

    def checkpoint_save(self) -> CheckpointScope:
        """`with metrics.checkpoint_save(): save()`: phase "checkpoint" while it blocks,
        then checkpoint_saved() when the block exits without an exception."""
        return CheckpointScope(self)

    def set_global_step(self, step: int) -> None:
        """Set the trainer's global step now (it then advances by one per completed step)."""
        self._account.set_global_step(step)

    # --- exposition --------------------------------------------------------------------
    def start_http_server(
        self, port: int | None = None, addr: str = "0.0.0.0", base_port: int = DEFAULT_BASE_PORT
    ) -> int:
        """Serve /metrics on `port` (default base_port + local_rank; 0 = any free port).

        Returns the bound port. A second call is an error; stop_http_server() first.
        """
        if self._server is not None:
            raise RuntimeError(f"already serving on port {self._server.port}")
        if port is None:
            port = base_port + self.local_rank
        self._server = MetricsServer(self.registry, addr, port)
        return self._server.port

    def stop_http_server(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    @property
    def http_port(self) -> int | None:
        return None if self._server is None else self._server.port

    def exposition(self) -> bytes:
        """The text /metrics would answer now (tests, debugging)."""
        return generate_latest(self.registry)

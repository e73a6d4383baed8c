"""Series the training-loop instrumentation exports (one target per rank).

This table is where their names and help texts are written: the instrumentation
(exporters/training/) creates each series from its entry (`training_metric`), and docs/metrics.md
and the rules' checks read the same entries through the catalogue.
"""

from __future__ import annotations

from trainsignals.metrics.model import JOB, Component, Kind, Metric

# Phases the instrumentation reports; alert rules treat everything but "train" as a
# legitimate pause that is bounded by the spec's `max_pause`. "done" is written on a clean
# exit (TrainingMetrics.finish()): the job completed, its targets leaving is no incident.
# "stopping" is a planned stop announced by every rank (TrainingMetrics.stopping()): a human's
# act, so neither the exit nor the restart that follows is an incident.
PHASES = ("startup", "warmup", "train", "eval", "checkpoint", "done", "stopping")

T = Component.TRAINING

# Each rank's own work (step time less data wait and time blocked in collectives).
OWN_WORK = "trainsignals_own_work_seconds_total"

TRAINING_METRICS: tuple[Metric, ...] = (
    Metric(
        "trainsignals_training_info",
        Kind.GAUGE,
        T,
        (*JOB, "world_size", "version"),
        "Always 1; identifies the rank. Present while the process serves metrics.",
    ),
    Metric(
        "trainsignals_step_duration_seconds",
        Kind.HISTOGRAM,
        T,
        JOB,
        "Wall time of one optimizer step, data wait included.",
    ),
    Metric("trainsignals_steps_total", Kind.COUNTER, T, JOB, "Optimizer steps completed."),
    Metric(
        "trainsignals_time_seconds_total",
        Kind.COUNTER,
        T,
        (*JOB, "activity"),
        "Seconds of this process's life per activity (goodput accounting).",
    ),
    Metric(
        "trainsignals_global_step",
        Kind.GAUGE,
        T,
        JOB,
        "The trainer's global step; back at the checkpoint's step after a restart.",
    ),
    Metric(
        "trainsignals_data_wait_open_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Seconds the data wait in progress has lasted; 0 when not waiting for data.",
    ),
    Metric(
        "trainsignals_failed_steps_total",
        Kind.COUNTER,
        T,
        JOB,
        "Steps that raised and were skipped or retried.",
    ),
    Metric(
        OWN_WORK,
        Kind.COUNTER,
        T,
        JOB,
        "Seconds of this rank's own work: step time less data wait and time blocked in "
        "collectives (what a straggler has more of).",
    ),
    Metric("trainsignals_tokens_total", Kind.COUNTER, T, JOB, "Tokens processed by this rank."),
    Metric("trainsignals_samples_total", Kind.COUNTER, T, JOB, "Samples processed by this rank."),
    Metric("trainsignals_loss", Kind.GAUGE, T, JOB, "Last finite training loss."),
    Metric(
        "trainsignals_nonfinite_losses_total",
        Kind.COUNTER,
        T,
        JOB,
        "Losses that were NaN or infinite.",
    ),
    Metric(
        "trainsignals_data_wait_seconds_total",
        Kind.COUNTER,
        T,
        JOB,
        "Seconds spent waiting for the data loader.",
    ),
    Metric(
        "trainsignals_batches_dropped_total",
        Kind.COUNTER,
        T,
        JOB,
        "Batches dropped (corrupt, skipped, timed out).",
    ),
    Metric(
        "trainsignals_last_step_timestamp_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time of this process's last completed step; absent before its first.",
    ),
    Metric(
        "trainsignals_last_checkpoint_timestamp_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time of the newest checkpoint: the last one saved, or the one restored. "
        "Absent before either (no checkpoint exists).",
    ),
    Metric(
        "trainsignals_process_start_time_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time this process (incarnation) started: it changes once per restart.",
    ),
    Metric(
        "trainsignals_incarnation",
        Kind.GAUGE,
        T,
        JOB,
        "This incarnation's number: restarts before it as the launcher counts them "
        "(torchrun's TORCHELASTIC_RESTART_COUNT; 0 without one).",
    ),
    Metric(
        "trainsignals_phase",
        Kind.GAUGE,
        T,
        (*JOB, "phase"),
        "1 for the current phase (startup, warmup, train, eval, checkpoint), 0 for the others.",
    ),
    Metric(
        "trainsignals_checkpoint_disk_free_bytes",
        Kind.GAUGE,
        T,
        (*JOB, "path"),
        "Free bytes on the file system holding the checkpoint directory.",
    ),
    Metric(
        "trainsignals_checkpoint_disk_size_bytes",
        Kind.GAUGE,
        T,
        (*JOB, "path"),
        "Size in bytes of the file system holding the checkpoint directory.",
    ),
)


BY_NAME: dict[str, Metric] = {m.name: m for m in TRAINING_METRICS}


def training_metric(name: str) -> Metric:
    """The entry of the training metric `name` (as exposed: counters end in `_total`)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"{name} is not a training metric of trainsignals/metrics/training.py; add it there"
        ) from None


def help_text(name: str) -> str:
    """The catalogue's help text of the training metric `name`."""
    return training_metric(name).help

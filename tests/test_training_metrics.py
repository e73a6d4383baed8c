"""TrainingMetrics: exported names, labels and values, parsed the way Prometheus reads them."""

from __future__ import annotations

import math
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.training import DEFAULT_BASE_PORT, DiskUsage, TrainingMetrics
from trainsignals.metrics.catalog import METRICS
from trainsignals.metrics.model import Component
from trainsignals.metrics.training import PHASES

LABELS = {"node": "n0", "rank": "3", "local_rank": "1", "training_job": "llm"}


def samples(metrics: TrainingMetrics) -> dict[tuple[str, frozenset], float]:
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: TrainingMetrics, name: str, **extra: str) -> float:
    return samples(metrics)[name, frozenset({**LABELS, **extra}.items())]


def make(**kwargs: object) -> TrainingMetrics:
    args: dict = dict(rank=3, local_rank=1, world_size=4, node="n0", labels={"training_job": "llm"})
    args.update(kwargs)
    return TrainingMetrics(**args)


def test_exports_exactly_the_training_rows_of_the_catalog(tmp_path: Path) -> None:
    m = make(checkpoint_dir=tmp_path)
    m.loss(1.0)
    m.observe_step(0.5)
    m.checkpoint_saved()
    exported = {name for name, _ in samples(m)}
    expected = {
        s for row in METRICS if row.component is Component.TRAINING for s in row.series_names
    }
    assert exported == expected


def test_every_series_carries_the_catalog_labels(tmp_path: Path) -> None:
    m = make(checkpoint_dir=tmp_path)
    m.loss(1.0)
    m.observe_step(0.5)
    m.checkpoint_saved()
    by_name = {row.name: row for row in METRICS}
    for name, labels in samples(m):
        base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        keys = {k for k, _ in labels} - {"le", "training_job"}
        assert keys == set(by_name[base].labels), name
        assert dict(labels)["training_job"] == "llm"


def test_step_counts_tokens_samples_duration_and_timestamp() -> None:
    m = make(start_time=1000.0)
    with m.step(tokens=4096, samples=2):
        pass
    m.observe_step(0.7, tokens=100, samples=1, timestamp=2000.0)
    assert value(m, "trainsignals_steps_total") == 2
    assert value(m, "trainsignals_tokens_total") == 4196
    assert value(m, "trainsignals_samples_total") == 3
    assert value(m, "trainsignals_step_duration_seconds_count") == 2
    assert value(m, "trainsignals_step_duration_seconds_bucket", le="0.5") == 1
    assert value(m, "trainsignals_step_duration_seconds_bucket", le="1.0") == 2
    assert value(m, "trainsignals_last_step_timestamp_seconds") == 2000.0


def test_progress_times_are_absent_until_known_never_the_process_start() -> None:
    """Issue 16: a restarted process must not report its own start as progress or as a
    checkpoint: no last-step / last-checkpoint time before a step, a save or a restore."""
    m = make(start_time=1000.0)
    names = {name for name, _ in samples(m)}
    assert "trainsignals_last_step_timestamp_seconds" not in names
    assert "trainsignals_last_checkpoint_timestamp_seconds" not in names
    assert value(m, "trainsignals_process_start_time_seconds") == 1000.0


def test_restore_carries_the_checkpoints_step_and_time_into_the_new_process() -> None:
    m = make(start_time=5000.0)
    with m.checkpoint_restore(step=700, timestamp=4000.0):
        pass
    assert value(m, "trainsignals_global_step") == 700
    assert value(m, "trainsignals_last_checkpoint_timestamp_seconds") == 4000.0
    # No step of this process yet: no last-step time (the rules remember the job's last).
    assert "trainsignals_last_step_timestamp_seconds{" not in m.exposition().decode()
    m.observe_step(1.0, timestamp=5100.0)
    assert value(m, "trainsignals_global_step") == 701
    assert value(m, "trainsignals_last_step_timestamp_seconds") == 5100.0
    assert value(m, "trainsignals_last_checkpoint_timestamp_seconds") == 4000.0
    m.checkpoint_saved(timestamp=5200.0)
    with m.checkpoint_restore(step=701, timestamp=4500.0):  # an older one: time never goes back
        pass
    assert value(m, "trainsignals_last_checkpoint_timestamp_seconds") == 5200.0
    assert value(m, "trainsignals_last_step_timestamp_seconds") == 5100.0


def test_stopping_announces_a_planned_stop() -> None:
    """A planned stop is phase "stopping" (the rules read it as no incident); time after it
    counts as "other", as after finish()."""
    m = make()
    m.phase("train")
    m.stopping()  # never scraped over HTTP: no wait
    assert phases(m) == {p: float(p == "stopping") for p in PHASES}
    assert m.current_phase == "stopping"


def test_finish_marks_done_and_waits_for_the_next_scrape() -> None:
    m = make()
    m.finish()  # never scraped over HTTP: no wait
    assert phases(m) == {p: float(p == "done") for p in PHASES}
    m = make()
    port = m.start_http_server(port=0, addr="127.0.0.1")
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(2):  # a scraper every ~0.2 s
            urllib.request.urlopen(url, timeout=5).read()
            time.sleep(0.2)
        scraped: list[str] = []
        timer = threading.Timer(
            0.3, lambda: scraped.append(urllib.request.urlopen(url, timeout=5).read().decode())
        )
        timer.start()
        started = time.monotonic()
        m.finish()
        waited = time.monotonic() - started
        timer.join()
        assert 0.2 < waited < 1.0  # the scrape at 0.3 s, not the 1.4 s timeout
        assert 'phase="done"' in scraped[0]
        assert [
            line for line in scraped[0].splitlines() if 'phase="done"' in line and "1.0" in line
        ]
    finally:
        m.stop_http_server()


def test_a_step_that_raises_counts_as_failed_not_completed() -> None:
    m = make()
    with pytest.raises(RuntimeError), m.step(tokens=10):
        raise RuntimeError("CUDA error")
    assert value(m, "trainsignals_failed_steps_total") == 1
    assert value(m, "trainsignals_steps_total") == 0
    assert value(m, "trainsignals_tokens_total") == 0


def test_nonfinite_loss_counts_and_keeps_last_finite_value() -> None:
    m = make()
    assert ("trainsignals_loss", frozenset(LABELS.items())) not in samples(m)  # none yet
    m.loss(2.5)
    for bad in (math.nan, math.inf, -math.inf):
        m.loss(bad)
    assert value(m, "trainsignals_loss") == 2.5
    assert value(m, "trainsignals_nonfinite_losses_total") == 3
    m.loss(2.25)
    assert value(m, "trainsignals_loss") == 2.25


def test_data_wait_dropped_batches_and_checkpoint() -> None:
    m = make()
    with m.data_wait():
        pass
    m.add_data_wait(1.5)
    m.batch_dropped()
    m.batch_dropped(n=2)
    m.checkpoint_saved(timestamp=1234.0)
    assert 1.5 <= value(m, "trainsignals_data_wait_seconds_total") < 1.6
    assert value(m, "trainsignals_batches_dropped_total") == 3
    assert value(m, "trainsignals_last_checkpoint_timestamp_seconds") == 1234.0


def phases(m: TrainingMetrics) -> dict[str, float]:
    return {p: value(m, "trainsignals_phase", phase=p) for p in PHASES}


def test_phase_switching_one_series_per_phase_and_scoped_restore() -> None:
    m = make()
    assert phases(m) == {p: float(p == "startup") for p in PHASES}
    m.phase("train")
    with m.phase("eval"):
        assert phases(m) == {p: float(p == "eval") for p in PHASES}
    assert m.current_phase == "train"
    assert phases(m) == {p: float(p == "train") for p in PHASES}
    with pytest.raises(ValueError, match="unknown phase"):
        m.phase("training")


def test_checkpoint_disk_collector_reads_at_scrape(tmp_path: Path) -> None:
    m = make(checkpoint_dir=tmp_path)
    free = value(m, "trainsignals_checkpoint_disk_free_bytes", path=str(tmp_path))
    size = value(m, "trainsignals_checkpoint_disk_size_bytes", path=str(tmp_path))
    assert 0 < free <= size

    usage = [DiskUsage(total=1000, free=600)]
    fake = make(checkpoint_dir="/ckpt", disk_usage=lambda path: usage[0])
    assert value(fake, "trainsignals_checkpoint_disk_free_bytes", path="/ckpt") == 600
    usage[0] = DiskUsage(total=1000, free=100)  # computed per scrape, not cached
    assert value(fake, "trainsignals_checkpoint_disk_free_bytes", path="/ckpt") == 100


def test_checkpoint_disk_absent_without_dir_or_when_unreadable(tmp_path: Path) -> None:
    names = {name for name, _ in samples(make())}
    assert "trainsignals_checkpoint_disk_free_bytes" not in names
    gone = make(checkpoint_dir=tmp_path / "missing")
    names = {name for name, _ in samples(gone)}
    assert "trainsignals_checkpoint_disk_free_bytes" not in names
    assert "trainsignals_steps_total" in names


def test_info_series() -> None:
    m = make()
    info = [dict(labels) for name, labels in samples(m) if name == "trainsignals_training_info"]
    assert len(info) == 1
    assert info[0]["world_size"] == "4"
    assert info[0]["version"]


def test_from_env_reads_torchrun_variables() -> None:
    m = TrainingMetrics.from_env(
        {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}, node="n2", labels={"a": "b"}
    )
    assert (m.rank, m.local_rank, m.world_size, m.node) == (5, 1, 8, "n2")
    single = TrainingMetrics.from_env({})
    assert (single.rank, single.local_rank, single.world_size) == (0, 0, 1)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="set by TrainingMetrics"):
        make(labels={"rank": "0"})
    with pytest.raises(ValueError, match="rank"):
        make(rank=4)


def test_private_registries_do_not_collide() -> None:
    a, b = make(), make()
    a.observe_step(1.0)
    assert value(a, "trainsignals_steps_total") == 1
    assert value(b, "trainsignals_steps_total") == 0


def test_http_endpoint_serves_and_stops() -> None:
    assert DEFAULT_BASE_PORT == 9850
    m = make()
    port = m.start_http_server(port=0, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        assert "trainsignals_steps_total" in body
        assert "_created" not in body
        with pytest.raises(RuntimeError):
            m.start_http_server(port=0)
    finally:
        m.stop_http_server()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)

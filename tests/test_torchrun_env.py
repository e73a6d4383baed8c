"""TrainingMetrics.from_env() with no arguments: rank, node index and restarts from torchrun."""

from __future__ import annotations

import pytest

from trainsignals.exporters.training import TrainingMetrics
from trainsignals.exporters.training.torchrun import LaunchEnvError, read_env

TORCHRUN = {  # what torchrun --nnodes 2 --nproc-per-node 4 sets for global rank 6, 2nd restart
    "RANK": "6",
    "LOCAL_RANK": "2",
    "WORLD_SIZE": "8",
    "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1",
    "TORCHELASTIC_RESTART_COUNT": "2",
    "TORCHELASTIC_MAX_RESTARTS": "3",
    "TORCHELASTIC_RUN_ID": "job-42",
}


def test_reads_every_torchrun_variable() -> None:
    env = read_env(TORCHRUN)
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size) == (6, 2, 8, 4)
    assert (env.group_rank, env.restart_count, env.max_restarts) == (1, 2, 3)
    assert env.incarnation == 2 and env.run_id == "job-42" and env.launched


def test_no_launcher_is_one_process_first_incarnation() -> None:
    env = read_env({})
    assert (env.rank, env.local_rank, env.world_size, env.group_rank, env.restart_count) == (
        0, 0, 1, 0, 0,
    )  # fmt: skip
    assert not env.launched


def test_group_rank_defaults_to_packed_layout() -> None:
    env = read_env({k: v for k, v in TORCHRUN.items() if k != "GROUP_RANK"})
    assert env.group_rank == 1


def test_from_env_with_no_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, val in TORCHRUN.items():
        monkeypatch.setenv(key, val)
    m = TrainingMetrics.from_env()
    assert (m.rank, m.local_rank, m.world_size, m.restart_count) == (6, 2, 8, 2)
    assert m.launch.group_rank == 1
    assert 'rank="6"' in m.exposition().decode()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "x"}, "RANK='x' is not an integer"),
        ({"RANK": "8", "WORLD_SIZE": "8"}, "RANK=8 must be below WORLD_SIZE=8"),
        ({"LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "4"}, "LOCAL_RANK=4 must be below"),
        ({"TORCHELASTIC_RESTART_COUNT": "-1"}, "TORCHELASTIC_RESTART_COUNT=-1 must be >= 0"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchEnvError, match=message):
        TrainingMetrics.from_env(env)

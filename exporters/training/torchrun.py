"""The launcher's view of this process, read from the variables torchrun (torchelastic) sets.

torchrun exports, per worker process: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK (this node's index among the nodes), TORCHELASTIC_RESTART_COUNT (restarts of the
worker group so far), TORCHELASTIC_MAX_RESTARTS and TORCHELASTIC_RUN_ID. Without a launcher
none is set: a single process, rank 0 of 1, first incarnation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class LaunchEnvError(ValueError):
    """A launcher variable that cannot be right; the message names it and the fix."""


@dataclass(frozen=True)
class LaunchEnv:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    group_rank: int = 0  # the node's index (torchrun's GROUP_RANK)
    restart_count: int = 0  # TORCHELASTIC_RESTART_COUNT: restarts before this incarnation
    max_restarts: int | None = None
    run_id: str | None = None
    launched: bool = False  # True when a launcher set RANK

    @property
    def incarnation(self) -> int:
        """0 for the first start of the worker group, n after n restarts."""
        return self.restart_count


def _int(env: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise LaunchEnvError(
            f"environment variable {name}={raw!r} is not an integer; torchrun sets it to one "
            f"(unset it for a single-process run)"
        ) from None
    if value < minimum:
        raise LaunchEnvError(f"environment variable {name}={value} must be >= {minimum}")
    return value


def read_env(environ: Mapping[str, str] | None = None) -> LaunchEnv:
    """The LaunchEnv of this process (os.environ by default). Raises LaunchEnvError."""
    env = os.environ if environ is None else environ
    world_size = _int(env, "WORLD_SIZE", 1, 1)
    local_world_size = _int(env, "LOCAL_WORLD_SIZE", None, 1)
    rank = _int(env, "RANK", 0, 0)
    local_rank = _int(env, "LOCAL_RANK", 0, 0)
    assert world_size is not None and rank is not None and local_rank is not None
    if rank >= world_size:
        raise LaunchEnvError(f"RANK={rank} must be below WORLD_SIZE={world_size}")
    if local_world_size is not None and local_rank >= local_world_size:
        raise LaunchEnvError(
            f"LOCAL_RANK={local_rank} must be below LOCAL_WORLD_SIZE={local_world_size}"
        )
    # Without GROUP_RANK, ranks are packed node by node (torchrun's layout) when the node's
    # size is known, else this is node 0.
    packed = 0 if local_world_size is None else rank // local_world_size
    group_rank = _int(env, "GROUP_RANK", packed, 0)
    assert group_rank is not None
    restart_count = _int(env, "TORCHELASTIC_RESTART_COUNT", 0, 0)
    assert restart_count is not None
    return LaunchEnv(
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
        local_world_size=local_world_size or local_rank + 1,
        group_rank=group_rank,
        restart_count=restart_count,
        max_restarts=_int(env, "TORCHELASTIC_MAX_RESTARTS", None, 0),
        run_id=env.get("TORCHELASTIC_RUN_ID") or None,
        launched="RANK" in env,
    )

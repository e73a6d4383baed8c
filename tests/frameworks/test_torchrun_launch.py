"""TrainingMetrics.from_env() under real torchrun: 2 workers, one forced restart.

torchrun (torch's CPU build, `make setup`) launches tests/frameworks/torchrun_worker.py; the
first incarnation's rank 1 exits 3, so torchrun restarts the group once. Each worker records
what from_env() read: the real launcher's variables, not a hand-written copy of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("torchrun_worker.py")


def test_from_env_reads_real_torchrun_and_its_restart(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval", "0.2",
        str(WORKER), str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("inc*-rank*.json")}
    assert sorted(seen) == ["inc0-rank0", "inc0-rank1", "inc1-rank0", "inc1-rank1"]
    for name, view in seen.items():
        incarnation, rank = int(name[3]), int(name[-1])
        assert view["rank"] == view["local_rank"] == rank
        assert (view["world_size"], view["local_world_size"], view["group_rank"]) == (2, 2, 0)
        assert (view["restart_count"], view["max_restarts"]) == (incarnation, 1)
        assert view["launched"] is True
        gauge = next(line for line in view["exposed"] if line.startswith("trainsignals_inc"))
        assert f'rank="{rank}"' in gauge and gauge.endswith(f" {incarnation}.0")
        info = next(line for line in view["exposed"] if "training_info" in line)
        assert 'world_size="2"' in info

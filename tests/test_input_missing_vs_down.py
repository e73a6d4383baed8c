"""AlertInputMissing means "scraped, but not exported", never "its target died".

`make demo SCENARIO=gpu_lost` ticketed `trainsignals_process_start_time_seconds{rank="0"} is
missing ... run trainsignals readiness` although nothing was misconfigured: GpuLost killed rank
0, and its series went with it. Run through promtool on minimal's committed rules: rank 0 down
from minute 5 is no AlertInputMissing; every rank up without that series is one.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .conftest import ROOT, run_tool

JOB = "minimal"
RANKS = 8
MINUTES = 45
SERIES = f'trainsignals_process_start_time_seconds{{rank="0",training_job="{JOB}"}}'


def _inputs(rank0_dies: bool) -> list[dict]:
    """Every rank's and the GPU exporter's `up`; rank 0's start time only while it lives."""
    inputs = []
    for rank in range(RANKS):
        values = "1x5 0x40" if rank0_dies and rank == 0 else f"1x{MINUTES}"
        labels = f'job="trainsignals-training",node="n0",rank="{rank}",training_job="{JOB}"'
        inputs.append({"series": f"up{{{labels}}}", "values": values})
    gpu = f'job="trainsignals-gpu",node="n0",training_job="{JOB}"'
    inputs.append({"series": f"up{{{gpu}}}", "values": f"1x{MINUTES}"})
    if rank0_dies:  # exported while it ran, then gone with the process
        inputs.append({"series": SERIES, "values": "100x5 _x40"})
    return inputs


def test_a_dead_ranks_series_is_not_a_missing_input(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text((ROOT / "alerts" / f"{JOB}.rules.yaml").read_text())
    # Rank 0's start time exactly: the start time of every rank (TrainingStraggler's
    # incarnation age) is another input, absent here too.
    query = (
        f'ALERTS{{alertname="AlertInputMissing",alertstate="firing",series={json.dumps(SERIES)}}}'
    )

    missing = {
        "alertname": "AlertInputMissing",
        "alertstate": "firing",
        "alerts": None,  # filled from the rule below
        "job": JOB,
        "series": SERIES,
        "severity": "ticket",
        "team": "ml-research",
        "training_job": JOB,
    }
    rules = yaml.safe_load((tmp_path / "rules.yaml").read_text())
    rule = next(
        r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "AlertInputMissing"
    )
    branch = rule["expr"].split(f"`{SERIES}`", 1)[1]
    missing["alerts"] = branch.split('"alerts", "', 1)[1].split('"', 1)[0]
    labels = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(missing.items()))
    suite = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": "rank 0 dead (GpuLost): its series is gone with it, nothing is missing",
                "interval": "1m",
                "input_series": _inputs(rank0_dies=True),
                "promql_expr_test": [{"expr": query, "eval_time": "44m", "exp_samples": []}],
            },
            {
                "name": "every rank up, rank 0 never exports its start time: a ticket",
                "interval": "1m",
                "input_series": _inputs(rank0_dies=False),
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "44m",
                        "exp_samples": [{"labels": f"ALERTS{{{labels}}}", "value": 1}],
                    }
                ],
            },
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(suite))
    done = run_tool("promtool", "test", "rules", "test.yaml", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr

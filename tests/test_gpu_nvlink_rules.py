"""NVLink errors recorded per GPU from either source, through the real promtool.

dcgm-exporter's four NVLink error counters are optional: any subset may be exported, each
counts all of a GPU's links, and a GPU in MIG mode repeats them on every GPU instance (which
must not multiply the rate). The own exporter's all-links counter is always there.
"""

from __future__ import annotations

from pathlib import Path

from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import Options, generate_job
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.testkit.series_notation import encode

from .conftest import JOBS, run_tool

RECORD = "gpu:trainsignals_gpu_nvlink_errors:rate5m"


def rules_file(source: str, folder: Path) -> tuple[str, dict[str, str]]:
    base = load_specs([JOBS / "minimal.yaml"])[0]
    spec = base.model_copy(update={"name": f"nvlink-{source}", "gpu_metrics": source})
    files = generate_job(spec, "<test>", Options(with_tests=False))
    (folder / "rules.yaml").write_text(files[f"alerts/{spec.name}.rules.yaml"])
    return spec.name, spec.selector_labels


def counter(name: str, labels: dict[str, str], per_minute: float) -> dict:
    return {
        "series": name + matchers(labels),
        "values": encode([per_minute * m for m in range(16)]),
    }


def run_promtool(folder: Path, input_series: list[dict], job: str, want: dict) -> None:
    suite = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series,
                "promql_expr_test": [
                    {
                        "expr": RECORD + matchers({"training_job": job}),
                        "eval_time": "15m",
                        "exp_samples": [
                            {
                                "labels": RECORD
                                + matchers({"gpu": gpu, "node": "node-0", "training_job": job}),
                                "value": value,
                            }
                            for gpu, value in want.items()
                        ],
                    }
                ],
            }
        ],
    }
    (folder / "test.yaml").write_text(dump(suite))
    done = run_tool("promtool", "test", "rules", "test.yaml", cwd=folder, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dcgm_optional_counters_any_subset_and_mig_copies_once(tmp_path: Path) -> None:
    job, selector = rules_file("dcgm", tmp_path)

    def labels(gpu: int, **extra: str) -> dict[str, str]:
        return {**selector, "Hostname": "node-0", "gpu": str(gpu), "UUID": f"GPU-{gpu}"} | extra

    field = "DCGM_FI_DEV_NVLINK_{}_ERROR_COUNT_TOTAL".format
    series = [
        # GPU 0: two of the four counters exported.
        counter(field("CRC_FLIT"), labels(0), 60),
        counter(field("REPLAY"), labels(0), 120),
        # GPU 1 in MIG mode: the GPU's recovery count repeated on both instances.
        *(
            counter(field("RECOVERY"), labels(1, GPU_I_ID=i, GPU_I_PROFILE=p), 30)
            for i, p in (("1", "3g.40gb"), ("2", "4g.40gb"))
        ),
        # GPU 2: no NVLink error counter at all.
        counter("DCGM_FI_DEV_GPU_UTIL", labels(2), 0),
    ]
    run_promtool(tmp_path, series, job, {"0": 3, "1": 0.5})


def test_own_exporter_all_links_counter(tmp_path: Path) -> None:
    job, selector = rules_file("trainsignals", tmp_path)
    labels = {**selector, "node": "node-0", "uuid": "GPU-0"}
    series = [
        counter("trainsignals_gpu_nvlink_errors_all_links_total", labels | {"gpu": "0"}, 6),
        counter("trainsignals_gpu_nvlink_errors_all_links_total", labels | {"gpu": "1"}, 0),
    ]
    run_promtool(tmp_path, series, job, {"0": 0.1, "1": 0})

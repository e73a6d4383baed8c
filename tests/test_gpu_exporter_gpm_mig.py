"""GPM activity and MIG instances: through the fake backend, and the pynvml code paths of the
real backend with NVML's functions replaced (no GPU here: structures are pynvml's own)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from trainsignals.exporters.gpu.collector import CollectOptions
from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu, FakeMigInstance
from trainsignals.exporters.gpu.nvml_backend import NvmlBackend
from trainsignals.exporters.gpu.server import Exporter, build_exporter

from .gpu_samples import Samples, scrape, value

ERRORS = "trainsignals_gpu_exporter_nvml_errors_total"


def make(gpus: list[FakeGpu], **options: Any) -> tuple[FakeBackend, Exporter]:
    backend = FakeBackend(gpus)
    return backend, build_exporter(backend, "n", {}, options=CollectOptions(**options))


@pytest.fixture
def busy() -> Iterator[tuple[FakeBackend, Exporter]]:
    backend, ex = make(
        [
            FakeGpu(0, utilization_ratio=1.0, sm_active_ratio=0.8, tensor_active_ratio=0.6),
            FakeGpu(1, model="NVIDIA A100-SXM4-80GB", gpm_supported=False),
            FakeGpu(
                2,
                mig=[
                    FakeMigInstance(5, "3g.40gb", 40 * 2**30, 30 * 2**30, 0.5, 0.25),
                    FakeMigInstance(13, "1g.10gb", 10 * 2**30, 2**30, 0.125, 0.0),
                ],
            ),
        ]
    )
    yield backend, ex
    ex.close()


def test_gpm_activity_from_the_second_scrape_and_absent_before_hopper(busy: Any) -> None:
    backend, ex = busy
    first = scrape(ex)
    assert value(first, "trainsignals_gpu_sm_active_ratio", gpu="0") is None  # one sample
    s = scrape(ex)
    assert value(s, "trainsignals_gpu_sm_active_ratio", gpu="0") == 0.8
    assert value(s, "trainsignals_gpu_tensor_active_ratio", gpu="0") == 0.6
    # "Busy" as NVML says it next to what the SMs did: a starved job shows 1.0 vs low activity.
    assert value(s, "trainsignals_gpu_utilization_ratio", gpu="0") == 1.0
    backend.gpus[0].sm_active_ratio = 0.05
    assert value(scrape(ex), "trainsignals_gpu_sm_active_ratio", gpu="0") == 0.05
    # The A100 has no GPM: absent, up, not an error, asked once and never again.
    assert value(s, "trainsignals_gpu_sm_active_ratio", gpu="1") is None
    assert value(s, "trainsignals_gpu_up", gpu="1") == 1
    assert value(s, ERRORS, gpu="1") is None
    assert backend.calls["gpm", 1] == 1


def test_a_failing_gpm_query_drops_only_its_metrics(busy: Any) -> None:
    backend, ex = busy
    backend.gpus[0].failing["gpm"] = "timeout"
    s = scrape(ex)
    assert value(s, "trainsignals_gpu_sm_active_ratio", gpu="0") is None
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1
    assert value(s, "trainsignals_gpu_power_watts", gpu="0") == 0.0
    assert value(s, ERRORS, gpu="0", function="nvmlGpmMetricsGet", error="timeout") == 1
    del backend.gpus[0].failing["gpm"]
    scrape(ex)
    assert value(scrape(ex), "trainsignals_gpu_sm_active_ratio", gpu="0") == 0.8


def mig_labels(s: Samples, name: str) -> dict[tuple[str, str], float]:
    return {
        (dict(ls)["GPU_I_ID"], dict(ls)["GPU_I_PROFILE"]): v
        for (n, ls), v in s.items()
        if n == name and ("gpu", "2") in ls
    }


def test_mig_instances_are_labelled_like_dcgm_exporter(busy: Any) -> None:
    backend, ex = busy
    scrape(ex)
    s = scrape(ex)
    assert mig_labels(s, "trainsignals_gpu_mig_memory_used_bytes") == {
        ("5", "3g.40gb"): 30 * 2**30,
        ("13", "1g.10gb"): 2**30,
    }
    assert mig_labels(s, "trainsignals_gpu_mig_memory_total_bytes") == {
        ("5", "3g.40gb"): 40 * 2**30,
        ("13", "1g.10gb"): 10 * 2**30,
    }
    assert mig_labels(s, "trainsignals_gpu_mig_sm_active_ratio") == {
        ("5", "3g.40gb"): 0.5,
        ("13", "1g.10gb"): 0.125,
    }
    assert mig_labels(s, "trainsignals_gpu_mig_tensor_active_ratio")[("5", "3g.40gb")] == 0.25
    labels = next(ls for (n, ls) in s if n == "trainsignals_gpu_mig_memory_used_bytes")
    assert {k for k, _ in labels} == {"node", "gpu", "uuid", "model", "GPU_I_ID", "GPU_I_PROFILE"}
    # In MIG mode NVML has no utilization for the whole GPU: absent, the GPU still up, no error.
    assert value(s, "trainsignals_gpu_utilization_ratio", gpu="2") is None
    assert value(s, "trainsignals_gpu_up", gpu="2") == 1
    assert value(s, "trainsignals_gpu_memory_used_bytes", gpu="2") == 0
    assert value(s, ERRORS, gpu="2") is None
    # GPUs without MIG mode report no instance series.
    assert not [k for k in s if k[0].startswith("trainsignals_gpu_mig_") and ("gpu", "0") in k[1]]
    # An instance destroyed (nvidia-smi mig -dgi) is gone at the next scrape.
    backend.gpus[2].mig = backend.gpus[2].mig[:1]
    s = scrape(ex)
    assert mig_labels(s, "trainsignals_gpu_mig_memory_used_bytes") == {("5", "3g.40gb"): 30 * 2**30}


def test_mig_faults_never_stop_the_exporter(busy: Any) -> None:
    backend, ex = busy
    backend.gpus[1].mig_supported = False  # e.g. an L40S: remembered, not an error
    backend.gpus[2].failing["mig_instances"] = "unknown"

    def explode(index: int) -> list[Any]:
        raise RuntimeError("bug in a backend")

    s = scrape(ex)
    assert value(s, ERRORS, gpu="2", function="nvmlDeviceGetMigMode", error="unknown") == 1
    assert not mig_labels(s, "trainsignals_gpu_mig_memory_used_bytes")
    assert value(s, "trainsignals_gpu_up", gpu="2") == 1
    del backend.gpus[2].failing["mig_instances"]
    backend.mig_instances = explode  # type: ignore[method-assign]
    s = scrape(ex)
    assert value(s, ERRORS, gpu="2", function="nvmlDeviceGetMigMode", error="unknown") == 2
    assert value(s, "trainsignals_gpu_memory_used_bytes", gpu="2") == 0
    assert value(s, ERRORS, gpu="1") is None
    scrape(ex)
    assert backend.calls["mig_instances", 1] == 1


def test_options_skip_gpm_and_mig() -> None:
    backend, ex = make([FakeGpu(0, mig=[FakeMigInstance(1)])], gpm=False, mig=False)
    try:
        scrape(ex)
        s = scrape(ex)
    finally:
        ex.close()
    assert not [n for n, _ in s if "active_ratio" in n or n.startswith("trainsignals_gpu_mig_")]
    assert not {m for m, _ in backend.calls} & {"gpm", "mig_instances"}


# --- the real backend's GPM and MIG code, NVML functions replaced -------------------------
class FakeNvml:
    """NVML's answers for one H100 with GPM, MIG mode on, GPU instances 1 and 2 (slot 1 empty,
    slot 3 a second compute instance of GPU instance 2)."""

    def __init__(self) -> None:
        self.samples = 0
        self.mig_samples: list[int] = []

    def install(self, mp: pytest.MonkeyPatch) -> None:
        handles = {0: "gpu0", "mig0": 1, "mig2": 2, "mig3": 2}
        mp.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: f"gpu{i}")
        mp.setattr(pynvml, "nvmlGpmQueryDeviceSupport", lambda h: _Obj(isSupportedDevice=1))
        mp.setattr(pynvml, "nvmlGpmSampleAlloc", pynvml.c_nvmlGpmSample_t)
        mp.setattr(pynvml, "nvmlGpmSampleFree", lambda s: None)
        mp.setattr(pynvml, "nvmlGpmSampleGet", self._sample)
        mp.setattr(pynvml, "nvmlGpmMigSampleGet", self._mig_sample)
        mp.setattr(pynvml, "nvmlGpmMetricsGet", self._metrics)
        mp.setattr(pynvml, "nvmlDeviceGetMigMode", lambda h: [pynvml.NVML_DEVICE_MIG_ENABLE, 1])
        mp.setattr(pynvml, "nvmlDeviceGetMaxMigDeviceCount", lambda h: 4)
        mp.setattr(pynvml, "nvmlDeviceGetMigDeviceHandleByIndex", self._mig_handle)
        mp.setattr(pynvml, "nvmlDeviceGetGpuInstanceId", lambda m: handles[m])
        mp.setattr(pynvml, "nvmlDeviceGetMemoryInfo", lambda m: _Obj(total=20 * 2**30, used=2**30))
        # GPU instance 1's device name says its profile; GPU instance 2's does not, so its
        # profile comes from the GPU instance profile info (id 9 at profile index 2).
        names = {"mig0": b"NVIDIA H100 80GB HBM3 MIG 2g.20gb", "mig2": "NVIDIA H100 80GB HBM3"}
        mp.setattr(pynvml, "nvmlDeviceGetName", names.__getitem__)
        mp.setattr(pynvml, "nvmlDeviceGetGpuInstanceById", lambda h, gi: f"gi{gi}")
        mp.setattr(pynvml, "nvmlGpuInstanceGetInfo", lambda gi: _Obj(profileId=9))
        mp.setattr(pynvml, "nvmlDeviceGetGpuInstanceProfileInfo", self._profile_info)

    def _sample(self, handle: Any, sample: Any) -> Any:
        self.samples += 1
        return sample

    def _mig_sample(self, handle: Any, gi: int, sample: Any) -> Any:
        self.mig_samples.append(gi)
        return sample

    @staticmethod
    def _metrics(request: Any) -> Any:
        assert request.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        assert request.numMetrics == 2
        ids = [request.metrics[i].metricId for i in range(2)]
        assert ids == [pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL]
        request.metrics[0].value = 87.5
        request.metrics[0].nvmlReturn = pynvml.NVML_SUCCESS
        request.metrics[1].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED  # per metric
        return request

    @staticmethod
    def _profile_info(handle: Any, profile: int) -> Any:
        if profile == 1:  # a profile this GPU lacks
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if profile == 2:
            return _Obj(id=9, name=b"MIG 3g.40gb")
        return _Obj(id=100 + profile, name=b"MIG 7g.80gb")

    @staticmethod
    def _mig_handle(handle: Any, slot: int) -> Any:
        if slot == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return f"mig{slot}"


class _Obj:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> tuple[NvmlBackend, FakeNvml]:
    fake = FakeNvml()
    fake.install(monkeypatch)
    backend = NvmlBackend()
    backend._handles = [None]  # as nvmlInit would leave it for one GPU
    backend._initialized = True
    return backend, fake


def test_nvml_gpm_takes_one_sample_per_call_and_reads_each_metric(
    nvml: tuple[NvmlBackend, FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, fake = nvml
    clock = iter([100.0, 100.05, 101.0, 102.0])
    monkeypatch.setattr("trainsignals.exporters.gpu.nvml_gpm.time.monotonic", lambda: next(clock))
    assert backend.gpm(0) is None  # the first sample has nothing to compare with
    assert backend.gpm(0) is None  # 50 ms later: too close for NVML, nothing computed yet
    activity = backend.gpm(0)
    assert activity is not None
    assert activity.sm_active == 0.875
    assert activity.tensor_active is None  # that metric answered not supported
    assert fake.samples == 2
    assert backend.gpm(0) == activity
    assert fake.samples == 3


def test_nvml_gpm_a_failed_first_sample_is_no_baseline(
    nvml: tuple[NvmlBackend, FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, fake = nvml
    answers = iter([pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT), None, None])

    def sample(handle: Any, s: Any) -> Any:
        if (error := next(answers)) is not None:
            raise error
        fake.samples += 1
        return s

    monkeypatch.setattr(pynvml, "nvmlGpmSampleGet", sample)
    clock = iter([100.0, 101.0, 102.0])
    monkeypatch.setattr("trainsignals.exporters.gpu.nvml_gpm.time.monotonic", lambda: next(clock))
    with pytest.raises(Exception) as info:
        backend.gpm(0)
    assert getattr(info.value, "function", None) == "nvmlGpmSampleGet"
    assert getattr(info.value, "code", None) == "timeout"
    assert backend.gpm(0) is None  # this sample is the first baseline
    assert backend.gpm(0) is not None
    assert fake.samples == 2


def test_nvml_gpm_unsupported_device_is_not_supported(
    nvml: tuple[NvmlBackend, FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _fake = nvml
    monkeypatch.setattr(pynvml, "nvmlGpmQueryDeviceSupport", lambda h: _Obj(isSupportedDevice=0))
    with pytest.raises(Exception) as info:
        backend.gpm(0)
    assert getattr(info.value, "code", None) == "not_supported"


def test_nvml_mig_lists_gpu_instances_once_each(nvml: tuple[NvmlBackend, FakeNvml]) -> None:
    backend, fake = nvml
    first = backend.mig_instances(0)
    assert [(m.gpu_instance_id, m.profile, m.memory_used_bytes) for m in first] == [
        (1, "2g.20gb", 2**30),
        (2, "3g.40gb", 2**30),
    ]
    assert all(m.activity is None for m in first)
    assert fake.mig_samples == [1, 2]  # one GPM sample per GPU instance, not per slot


def test_nvml_mig_mode_off_is_an_empty_list(
    nvml: tuple[NvmlBackend, FakeNvml], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _fake = nvml
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMigMode", lambda h: [0, 0])
    assert backend.mig_instances(0) == []
    monkeypatch.setattr(
        pynvml,
        "nvmlDeviceGetMigMode",
        lambda h: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)),
    )
    with pytest.raises(Exception) as info:
        backend.mig_instances(0)
    assert getattr(info.value, "code", None) == "not_supported"

"""What a postmortem says about an incident (issue 27, item 8): the onset line names the alert
that explains the incident, GPU-hours count the GPUs that ran, and a suppressed page is not
written next to one that reached a pager as if it were suppressed too."""

from __future__ import annotations

from pathlib import Path

from tests.test_postmortem import alert, matrix
from trainsignals.generator.loader import load_specs
from trainsignals.ops.postmortem import build_timeline, detection
from trainsignals.ops.postmortem.impact import impact

from .conftest import JOBS


def _events(result: list[dict]):
    return build_timeline(result, 0.0, 600.0, 15.0)


def test_onset_names_the_page_not_the_input_alert_pending_with_it() -> None:
    from trainsignals.ops.postmortem.timeline import onset_name

    # The rank died: GpuLost and AlertInputMissing (its inputs vanished) go pending together;
    # by name, AlertInputMissing sorts first.
    result = [
        matrix(alert("AlertInputMissing", "pending", "ticket"), [60, 75, 90]),
        matrix(alert("AlertInputMissing", "firing", "ticket"), [105, 120]),
        matrix(alert("GpuLost", "pending", "page", node="n0"), [60, 75]),
        matrix(alert("GpuLost", "firing", "page", node="n0"), [90, 105, 120]),
        matrix(alert("TrainingStalled", "pending", "page"), [75, 90]),
        matrix(alert("TrainingStalled", "firing", "page"), [105, 120]),
    ]
    events = _events(result)
    found = detection(events, 0.0)
    assert found.earliest_sign == 60
    assert onset_name(events, found.earliest_sign, 15.0) == "GpuLost"
    # Alone, the input alert is still named: the line is never unlabelled.
    alone = _events(result[:2])
    assert onset_name(alone, detection(alone, 0.0).earliest_sign, 15.0) == "AlertInputMissing"


def test_gpu_hours_count_the_gpus_that_ran() -> None:
    (spec,) = load_specs([JOBS / "minimal.yaml"])  # 1 x 8 GPUs
    # The demo's 2 x 2: four GPUs reporting before the window, one lost inside it.
    counts = [(t, 4.0 if t < 300 else 3.0) for t in range(0, 601, 15)]
    seen = impact(spec, [], [], 120.0, 480.0, 15.0, counts)
    assert seen.gpus == 4 and seen.gpu_hours == 4 * 360 / 3600
    assert "reporting" in seen.gpus_from
    # Without any GPU series, the spec's shape, said so.
    shaped = impact(spec, [], [], 120.0, 480.0, 15.0, [])
    assert shaped.gpus == 8 and "spec" in shaped.gpus_from


def test_a_held_back_page_is_not_written_beside_one_that_reached_a_pager(tmp_path: Path) -> None:
    from trainsignals.ops.postmortem.draft import Postmortem, render

    result = [
        matrix(alert("GpuLost", "firing", "page"), [60, 75, 90]),
        matrix(alert("TrainingStalled", "firing", "page"), [75, 90]),
    ]
    events = _events(result)
    # Alertmanager inhibited TrainingStalled: it reached no pager.
    events[1].delivery_known = True
    events[1].first_delivered = None
    events[0].delivery_known = True
    events[0].first_delivered = 60.0
    (spec,) = load_specs([JOBS / "minimal.yaml"])
    pm = Postmortem(
        job="minimal",
        start=0.0,
        end=600.0,
        spec=spec,
        events=events,
        detection=detection(events, 0.0),
        impact=impact(spec, [], [], 0.0, 600.0, 15.0, [(0.0, 4.0)]),
        signals=[],
        queries=[],
        prometheus="http://127.0.0.1:9090",
        step=15.0,
        plot_step=15.0,
        badput=None,
        suppression="alertmanager.yaml",
        drawn=600.0,
    )
    text = render(pm)
    (pages,) = [line for line in text.splitlines() if line.startswith("| Pages that reached")]
    assert pages == "| Pages that reached a pager | GpuLost |"
    assert "suppressed" not in pages
    (held,) = [line for line in text.splitlines() if line.startswith("| Pages Alertmanager held")]
    assert "TrainingStalled" in held and "GpuLost" not in held
    assert "(4 GPUs: GPUs reporting when the window began)" in text

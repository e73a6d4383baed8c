"""`trainsignals postmortem`: timeline construction, the PNG renderer, and a real incident.

The e2e test runs the nan_loss scenario (1 node x 2 GPUs, time scale 240, fault moved to 22
simulated minutes) against real Prometheus and Alertmanager, then drafts the postmortem for
the fault window and for a quiet window before it.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
import time
import zlib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import JOBS, STACK_GROUP, require_tool
from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.ops.postmortem import build_timeline, detection, runs
from trainsignals.ops.postmortem.plot import SIZE, PlotSpec, plot
from trainsignals.ops.query import parse_when, step_for
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.scenarios import SCENARIOS
from trainsignals.stacks.stack import Stack, job_files


# --- helpers ----------------------------------------------------------------------------------
def png_size(data: bytes) -> tuple[int, int]:
    """Check a PNG byte by byte (signature, chunk CRCs, IHDR, decoded IDAT size); its size."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
    pos, chunks, kinds = 8, {}, []
    idat = b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body), f"CRC of {kind!r}"
        chunks[kind] = body
        kinds.append(kind)
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and color in (2, 6), "8-bit RGB or RGBA (matplotlib writes RGBA)"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + channels * width), "one filter byte + pixels per row"
    return width, height


def matrix(labels: dict[str, str], times: list[float]) -> dict:
    return {"metric": labels, "values": [[t, "1"] for t in times]}


def alert(name: str, state: str, severity: str, **extra: str) -> dict[str, str]:
    return {
        "__name__": "ALERTS",
        "alertname": name,
        "alertstate": state,
        "severity": severity,
        "training_job": "j",
        **extra,
    }


# --- unit -------------------------------------------------------------------------------------
def test_parse_when_accepts_rfc3339_and_unix_seconds() -> None:
    assert parse_when("1767225600") == 1767225600.0
    assert parse_when("2026-01-01T00:00:00Z") == 1767225600.0
    assert parse_when("2026-01-01T01:00:00+01:00") == 1767225600.0
    assert parse_when("2026-01-01T00:00:00") == 1767225600.0  # naive means UTC
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_when("yesterday")


def test_step_gives_about_200_points() -> None:
    assert step_for(0, 3600) == 18
    assert step_for(0, 10) == 0.05  # compressed tests: floor, fractional
    assert runs([1, 2, 3, 7, 8], 1) == [(1, 3), (7, 8)]


def test_timeline_from_synthetic_query_range() -> None:
    start, end, step = 90.0, 130.0, 1.0
    result = [
        matrix(alert("NodeDown", "pending", "page", node="n1"), [100, 101, 102, 103, 104]),
        # Fires, resolves (gap), fires again: one row, two episodes.
        matrix(alert("NodeDown", "firing", "page", node="n1"), [*range(105, 111), 115, 116]),
        matrix(alert("NodeDown", "pending", "page", node="n0"), [108, 109]),  # never fired
        matrix(alert("DataLoaderStarved", "firing", "ticket"), list(range(120, 131))),
        matrix(alert("GpuLost", "firing", "page"), [90, 91, 92]),  # active at window start
    ]
    events = build_timeline(result, start, end, step)
    assert [(e.alertname, e.labels.get("node")) for e in events] == [
        ("GpuLost", None),
        ("NodeDown", "n1"),
        ("NodeDown", "n0"),
        ("DataLoaderStarved", None),
    ]
    gpu, n1, n0, starved = events
    assert gpu.active_at_start and gpu.first_pending is None and gpu.resolved == 93
    assert (n1.first_pending, n1.first_firing, n1.resolved) == (100, 105, 117)
    assert n1.episodes == 2 and n1.severity == "page" and not n1.active_at_start
    assert n1.label_text == "node=n1"
    assert n0.first_firing is None and n0.resolved == 110
    assert starved.resolved is None, "still firing at the window's end"

    found = detection(events, start)
    assert found.earliest_sign == 90  # GpuLost was already firing when the window began
    assert found.first_page is gpu and found.time_to_page == 0
    assert [(e.alertname, later) for e, later in found.late] == [
        ("NodeDown", 15),
        ("DataLoaderStarved", 30),
    ]
    assert [e.alertname for e in found.tickets] == ["DataLoaderStarved"]


def test_onset_is_not_a_start_up_pending_that_never_fired() -> None:
    """TrainingTargetsDown is pending while the targets come up and resolves unfired; the
    incident's first sign is NonFiniteLoss's pending, not that start-up blip."""
    result = [
        matrix(alert("TrainingTargetsDown", "pending", "page"), [100, 101]),
        matrix(alert("NonFiniteLoss", "pending", "page"), [150, 151]),
        matrix(alert("NonFiniteLoss", "firing", "page"), list(range(152, 161))),
        # Pending at start-up too, and fired much later: the run that fired counts.
        matrix(alert("DataLoaderStarved", "pending", "ticket"), [102, 103, 155, 156]),
        matrix(alert("DataLoaderStarved", "firing", "ticket"), [157, 158]),
    ]
    events = build_timeline(result, 95.0, 160.0, 1.0)
    found = detection(events, 95.0)
    assert found.earliest_sign == 150
    assert found.first_page is not None and found.time_to_page == 2


def test_detection_without_alerts_starts_at_the_window() -> None:
    found = detection([], 50.0)
    assert found.earliest_sign == 50.0 and found.first_page is None and found.late == []


def test_matplotlib_plot_draws_band_firing_onset_threshold_and_series() -> None:
    import io

    import matplotlib.image

    t0 = 1_800_000_000.0
    series = [(t0 + t, float(t % 7)) for t in range(0, 100)]
    look = PlotSpec("Throughput (tokens/s)", "tokens/s", 3.0, "throughput floor")
    firing = [(t0 + 50, t0 + 70, "ThroughputBelowFloor")]
    data = plot(series, t0, t0 + 100, (t0 + 40, t0 + 60), firing, 1, look, (t0 + 45, "X"))
    assert png_size(data) == SIZE
    pixels = matplotlib.image.imread(io.BytesIO(data))
    rgb = {tuple(round(255 * c) for c in px[:3]) for row in pixels for px in row}
    assert (0x1F, 0x5A, 0xC8) in rgb, "the series"
    onset = (0x6A, 0x1B, 0x9A)  # antialiased: the nearest pixel is close, not exact
    near = [c for c in rgb if sum(abs(a - b) for a, b in zip(c, onset, strict=True)) < 40]
    assert near, "onset line"
    assert (0xD2, 0x28, 0x28) in rgb, "alert firing strip"
    assert (0xFF, 0xE4, 0xC4) in rgb, "incident window"
    assert plot(series, t0, t0 + 100, (t0 + 40, t0 + 60), [], 1, look) == plot(
        series, t0, t0 + 100, (t0 + 40, t0 + 60), [], 1, look
    ), "deterministic bytes"


def test_every_marked_line_and_band_names_its_alert() -> None:
    import matplotlib.pyplot as plt

    from trainsignals.ops.postmortem.plot import draw

    t0 = 1_800_000_000.0
    series = [(t0 + t, 1.0) for t in range(100)]
    firing = [
        (t0 + 50, t0 + 70, "NodeDown"),
        (t0 + 52, t0 + 90, "TrainingNoProgress"),
        (t0 + 80, t0 + 95, "NodeDown"),  # a second episode: same lane, same colour
    ]
    look = PlotSpec("Loss", "", None)
    fig = draw(series, t0, t0 + 100, (t0 + 40, t0 + 60), firing, 1, look, (t0 + 48, "NodeDown"))
    try:
        main, strip = fig.axes
        (legend,) = fig.legends
        labels = [text.get_text() for text in legend.get_texts()]
        assert "onset: NodeDown pending" in labels, labels
        assert "incident window" in labels and "Loss" in labels, labels
        # One lane per alert, named by its tick label, in order of first firing.
        lanes = [label.get_text() for label in strip.get_yticklabels()]
        assert lanes == ["NodeDown", "TrainingNoProgress"]
        bars = [p for p in strip.patches if p.get_height() < 1]
        by_lane = {}
        for bar in bars:
            by_lane.setdefault(round(bar.get_y() + bar.get_height() / 2), set()).add(
                bar.get_facecolor()
            )
        assert len(by_lane[0]) == 1 and len(bars) == 3, "both episodes in NodeDown's lane"
        assert by_lane[0] != by_lane[1]
        assert not main.texts, "no names written over the signal"
    finally:
        plt.close(fig)


def test_nothing_drawn_leaves_the_figure() -> None:
    """The legend, the lane names and the axis labels fit the 640x240 figure, also with long
    alert names firing together (their names overlapped and the legend ran off both edges)."""
    import matplotlib.pyplot as plt

    from trainsignals.ops.postmortem.plot import draw

    t0 = 1_800_000_000.0
    series = [(t0 + 15 * t, 220_000.0) for t in range(120)]
    names = ["GpuLost", "AlertInputMissing", "TrainingThroughputBelowFloor", "TrainingStalled"]
    firing = [(t0 + 675 + 15 * (i // 2), t0 + 1050, name) for i, name in enumerate(names)]
    look = PlotSpec("Throughput (tokens/s)", "tokens/s", 200_000.0, "throughput floor")
    fig = draw(
        series, t0, t0 + 1800, (t0 + 600, t0 + 1200), firing, 15, look, (t0 + 660, "GpuLost")
    )
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        width, height = SIZE
        texts = [t for t in fig.findobj(plt.Text) if t.get_visible() and t.get_text()]
        outside = []
        boxes = []
        for text in texts:
            box = text.get_window_extent(renderer)
            if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
                outside.append(text.get_text())
            boxes.append((text.get_text(), box))
        assert not outside, outside
        lane_boxes = [b for name, b in boxes if name in names]
        overlapping = [
            (a, b) for i, a in enumerate(lane_boxes) for b in lane_boxes[i + 1 :] if a.overlaps(b)
        ]
        assert not overlapping, "alert names overlap"
        lanes = [t.get_text() for t in fig.axes[1].get_yticklabels()]
        assert lanes == sorted(names, key=lambda n: (names.index(n) // 2, n))
    finally:
        plt.close(fig)


def _chunks(data: bytes, kind: bytes) -> list[bytes]:
    out, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        if data[pos + 4 : pos + 8] == kind:
            out.append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
    return out


def test_cli_rejects_bad_times() -> None:
    result = CliRunner().invoke(main, ["postmortem", "--job", "x", "--from", "soon", "--to", "1"])
    assert result.exit_code == 2 and "RFC 3339" in result.output
    result = CliRunner().invoke(main, ["postmortem", "--job", "x", "--from", "5", "--to", "1"])
    assert result.exit_code == 2 and "after --from" in result.output


# --- end to end -------------------------------------------------------------------------------
SCALE = 240.0
# Simulated: after startup (2m) and warm-up (10m), and late enough that the recorded series
# (rules load once targets are up) have a few real seconds of data before the window.
FAULT_AT = 22 * 60
RUN_AFTER_FAULT = 20 * 60  # simulated: NonFiniteLoss fires within ~1 m (real: well under 5 s)
KEEP = os.environ.get("TRAINSIGNALS_KEEP_POSTMORTEM")  # copy the draft here to read it
START_LEAD = 4.0  # real seconds: endpoints scraped and rules loaded before the clock starts


@pytest.mark.e2e
@pytest.mark.xdist_group(STACK_GROUP)
def test_postmortem_of_a_real_nan_loss_incident(tmp_path: Path) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    base = load_specs([JOBS / "minimal.yaml"])[0]
    spec = effective_spec(
        base.model_copy(update={"name": "pm-nan-loss", "rotation": "ml-oncall"}), 1, 2
    )
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / f"{spec.name}.yaml").write_text(
        yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)), encoding="utf-8"
    )
    with tempfile.TemporaryDirectory(prefix="trainsignals-pm-") as tmp:
        work = Path(tmp)
        rules = work / "rules.yaml"
        rules.write_text(job_files(spec, SCALE)[f"alerts/{spec.name}.rules.yaml"], "utf-8")
        sd = work / "sd"
        with Stack(work / "stack", [spec], [sd], [rules], defer_rules=True) as stack:
            sim = Simulation(
                spec,
                SCENARIOS["nan_loss"],
                time_scale=SCALE,
                nodes=1,
                gpus_per_node=2,
                fault_at=FAULT_AT,
                targets_dir=sd,
                start_time=time.time() + START_LEAD,
            )
            try:
                sim.start(FAULT_AT + RUN_AFTER_FAULT)
                stack.wait_for_targets(3)
                stack.load_rules()
                assert sim.finished.wait(60), "simulation did not finish"
            finally:
                sim.stop()
            onset, end = sim.real_time_at(FAULT_AT), sim.real_time_at(FAULT_AT + RUN_AFTER_FAULT)
            quiet_from, quiet_to = sim.real_time_at(3 * 60), onset - 0.5

            def draft(start: float, stop: float, out: Path) -> str:
                args = ["postmortem", "--job", spec.name, "--prometheus", stack.prometheus_url]
                args += ["--alertmanager", stack.alertmanager_url]
                args += ["--from", f"{start:.3f}", "--to", f"{stop:.3f}"]
                args += ["--out", str(out), "--jobs", str(jobs)]
                result = CliRunner().invoke(main, args)
                assert result.exit_code == 0, result.output
                return out.read_text(encoding="utf-8")

            text = draft(onset - 1, end, tmp_path / "pm" / "incident.md")
            if KEEP:
                shutil.copytree(tmp_path / "pm", KEEP, dirs_exist_ok=True)
            quiet = draft(quiet_from, quiet_to, tmp_path / "pm" / "quiet.md")

    timeline = text.split("## Timeline", 1)[1].split("## Detection", 1)[0]
    row = next(line for line in timeline.splitlines() if line.startswith("| NonFiniteLoss |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "page"
    firing = parse_when(cells[4])
    assert onset < firing < onset + 10, (onset, cells)
    assert "First page | NonFiniteLoss at" in text
    # The incident's badput: a NaN loss keeps the steps going, so most of it is goodput.
    ettr = re.search(r"Effective training time ratio in the window: ([0-9.]+)%", text)
    assert ettr and 50 < float(ettr.group(1)) <= 100, text.split("## Impact")[1][:1500]
    assert "| lost_progress |" in text and "| recovery |" in text
    assert "time to page: **" in text
    for owner in spec.owners:
        assert owner in text
    assert "`ml-oncall`" in text and "| Team | ml-research |" in text
    assert 'ALERTS{training_job="pm-nan-loss"}' in text  # Data appendix: the exact PromQL
    assert 'job:trainsignals_mfu:ratio_rate5m{training_job="pm-nan-loss"}' in text
    plots = sorted((tmp_path / "pm" / "incident").glob("*.png"))
    assert [p.stem for p in plots] == ["data_wait", "loss", "mfu", "step_time_p95", "tokens"]
    for p in plots:
        assert png_size(p.read_bytes()) == SIZE
        assert f"](incident/{p.name})" in text
    tokens_row = next(line for line in text.splitlines() if line.startswith("| Throughput"))
    assert "no data" not in tokens_row, "tokens/s before, during and after the window"
    assert "No alerts fired" in quiet and "NonFiniteLoss" not in quiet
    # The onset is the fault's, not a start-up pending alert's.
    sign = re.search(r"- Earliest sign: (\S+) \(the pending that led to (\w+) firing\)", text)
    assert sign and onset - 2 < parse_when(sign.group(1)) < onset + 10, (onset, sign)
    assert "| Pages that reached a pager | NonFiniteLoss" in text

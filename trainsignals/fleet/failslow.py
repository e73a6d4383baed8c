"""Fail-slows and lemon nodes in the replay's ground truth (issue 28).

Fail-slows (Greyhound/FALCON, USENIX ATC'25: in 16 of 27 large jobs, network fail-slows 24
minutes on average): a throttled GPU, a degraded InfiniBand link, a slow host CPU. None stops
the job; in synchronous training every step waits for the slowest rank, so the whole job runs
at the culprit's pace for as long as it lasts. Each is drawn in a training stretch between two
interruptions (one per stretch, so the stretch's stored slots can show it, timeline.py).

The model, stated so it can be argued with. A step is OWN_SHARE own work (compute, host), and
LINK_SHARE of it are inter-node transfers no compute overlaps:
- gpu: the SM clock at `factor` (0.7-0.9) of its peers' stretches that rank's own work by
  1/factor, and the step by OWN_SHARE x (1/factor - 1);
- host: one rank's own work x `factor` (1.05-1.4): a noisy neighbour, a CPU stuck at a low
  P-state, a data worker starving on its host;
- link: the node's rail moves `factor` (0.25-0.6) of its peers' bytes, the transfers' share
  of the step stretching by 1/factor: half of them a link trained at a lower width or speed
  (its link rate, node_infiniband_rate_bytes_per_second, drops to half its peers', a quarter
  below a factor of 0.3: the lanes left), half a congested switch port (the port also waits
  to transmit, WAIT_TICKS_S ticks a second, at its full rate). Own work is unchanged: the
  straggler score cannot see a link.
Costs stay under about 25%: a bigger fail-slow takes the job under its throughput floor, and
that pages (rightly; then it is an incident, not a fail-slow ticket).

Lemon nodes (Kokolis et al. 2024, Meta RSC): LEMONS nodes fail about LEMON_RATE_X times as
often as the others. Their faults are taken from the drawn hardware faults (the Llama 3 mix and
counts stay as they are): the lemon is drained after each, repaired, and comes back under its
own name (nodes keep their names across jobs and spares).

Tickets: non-fatal evidence against a node (add_tickets). Meta's lemon detector reads per node,
besides job failures, its tickets, XIDs and times out of service over about a month (Kokolis et
al. 2024, section on lemon nodes); real lemons show a trail of small anomalies before and
between the failures that kill jobs. The paper gives no per-node rate of those signals, so the
rates here are assumptions, stated to be argued with:
- every node that is no lemon: TICKETS_PER_NODE_30D (1.0) non-fatal hardware tickets per 30
  days, a Poisson process over the whole run (2,044 nodes: ~68 tickets a day fleet-wide, about
  ten times the ~6.6 job-killing hardware faults a day of Llama 3's run);
- a lemon: LEMON_TICKET_X (10) times that, one every 3 days, before, between and after its
  job-killing faults (also while drained or a spare: a failed health check tickets too);
- each ticket is one stretch (10-90 minutes) of one alert on one node, its kind drawn from
  TICKET_MIX: non-fatal XIDs (row-remap events, contained ECC: 35%), row remaps pending (15%),
  thermal (15%) and power (10%) throttling, a flapping InfiniBand port (15%), a node that
  dropped off the network briefly (10%). Each must be a ticket of the node record
  (generator/nodes/policy.hardware_tickets: derived from the alert declarations).
The replay stores 2 node slots of full series; a ticket on any of the 2,048 nodes reaches the
rules as Prometheus' own `ALERTS` series of that alert on that node (run.py passes them to the
evaluator, which writes them beside the evaluated alerts' ALERTS), the only input the node record
reads. They are not routed: the replay's notifications stay those of its stored series.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainsignals.generator.alerts.definitions.fabric import INFINIBAND_PORT_FLAPPING
from trainsignals.generator.alerts.definitions.gpu_conditions import (
    GPU_POWER_THROTTLING,
    GPU_THERMAL_THROTTLING,
)
from trainsignals.generator.alerts.definitions.gpu_faults import (
    GPU_REMAPPED_ROWS_PENDING,
    GPU_XID_ERROR,
)
from trainsignals.generator.alerts.definitions.reachability import NODE_UNREACHABLE_RECENTLY
from trainsignals.generator.nodes.policy import hardware_tickets

from .history import (
    DAY,
    FLEET_NODES,
    FULL_DAYS,
    GPUS_PER_NODE,
    HOUR,
    MINUTE,
    THERMAL_LEAD_S,
)

if TYPE_CHECKING:
    from .history import History

OWN_SHARE = 0.7  # of a healthy step: own work (the rest: collectives, waits)
LINK_SHARE = 0.1  # of a healthy step: inter-node transfers no compute overlaps
FAILSLOWS_FULL = 54  # in 54 days, one a day on 16K GPUs (Greyhound: in most big jobs)
KINDS = ("gpu", "link", "host")
WAIT_TICKS_S = 2e7  # a congested port's transmit wait (node_infiniband_port_transmit_wait)
LEMONS = 4
LEMON_RATE_X = 10  # a lemon's hardware faults per run, against any other node's
LEMON_REPAIR_S = 2 * DAY  # a drained lemon is back (repaired, same name) after this at least
CLEAR_S = 15 * MINUTE  # a fail-slow keeps this clear of restarts and incidents
TICKETS_PER_NODE_30D = 1.0  # non-fatal hardware tickets of a node that is no lemon, per 30 days
LEMON_TICKET_X = 10  # a lemon's tickets, against any other node's
# (alert, share of the tickets, names a GPU): the kinds of non-fatal evidence.
TICKET_MIX: tuple[tuple[str, float, bool], ...] = (
    (GPU_XID_ERROR, 0.35, True),
    (GPU_REMAPPED_ROWS_PENDING, 0.15, True),
    (GPU_THERMAL_THROTTLING, 0.15, True),
    (GPU_POWER_THROTTLING, 0.10, True),
    (INFINIBAND_PORT_FLAPPING, 0.15, False),
    (NODE_UNREACHABLE_RECENTLY, 0.10, False),
)
TICKET_MINUTES = (10, 90)  # how long one ticket's alert fires
MIN_STRETCH_S = 25 * MINUTE  # the shortest training stretch a fail-slow is drawn in


@dataclass(frozen=True)
class FailSlow:
    """One fail-slow. Times are seconds from the run start; `gpu` is the GPU (gpu kind) or the
    slow rank's local rank (host kind)."""

    kind: str  # gpu, link, host
    node: str
    start_s: int
    end_s: int
    factor: float  # SM clock ratio (gpu), own-work factor (host), throughput ratio (link)
    gpu: int | None = None
    congested: bool = False  # link: waits to transmit (else: trained at a lower width)

    @property
    def slowdown(self) -> float:
        """The job's step time over a healthy step's while it lasts."""
        if self.kind == "gpu":
            return 1 + OWN_SHARE * (1 / self.factor - 1)
        if self.kind == "host":
            return 1 + OWN_SHARE * (self.factor - 1)
        return 1 + LINK_SHARE * (1 / self.factor - 1)

    @property
    def cost(self) -> float:
        """The job's throughput lost while it lasts (the truth failslow_ticketed reads)."""
        return 1 - 1 / self.slowdown

    @property
    def link_rate(self) -> float:
        """The port's link rate over its peers' (1 but for a link trained down)."""
        if self.kind != "link" or self.congested:
            return 1.0
        return 0.25 if self.factor < 0.3 else 0.5

    @property
    def own_factor(self) -> float:
        """The slow rank's own work per step over a healthy rank's."""
        if self.kind == "gpu":
            return 1 / self.factor
        return self.factor if self.kind == "host" else 1.0

    def active(self, t: int) -> bool:
        return self.start_s <= t < self.end_s


@dataclass(frozen=True)
class Ticket:
    """One non-fatal ticket: `alert` fires on `node` (GPU `gpu`) over [start_s, end_s)."""

    node: str
    start_s: int
    end_s: int
    alert: str
    gpu: int | None = None


def add_tickets(history: History) -> None:
    """Draw every node's non-fatal tickets over the run: a Poisson process per node at
    TICKETS_PER_NODE_30D per 30 days, LEMON_TICKET_X times that on a lemon (module docstring)."""
    known = set(hardware_tickets())
    unknown = [alert for alert, _, _ in TICKET_MIX if alert not in known]
    if unknown:
        raise ValueError(f"TICKET_MIX names alerts the node record does not count: {unknown}")
    rng = random.Random(history.seed * 4099 + 28)  # its own stream: the faults stay as drawn
    lemons = set(history.lemons)
    kinds = [alert for alert, _, _ in TICKET_MIX]
    shares = [share for _, share, _ in TICKET_MIX]
    per_gpu = {alert: gpu for alert, _, gpu in TICKET_MIX}
    wall = history.wall_s
    tickets: list[Ticket] = []
    for index in range(FLEET_NODES):
        node = f"gpu-n{index:04d}"
        rate = TICKETS_PER_NODE_30D * (LEMON_TICKET_X if node in lemons else 1) / (30 * DAY)
        t = rng.expovariate(rate)
        while t < wall - TICKET_MINUTES[1] * MINUTE:
            alert = rng.choices(kinds, shares)[0]
            start = int(t) // MINUTE * MINUTE
            length = rng.randint(*TICKET_MINUTES) * MINUTE
            gpu = rng.randrange(GPUS_PER_NODE) if per_gpu[alert] else None
            tickets.append(Ticket(node, start, start + length, alert, gpu))
            t += rng.expovariate(rate)
    history.tickets = sorted(tickets, key=lambda ticket: ticket.start_s)


def _duration(rng: random.Random, kind: str) -> int:
    """Minutes to hours: links average about Greyhound's 24 minutes, the others run longer."""
    if kind == "link":
        minutes = rng.lognormvariate(3.0, 0.6)  # median 20 min, mean ~24 min
        return int(min(max(minutes, 8), 180)) * MINUTE
    return int(min(max(rng.lognormvariate(4.0, 0.8), 15), 360)) * MINUTE  # median ~55 min


def _factor(rng: random.Random, kind: str) -> float:
    low, high = {"gpu": (0.7, 0.9), "host": (1.05, 1.4), "link": (0.25, 0.6)}[kind]
    return round(rng.uniform(low, high), 3)


def add_failslows(history: History) -> None:
    """Draw the run's fail-slows (a count scaled to the run like every cause), each alone in a
    training stretch between two interruptions and clear of the incidents."""
    rng = random.Random(history.seed * 1009 + 28)  # its own stream: the faults stay as drawn
    count = round(FAILSLOWS_FULL * history.days / FULL_DAYS)
    end = history.completed_s or history.wall_s
    blocked = [(i.start_s - CLEAR_S, i.end_s + CLEAR_S) for i in history.incidents]
    stretches: list[tuple[int, int]] = []
    begin = 5 * MINUTE
    for stop in history.interruptions:
        lead = THERMAL_LEAD_S if stop.cause == "gpu_thermal" else 0
        stretches.append((begin + CLEAR_S, stop.fault_s - lead - CLEAR_S))
        begin = stop.first_step_s
    stretches.append((begin + CLEAR_S, end - CLEAR_S))
    free = [(lo, hi) for lo, hi in _minus(stretches, blocked) if hi - lo >= MIN_STRETCH_S]
    kinds = [KINDS[k % len(KINDS)] for k in range(count)]
    rng.shuffle(kinds)
    chosen = sorted(rng.sample(range(len(free)), min(count, len(free))))
    lemons = set(history.lemons)
    for kind, index in zip(kinds, chosen, strict=False):
        lo, hi = free[index]
        duration = min(_duration(rng, kind), (hi - lo) // MINUTE * MINUTE)
        start = lo + rng.randrange(0, (hi - lo - duration) // MINUTE + 1) * MINUTE
        node = f"gpu-n{rng.randrange(FLEET_NODES - 2):04d}"  # not the first stored slots'
        while node in lemons:
            node = f"gpu-n{rng.randrange(FLEET_NODES - 2):04d}"
        gpu = rng.randrange(GPUS_PER_NODE) if kind != "link" else None
        factor, congested = _factor(rng, kind), kind == "link" and rng.random() < 0.5
        history.failslows.append(
            FailSlow(kind, node, start, start + duration, factor, gpu, congested)
        )


def _minus(spans: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` less every hole."""
    for a, b in holes:
        spans = [
            piece
            for lo, hi in spans
            for piece in ((lo, min(hi, a)), (max(lo, b), hi))
            if piece[1] > piece[0]
        ]
    return spans


def add_hang_culprit(history: History) -> None:
    """The hang incident's cause: one rank waits for data (its loader stuck on its host), its
    GPU idle, while every other rank spins in the next collective waiting for it."""
    rng = random.Random(history.seed * 104729 + 28)
    hang = next(i for i in history.interruptions if i.incident == "hang")
    hang.node = f"gpu-n{rng.randrange(FLEET_NODES - 2):04d}"
    hang.gpu = rng.randrange(GPUS_PER_NODE)  # the stuck rank's local rank
    next(i for i in history.incidents if i.kind == "hang").node = hang.node


def lemon_fault_count(history: History) -> int:
    """The lemons' share of the hardware faults: LEMON_RATE_X times a node's rate each."""
    hardware = len(history.hardware_faults)
    per_node = hardware / (FLEET_NODES - LEMONS + LEMONS * LEMON_RATE_X)
    return round(LEMONS * LEMON_RATE_X * per_node)


def add_lemons(history: History) -> None:
    """Pick the lemons and give them their share of the hardware faults (round robin in time,
    each at least LEMON_REPAIR_S after the lemon's last one)."""
    rng = random.Random(history.seed * 7919 + 28)
    names = sorted(rng.sample(range(FLEET_NODES - 2), LEMONS))
    history.lemons = tuple(f"gpu-n{i:04d}" for i in names)
    faults = history.hardware_faults
    wanted = lemon_fault_count(history)
    picks = list(range(len(faults)))
    rng.shuffle(picks)
    given = 0
    for index in picks:
        if given == wanted:
            break
        fault = faults[index]
        lemon = history.lemons[given % LEMONS]
        if any(abs(fault.fault_s - t) < LEMON_REPAIR_S for t in _faults_of(history, lemon)):
            continue
        fault.node = lemon
        given += 1


def _faults_of(history: History, node: str) -> list[int]:
    return [i.fault_s for i in history.interruptions if i.node == node]


def lemon_incidents(history: History) -> dict[str, list[int]]:
    """Each lemon's job-killing incidents (its hardware faults), fault times in order."""
    return {lemon: sorted(_faults_of(history, lemon)) for lemon in history.lemons}


def failslow_hours(history: History) -> float:
    return sum((f.end_s - f.start_s) for f in history.failslows) / HOUR

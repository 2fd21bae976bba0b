"""Capacity planning (pure): accelerators, workers and partitions to finish a day inside the window.

Assumptions (printed by ``callqa plan`` and documented in the README):

- the day's audio is known in hours (``--hours-per-day``), split over the duration buckets by an
  audio-share mix (default :data:`DEFAULT_MIX`, or ``--mix short=0.1,...``);
- one ASR worker per accelerator, and a worker's throughput is its measured RTFx (audio seconds
  per wall second) on that bucket's calls: from the benchmark (``--rtfx-per-device``) or live from
  a worker's ``/metrics`` (audio seconds transcribed over engine-busy seconds);
- batching costs (:mod:`pipeline.simulated.device_model`, the model the simulated engine sleeps):
  a bucket's audio costs ``cost_factor`` times audio ÷ RTFx, for each call's last 30 s window is
  computed whole and a small bucket pays the batch-fill floor. The benchmark's RTFx is that of
  full batches of reference calls, so ``callqa plan --rtfx-per-device`` applies the factor of
  calls spread evenly over each bucket's lengths (:func:`bucket_cost_factors`); an RTFx read from
  a worker's ``/metrics`` already holds it (factor 1);
- the work must fit in ``window * (1 - margin)``: the margin absorbs retries, redrives, a lost
  node and the tail of the last long call;
- a bucket topic needs at least as many partitions as workers, and twice that so it can scale out
  without re-partitioning; never fewer than the catalog's 6. Kafka gives each member of a group
  whole partitions, so the count is also a multiple of the workers (and of any count the bucket is
  to scale to, :func:`partitions_for`): 4 workers over 6 partitions give 2 of them twice the others'
  work, and the bucket finishes as 3 workers would (:func:`effective_workers`; a simulated night
  measured that skew, tools/simulate_night.py). The plan warns where the topics hold the workers back.
- routers (:func:`plan_routers`): the day's calls arrive as one burst to be routed within a
  target time (default 60 s), or spread over a time; each router process routes at the measured
  rate of ``tools/bench_router.py``. A router is only given arrivals partitions, so more routers
  than the arrivals topic's partitions leave the extra ones idle: the plan says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.simulated.device_model import SimulatedEngineOptions, batching_factor, spread_calls

DEFAULT_MIX = {"short": 0.10, "medium": 0.35, "long": 0.45, "xlong": 0.10}  # share of audio seconds
MIN_PARTITIONS = 6
# One router process (batches of 64, 8 probe threads), measured by ``python -m tools.bench_router
# --calls 2000`` on the project's 2-core machine, loaded by other work: 165 arrivals/s, 2.59 ms
# router CPU per routed call. The rate is bound by waits (probes, deliveries), not by the CPU:
# 165/s takes 0.43 of a core, so routers on one host also need cores (see RouterPlan.cpu_cores).
ROUTER_ARRIVALS_PER_S = 165.0
ROUTER_CPU_MS_PER_CALL = 2.59
LONGEST_CALL_S = 3600.0  # the top of the last bucket, for its spread of call lengths
DEFAULT_ROUTE_WITHIN_S = 60.0  # a night's burst of arrivals routed within a minute (issue 29's target)


def parse_window(text: str) -> float:
    """``6h``, ``90m``, ``6h30m`` or plain hours (``6``) → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text) * 3600
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?", text)
    if not match or not any(match.groups()):
        raise ValueError(f"window must look like 6h, 90m or 6h30m, got {text!r}")
    return float(match.group(1) or 0) * 3600 + float(match.group(2) or 0) * 60


def parse_mix(text: str | None, buckets: tuple[str, ...]) -> dict[str, float]:
    if not text:
        mix = {b: DEFAULT_MIX.get(b, 0.0) for b in buckets}
    else:
        mix = {b: 0.0 for b in buckets}
        for part in text.split(","):
            name, _, share = part.partition("=")
            if name.strip() not in mix:
                raise ValueError(f"unknown bucket {name.strip()!r} in the mix; configured: {list(buckets)}")
            mix[name.strip()] = float(share)
    total = sum(mix.values())
    if total <= 0:
        raise ValueError("the mix gives no bucket any audio")
    return {b: s / total for b, s in mix.items()}


def rtfx_from_metrics(families: dict[str, float]) -> float:
    """RTFx from a worker's counters: audio seconds transcribed / seconds the engine computed."""
    audio = families.get("callqa_asr_audio_seconds_total", 0.0)
    busy = families.get("callqa_asr_engine_busy_seconds_total", 0.0)
    if audio <= 0 or busy <= 0:
        raise ValueError("the metrics hold no transcribed audio yet (callqa_asr_audio_seconds_total is 0)")
    return audio / busy


@dataclass(frozen=True)
class BucketPlan:
    bucket: str
    audio_h: float
    workers: int
    partitions: int
    cost_factor: float = 1.0  # device seconds per audio second, over 1 / RTFx (batching costs)


@dataclass(frozen=True)
class Plan:
    audio_h: float
    window_s: float
    margin: float
    rtfx_per_device: float
    devices: int
    buckets: list[BucketPlan]

    @property
    def busy_s(self) -> float:
        """Wall seconds the planned devices need for the day, each bucket on its own workers."""
        return max(
            (b.audio_h * 3600 * b.cost_factor / (b.workers * self.rtfx_per_device) for b in self.buckets if b.workers),
            default=0.0,
        )

    @property
    def utilisation(self) -> float:
        return self.busy_s / self.window_s


def bucket_cost_factors(
    edges_s: Sequence[float], names: Sequence[str], rtfx_per_device: float, longest_s: float = LONGEST_CALL_S
) -> dict[str, float]:
    """Each bucket's batching cost factor for stereo calls spread evenly over its lengths."""
    opts = SimulatedEngineOptions(rtfx=rtfx_per_device)
    bounds = [0.0, *edges_s, max(longest_s, edges_s[-1] if edges_s else longest_s)]
    return {name: batching_factor(spread_calls(bounds[i], bounds[i + 1]), opts) for i, name in enumerate(names)}


def plan(hours_per_day: float, window_s: float, rtfx_per_device: float, mix: dict[str, float],
         margin: float = 0.3, cost_factors: dict[str, float] | None = None) -> Plan:
    """``cost_factors``: per bucket, device seconds per audio second over 1 / RTFx (default 1: none)."""
    if hours_per_day < 0 or window_s <= 0 or rtfx_per_device <= 0 or not 0 <= margin < 1:
        raise ValueError("hours ≥ 0, window > 0, RTFx > 0 and 0 ≤ margin < 1 are needed")
    if cost_factors and min(cost_factors.values()) <= 0:
        raise ValueError("a bucket's cost factor must be > 0")
    usable_s = window_s * (1 - margin)
    buckets = []
    for bucket, share in mix.items():
        audio_s = hours_per_day * 3600 * share
        factor = (cost_factors or {}).get(bucket, 1.0)
        # Each bucket's group is served by its own workers: round up per bucket.
        workers = math.ceil(round(audio_s * factor / (rtfx_per_device * usable_s), 9)) if audio_s > 0 else 0
        buckets.append(
            BucketPlan(bucket, round(audio_s / 3600, 2), workers, partitions_for(workers), round(factor, 4))
        )
    return Plan(hours_per_day, window_s, margin, rtfx_per_device, sum(b.workers for b in buckets), buckets)


def partitions_for(workers: int, *scale_to: int) -> int:
    """The fewest partitions, at least the catalog's 6 and twice the most workers, over which each
    worker count given holds the same number of partitions."""
    counts = [w for w in (workers, *scale_to) if w > 0]
    step = math.lcm(*counts) if counts else 1
    return step * math.ceil(max(MIN_PARTITIONS, 2 * max(counts, default=0)) / step)


def effective_workers(workers: int, partitions: int) -> float:
    """How many workers a group's work is done at the pace of: the busiest member holds
    ceil(partitions / workers) of the partitions (their work being alike, keys hashed evenly)."""
    if workers <= 0 or partitions <= 0:
        return 0.0
    return partitions / math.ceil(partitions / workers)


def partitions_setting(
    result: Plan, partitions: dict[str, int], current: dict[str, int], topic: str = "audio.bucket.{}"
) -> dict[str, int]:
    """The deployment's topic_partitions with every bucket raised where its partitions hold the plan's
    workers back (as :func:`partition_warnings` says); unchanged where none does."""
    raised = {
        topic.format(b.bucket): b.partitions
        for b in result.buckets
        if b.bucket in partitions and b.workers and effective_workers(b.workers, partitions[b.bucket]) < b.workers
    }
    return {**current, **raised}


def partition_warnings(result: Plan, partitions: dict[str, int], topic: str = "audio.bucket.{}") -> list[str]:
    """Where a bucket topic's partitions (as they are now) hold the plan's workers back."""
    out = []
    for b in result.buckets:
        have = partitions.get(b.bucket)
        if have is None or b.workers == 0 or effective_workers(b.workers, have) >= b.workers:
            continue
        pace = effective_workers(b.workers, have)
        why = (
            f"{b.workers - have} of them get none"
            if b.workers > have
            else f"the busiest holds {math.ceil(have / b.workers)}, {b.workers / pace:.2f}x the even share"
        )
        name = topic.format(b.bucket)
        out.append(
            f"{b.bucket}: {b.workers} workers over {have} partitions work at the pace of {pace:g} ({why}); "
            f"raise {name} to {b.partitions} partitions (settings: CALLQA_TOPIC_PARTITIONS="
            f"'{{\"{name}\": {b.partitions}}}', then callqa topics apply --execute)"
        )
    return out


@dataclass(frozen=True)
class RouterPlan:
    arrivals: int  # calls to route
    within_s: float  # the time they arrive in (a burst) or must be routed in
    per_router_arrivals_per_s: float  # what one router process routes (capped at one core's worth)
    cpu_ms_per_call: float
    arrivals_partitions: int  # the arrivals topic's partitions: the most routers that get work
    routers: int  # router processes needed for arrivals / within_s
    partitions_needed: int  # arrivals partitions those routers need: one each at least
    routed_in_s: float  # how long the arrivals take on the routers that get partitions
    warning: str | None

    @property
    def arrivals_per_s_needed(self) -> float:
        return self.arrivals / self.within_s

    @property
    def cpu_cores(self) -> float:
        """Cores the routers keep busy while routing at the needed rate (on top of Kafka and storage)."""
        return self.arrivals_per_s_needed * self.cpu_ms_per_call / 1000


def plan_routers(
    arrivals: int,
    within_s: float,
    arrivals_partitions: int,
    per_router_arrivals_per_s: float = ROUTER_ARRIVALS_PER_S,
    cpu_ms_per_call: float = ROUTER_CPU_MS_PER_CALL,
) -> RouterPlan:
    """Router processes to route ``arrivals`` calls in ``within_s`` seconds."""
    if arrivals < 0 or within_s <= 0 or arrivals_partitions < 1 or per_router_arrivals_per_s <= 0:
        raise ValueError("arrivals ≥ 0, a time > 0, ≥ 1 arrivals partition and a router rate > 0 are needed")
    if cpu_ms_per_call < 0:
        raise ValueError("the router CPU per call must be ≥ 0 ms")
    # A router is one Python process: it cannot route faster than one core's worth of calls.
    rate = min(per_router_arrivals_per_s, 1000 / cpu_ms_per_call) if cpu_ms_per_call > 0 else per_router_arrivals_per_s
    routers = math.ceil(round(arrivals / within_s / rate, 9))
    busy = min(routers, arrivals_partitions)
    routed_in_s = arrivals / (busy * rate) if busy else 0.0
    warning = None
    if routers > arrivals_partitions:
        warning = (
            f"{routers} router processes are needed but the arrivals topic has {arrivals_partitions} partitions: "
            f"only {arrivals_partitions} get work and the arrivals take {routed_in_s:.0f} s, not {within_s:g} s; "
            f"raise audio.arrivals, router.seen and router.retry to ≥ {routers} partitions between nights, "
            "with the arrivals drained (a new partition count moves keys)"
        )
    return RouterPlan(
        arrivals, within_s, rate, cpu_ms_per_call, arrivals_partitions, routers, routers, routed_in_s, warning
    )

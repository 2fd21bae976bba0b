"""A night at scale on one machine: the real Kafka stages over SIMULATED storage and engines.

Starts its own local stack (temporary state directory), applies the catalog, runs real router,
worker and QA processes (``callqa router|worker --simulated-storage``, workers with
``--engine simulated:rtfx=R,scale=S``), publishes a generated night's arrivals as a burst and,
mid-run, SIGKILLs one worker (restarted as its orchestrator would) and scales a bucket out.
Everything is counted from the real output topics (read committed): duplicates and losses
must be 0. Writes OUT/night.json and OUT/night.html.

    .venv/bin/python -m tools.simulate_night --calls 300 --out out/night
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline import stack
from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.publisher import ArrivalPublisher
from pipeline.catalog import TopicSpec, load_catalog, settings_catalog
from pipeline.config import Settings, read_env_file
from pipeline.events import DeadLetter, ObjectRef, RoutedCall, Transcript, decode
from pipeline.headers import Stamp
from pipeline.ops.plan import (
    DEFAULT_MIX,
    DEFAULT_ROUTE_WITHIN_S,
    ROUTER_ARRIVALS_PER_S,
    Plan,
    RouterPlan,
    partitions_for,
    plan,
    plan_routers,
)
from pipeline.qa.charts import hbar_svg, histogram_svg, lines_svg
from pipeline.simulated.device_model import SimulatedEngineOptions, batching_factor, device_time
from pipeline.simulated.storage import SimulatedRecording, etag_of, key_for
from pipeline.stages.routing import Buckets
from tests.kafka_helpers import TopicReader
from tests.processes import settings_env
from tools.night_lag import LagSampler, eta_summary

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "night"


def generate(n: int, seed: int, stereo_share: float, bad_share: float) -> list[SimulatedRecording]:
    """A log-normal duration mix (median 3 min, clipped to 2 s - 1 h), 8 kHz, a share of bad inputs."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        duration = min(3600.0, max(2.0, rng.lognormvariate(math.log(180.0), 0.9)))
        fault = rng.choice(("empty", "trunc", "noise")) if rng.random() < bad_share else None
        out.append(SimulatedRecording(i, round(duration, 3), 2 if rng.random() < stereo_share else 1, 8000, fault))
    return out


@dataclass
class Proc:
    name: str
    stage: str
    args: list[str]
    port: int
    popen: subprocess.Popen | None = None
    peak_rss_mb: float = 0.0
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (when, resident MB) of the current process
    busy_s: float = 0.0
    started_at: float = 0.0
    killed: bool = False
    log: Path = field(default_factory=Path)


class Night:
    def __init__(self, settings: Settings, out: Path, opts: argparse.Namespace) -> None:
        self.settings, self.out, self.opts = settings, out, opts
        self.procs: list[Proc] = []
        self.port = 19300 + random.randrange(500)
        self.events: list[dict[str, Any]] = []

    def spawn(self, name: str, stage: str, *args: str) -> Proc:
        self.port += 1
        proc = Proc(name, stage, list(args), self.port, log=self.out / f"{name}.log")
        self._start(proc)
        self.procs.append(proc)
        return proc

    def _start(self, proc: Proc) -> None:
        # workers log at info (their assignments time the rebalances); router and QA at warning, as a
        # per-call info line is a measurable share of the router's time
        level = "info" if proc.stage.startswith("asr-") else "warning"
        level = self.opts.router_log_level if proc.stage == "router" else level
        env = settings_env(self.settings, metrics_port=str(proc.port), log_level=level)
        with open(proc.log, "ab") as log:
            proc.popen = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", *proc.args],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        proc.started_at = time.time()
        proc.rss_mb = []

    def sample(self) -> None:
        """Peak RSS (the kernel's high-water mark) and engine busy seconds of every live process."""
        for p in self.procs:
            if p.popen is None or p.popen.poll() is not None:
                continue
            try:
                for line in Path(f"/proc/{p.popen.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        p.peak_rss_mb = max(p.peak_rss_mb, int(line.split()[1]) / 1024)
                    elif line.startswith("VmRSS:"):
                        p.rss_mb.append((time.time(), int(line.split()[1]) / 1024))
            except OSError:
                pass
            if p.stage.startswith("asr-"):
                p.busy_s = max(p.busy_s, _metric(p.port, "callqa_asr_engine_busy_seconds_total"))

    def kill(self, proc: Proc, restart_after_s: float) -> None:
        assert proc.popen is not None
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        self.events.append({"at": time.time(), "what": f"SIGKILL {proc.name}", "bucket": proc.stage[4:]})
        time.sleep(restart_after_s)
        self._start(proc)  # same static member id, as a restarted pod
        self.events.append({"at": time.time(), "what": f"restart {proc.name}", "bucket": proc.stage[4:]})

    def stop_all(self) -> None:
        for p in self.procs:
            if p.popen is not None and p.popen.poll() is None:
                p.popen.terminate()
        for p in self.procs:
            if p.popen is not None:
                try:
                    p.popen.wait(30)
                except subprocess.TimeoutExpired:
                    p.popen.kill()


@dataclass
class NightRun:
    """One simulated night: what was set up, then what was observed while it ran (for the report)."""

    settings: Settings
    opts: argparse.Namespace
    night: list[SimulatedRecording]
    workers: dict[str, int]  # per bucket, at the start
    routers: RouterPlan  # the plan's routers for the night's burst (opts.routers may override the count)
    audio_by_bucket: dict[str, float]  # audio seconds of the good calls
    engine_opts: SimulatedEngineOptions
    scale: float  # the time scale: device seconds per wall second
    spec: str  # the workers' --engine
    sim: Night
    planned: Plan  # `callqa plan` for the night, batching costs included
    partitions: dict[str, int] = field(default_factory=dict)  # per bucket topic, as the night ran
    reader: TopicReader | None = None
    published_at: float = 0.0
    transcripts: list[Transcript] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)  # records read, per topic
    dead_ids: set[str] = field(default_factory=set)
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (s since published, calls finished)
    lag: LagSampler | None = None  # `callqa lag` sampled over the night
    broker: BrokerRestart | None = None  # the broker restart drill, when the night has one


@dataclass
class BrokerRestart:
    """The broker stopped and started again on its data mid-night (in a thread: the night goes on
    watching), and the first transcript of each bucket after it was back."""

    settings: Settings
    events: list[dict[str, Any]]
    back_at: float | None = None
    first_output_at: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def start(self) -> None:
        self.events.append({"at": time.time(), "what": "broker restart", "bucket": None})
        threading.Thread(target=self._restart, name="broker-restart", daemon=True).start()

    def _restart(self) -> None:
        try:
            stack.restart_kafka(self.settings)
        except Exception as exc:  # noqa: BLE001 - reported in night.json, the night goes on
            self.error = f"{type(exc).__name__}: {exc}"
        self.back_at = time.time()
        self.events.append({"at": self.back_at, "what": "broker back", "bucket": None})

    def saw(self, bucket: str) -> None:
        if self.back_at is not None:
            self.first_output_at.setdefault(bucket, time.time())

    def figures(self) -> dict[str, Any]:
        stopped = next(e["at"] for e in self.events if e["what"] == "broker restart")
        back = self.back_at
        return {
            "down_s": round(back - stopped, 2) if back else None,
            "error": self.error,
            # per bucket with work left: seconds from the broker back to its first transcript
            "outputs_again_s": {b: round(t - back, 2) for b, t in sorted(self.first_output_at.items())} if back else {},
        }


def _metric(port: int, name: str) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:  # noqa: S310 - local
            text = resp.read().decode()
    except OSError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def cost_factors(good: list[SimulatedRecording], buckets: Buckets, opts: SimulatedEngineOptions) -> dict[str, float]:
    """Each bucket's batching cost factor for the night's own calls, by the engine's model."""
    calls: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in good:
        calls[buckets.bucket_for(r.duration_s)].append((r.duration_s, r.channels))
    return {b: batching_factor(c, opts) for b, c in calls.items()}


def night_plan(
    opts: argparse.Namespace, audio_by_bucket: dict[str, float], names: tuple[str, ...], factors: dict[str, float]
) -> Plan:
    """`callqa plan` for the night's audio, mix and batching costs."""
    total_s = sum(audio_by_bucket.values())
    mix = {b: audio_by_bucket.get(b, 0.0) / total_s for b in names} if total_s > 0 else DEFAULT_MIX
    return plan(total_s / 3600 * opts.time_scale_plan, opts.window_h * 3600, opts.rtfx, mix, cost_factors=factors)


def workers_per_bucket(opts: argparse.Namespace, planned: Plan, names: tuple[str, ...]) -> dict[str, int]:
    if opts.workers:
        given = dict(part.split("=") for part in opts.workers.split(","))
        return {b: int(given.get(b, 1)) for b in names}
    return {b.bucket: max(1, b.workers) for b in planned.buckets}


def busiest_bucket(workers: dict[str, int], audio_by_bucket: dict[str, float]) -> str:
    """The bucket with the most audio: the one whose worker is killed and which is scaled out."""
    return max(workers, key=lambda b: audio_by_bucket.get(b, 0.0))


def bucket_partitions(
    opts: argparse.Namespace, catalog: list[TopicSpec], workers: dict[str, int], scaled: str
) -> dict[str, int]:
    """Each bucket topic's partitions for the night: the catalog's, or (``--partitions plan``) as
    ``callqa plan`` sizes them, even over the bucket's workers before and after the scale-out."""
    out = {}
    for t in catalog:
        bucket = t.name.removeprefix("audio.bucket.")
        if bucket == t.name or bucket not in workers:
            continue
        after = (workers[bucket] + opts.scale_out_by,) if bucket == scaled and opts.scale_out_at else ()
        out[t.name] = (
            t.partitions if opts.partitions == "catalog" else max(t.partitions, partitions_for(workers[bucket], *after))
        )
    return out


def router_plan(opts: argparse.Namespace, arrivals_partitions: int) -> tuple[RouterPlan, int]:
    """The plan's routers for the night's burst, and the count to run (--routers overrides it)."""
    planned = plan_routers(opts.calls, opts.route_within_s, arrivals_partitions, opts.router_arrivals_per_s)
    return planned, opts.routers or max(1, planned.routers)


def worker_options(opts: argparse.Namespace) -> list[str]:
    return [] if opts.max_windows is None else ["--max-windows", str(opts.max_windows)]


def ideal_device_s(
    good: list[SimulatedRecording], buckets: Buckets, workers: dict[str, int], opts: SimulatedEngineOptions
) -> float:
    """The busiest bucket's device seconds per worker with its calls in full batches (as workers batch
    them), the least the engine model allows; each call alone would pay the batch-fill floor."""
    calls: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in good:
        calls[buckets.bucket_for(r.duration_s)].append((r.duration_s, r.channels))
    return max((device_time(c, opts).device_s / workers[b] for b, c in calls.items()), default=0.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--rtfx", type=float, default=450.0, help="simulated RTFx per device")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.0,
        help="night seconds per wall second (0: so that the planned night takes --target-wall-s)",
    )
    parser.add_argument("--target-wall-s", type=float, default=120.0)
    parser.add_argument("--window-h", type=float, default=6.0)
    parser.add_argument("--time-scale-plan", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--workers", default="", help="bucket=N,... (default: from callqa plan for the night)")
    parser.add_argument(
        "--partitions",
        choices=("plan", "catalog"),
        default="plan",
        help="bucket topics' partitions: as callqa plan sizes them for the workers (and the scale-out), "
        "or the catalog's",
    )
    parser.add_argument("--routers", type=int, default=0, help="router processes (0: callqa plan's for the burst)")
    parser.add_argument(
        "--route-within-s",
        type=float,
        default=DEFAULT_ROUTE_WITHIN_S,
        help="the plan's target: the burst of arrivals routed within this many seconds",
    )
    parser.add_argument(
        "--router-arrivals-per-s",
        type=float,
        default=ROUTER_ARRIVALS_PER_S,
        help="the plan's arrivals/s per router process (tools/bench_router.py)",
    )
    parser.add_argument(
        "--max-windows",
        type=int,
        default=None,
        help="the workers' --max-windows (default: theirs, whole model batches; 0: audio budget alone)",
    )
    parser.add_argument("--stereo-share", type=float, default=0.8)
    parser.add_argument("--bad-share", type=float, default=0.01)
    parser.add_argument("--kill-at", type=float, default=0.3, help="SIGKILL a worker at this share done (0: never)")
    parser.add_argument("--scale-out-at", type=float, default=0.5, help="add workers at this share done (0: never)")
    parser.add_argument("--scale-out-by", type=int, default=1)
    parser.add_argument(
        "--broker-restart-at", type=float, default=0.0, help="restart the broker at this share done (0: never)"
    )
    parser.add_argument("--timeout-s", type=float, default=1200.0)
    parser.add_argument(
        "--router-log-level", default="warning", help="the routers' log level (info: Faust's rebalances)"
    )
    parser.add_argument(
        "--lag-every-s",
        type=float,
        default=0.0,
        help="wall seconds between `callqa lag` samples (0: 1/30 of the target)",
    )
    return parser.parse_args(argv)


def main() -> None:
    opts = parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="callqa-night-"))
    stack.up(Settings(state_dir=state))
    try:
        result = run(Settings(state_dir=state, **read_env_file(state / "stack.env")), opts)
    finally:
        stack.down(Settings(state_dir=state))
    print(json.dumps({k: v for k, v in result.items() if k not in ("timeline", "workers")}, indent=1))


def run(settings: Settings, opts: argparse.Namespace) -> dict[str, Any]:
    opts.out.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog(settings.bucket_names)
    night = generate(opts.calls, opts.seed, opts.stereo_share, opts.bad_share)
    buckets = Buckets(settings.bucket_edges_s, settings.bucket_names)
    good = [r for r in night if r.fault is None]
    audio_by_bucket: dict[str, float] = defaultdict(float)
    for r in good:
        audio_by_bucket[buckets.bucket_for(r.duration_s)] += r.duration_s
    engine_opts = SimulatedEngineOptions(rtfx=opts.rtfx)
    planned = night_plan(opts, audio_by_bucket, settings.bucket_names, cost_factors(good, buckets, engine_opts))
    workers = workers_per_bucket(opts, planned, settings.bucket_names)
    partitions = bucket_partitions(opts, catalog, workers, busiest_bucket(workers, audio_by_bucket))
    # the deployment's setting, as an operator would set it from `callqa plan`; the stages get it too
    settings = settings.model_copy(update={"topic_partitions": {**settings.topic_partitions, **partitions}})
    catalog = settings_catalog(settings)
    apply_catalog(settings, catalog)
    arrivals_partitions = next(t.partitions for t in catalog if t.name == "audio.arrivals")
    routers, router_count = router_plan(opts, arrivals_partitions)
    ideal_s = max(audio_by_bucket[b] / (workers[b] * opts.rtfx) for b in audio_by_bucket)
    scale = opts.time_scale or max(1.0, ideal_s / opts.target_wall_s)
    spec = f"simulated:rtfx={opts.rtfx},scale={scale}"
    sim = Night(settings, opts.out, opts)
    for i in range(router_count):
        sim.spawn(f"router-{i}", "router", "router", "--simulated-storage")
    sim.spawn("qa-0", "qa", "qa")
    for b in settings.bucket_names:
        for i in range(workers[b]):
            sim.spawn(
                f"worker-{b}-{i}",
                f"asr-{b}",
                "worker",
                "--bucket",
                b,
                "--instance-id",
                f"sim-{b}-{i}",
                "--engine",
                spec,
                "--simulated-storage",
                *worker_options(opts),
            )
    state = NightRun(
        settings, opts, night, workers, routers, audio_by_bucket, engine_opts, scale, spec, sim, planned, partitions
    )
    try:
        return report(_night(state))
    finally:
        sim.stop_all()


def _night(state: NightRun) -> NightRun:
    """Publish the night, watch it to the end (with the kill and the scale-out on the way); the observations."""
    settings, opts, sim, workers, night = state.settings, state.opts, state.sim, state.workers, state.night
    spec, audio_by_bucket = state.spec, state.audio_by_bucket
    state.reader = reader = TopicReader(
        settings,
        ["asr.transcripts", "asr.dlq", "router.dlq", "qa.findings"]
        + [f"audio.bucket.{b}" for b in settings.bucket_names],
    )
    time.sleep(8)  # the stages join their groups

    publisher = ArrivalPublisher(settings)
    published_at = time.time()
    for r in night:
        key = key_for(PREFIX, r)
        publisher.publish(
            ObjectRef(bucket=settings.recordings_bucket, key=key, etag=etag_of(key)),
            {"roles": "left=agent,right=customer" if r.channels == 2 else "left=mixed"},
        )
    publisher.flush(120)
    state.published_at = published_at
    # as an operator's cron: `callqa lag` every few seconds of the compressed night, its rate window
    # the default 300 s of night time
    every_s = opts.lag_every_s or max(3.0, opts.target_wall_s / 30)
    state.lag = lag = LagSampler(settings, published_at, every_s, rate_window_s=max(4.0, 300.0 / state.scale))
    progress_at = published_at
    busiest = busiest_bucket(workers, audio_by_bucket)
    done_ids: set[str] = set()
    dead_ids, timeline, counts, transcripts = state.dead_ids, state.timeline, state.counts, state.transcripts
    killed = scaled = False
    buckets = Buckets(settings.bucket_edges_s, settings.bucket_names)
    deadline = published_at + opts.timeout_s
    while time.time() < deadline:
        for msg in reader.poll(1.0)[sum(counts.values()) :]:
            topic = msg.topic().removeprefix(settings.topic_prefix)
            counts[topic] += 1
            if topic == "asr.transcripts":
                t = decode(msg.value(), Transcript)
                transcripts.append(t)
                done_ids.add(t.call_id)
                if state.broker is not None:
                    state.broker.saw(buckets.bucket_for(t.duration_s))
            elif topic in ("asr.dlq", "router.dlq"):
                dead_ids.add(_letter_call(decode(msg.value(), DeadLetter)))
        finished = len(done_ids | dead_ids)
        timeline.append((time.time() - published_at, finished))
        sim.sample()
        share = finished / len(night)
        lag.tick(share)
        if time.time() - progress_at >= 15:
            progress_at = time.time()
            print(
                f"night: {finished}/{len(night)} finished ({share:.0%}), {counts['asr.transcripts']} transcripts, "
                f"{progress_at - published_at:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        if opts.kill_at and not killed and share >= opts.kill_at:
            killed = True
            victim = next(p for p in sim.procs if p.stage == f"asr-{busiest}")
            victim.killed = True
            sim.kill(victim, restart_after_s=3.0)
        if opts.scale_out_at and not scaled and share >= opts.scale_out_at:
            scaled = True
            for i in range(opts.scale_out_by):
                sim.spawn(
                    f"worker-{busiest}-x{i}",
                    f"asr-{busiest}",
                    "worker",
                    "--bucket",
                    busiest,
                    "--instance-id",
                    f"sim-{busiest}-x{i}",
                    "--engine",
                    spec,
                    "--simulated-storage",
                    *worker_options(opts),
                )
            sim.events.append(
                {"at": time.time(), "what": f"scale out {busiest} +{opts.scale_out_by}", "bucket": busiest}
            )
        if opts.broker_restart_at and state.broker is None and share >= opts.broker_restart_at:
            state.broker = BrokerRestart(settings, sim.events)
            state.broker.start()
        if finished >= len(night) and counts["qa.findings"] >= len(done_ids):
            break
    reader.poll(5.0)  # anything late (a duplicate) still counts
    for msg in reader.messages[sum(counts.values()) :]:
        topic = msg.topic().removeprefix(settings.topic_prefix)
        counts[topic] += 1
        if topic == "asr.transcripts":
            transcripts.append(decode(msg.value(), Transcript))
    sim.sample()
    lag.close()
    sim.stop_all()
    reader.close()
    return state


def rss_growth(procs: list[Proc], published_at: float, makespan_wall: float | None) -> dict[str, dict[str, float]]:
    """Per process, resident memory a quarter into the night and at its end, and the growth between
    (a process that grows with the calls it has handled shows here, not in its peak)."""
    if not makespan_wall:
        return {}
    quarter = published_at + makespan_wall / 4
    out = {}
    for p in procs:
        later = [(t, mb) for t, mb in p.rss_mb if t >= quarter]
        if len(later) > 1:
            out[p.name] = {
                "at_quarter": round(later[0][1], 1),
                "at_end": round(later[-1][1], 1),
                "growth": round(later[-1][1] - later[0][1], 1),
            }
    return out


def _letter_call(letter: DeadLetter) -> str:
    """The call a dead letter stands for: its object key without the extension (a call id)."""
    payload = json.loads(letter.original_payload)
    key = payload.get("object", {}).get("key", letter.original_key or "")
    return key.rsplit(".", 1)[0]


def stamp_breaks(routed: list) -> int:
    """Routed records whose progress stamp does not continue its lane's totals in its partition
    (read in offset order): each lane must count 1, 2, 3... with audio summing, however the lanes
    moved between routers (what `callqa lag`'s audio behind stands on)."""
    last: dict[tuple, Stamp] = {}
    breaks = 0
    for msg in routed:
        stamp = Stamp.from_headers(msg.headers())
        if stamp is None:
            breaks += 1
            continue
        key = (msg.topic(), msg.partition(), stamp.lane)
        before = last.get(key, Stamp(0.0, 0, 0.0, stamp.lane))
        if stamp.cum_calls != before.cum_calls + 1 or abs(stamp.before_audio_s - before.cum_audio_s) > 0.002:
            breaks += 1
        last[key] = stamp
    return breaks


def report(state: NightRun) -> dict[str, Any]:
    """night.json (returned too) and night.html from what the night observed."""
    settings, opts, night, reader, sim = state.settings, state.opts, state.night, state.reader, state.sim
    transcripts, counts, dead_ids, workers = state.transcripts, state.counts, state.dead_ids, state.workers
    published_at, timeline, lag, spec, scale = state.published_at, state.timeline, state.lag, state.spec, state.scale
    audio_by_bucket, engine_opts = state.audio_by_bucket, state.engine_opts
    assert reader is not None, "report() of a night that did not run"
    by_topic: dict[str, list] = defaultdict(list)
    for msg in reader.messages:
        by_topic[msg.topic().removeprefix(settings.topic_prefix)].append(msg)
    routed = [m for t, ms in by_topic.items() if t.startswith("audio.bucket.") for m in ms]
    routed_ids = Counter(decode(m.value(), RoutedCall).call_id for m in routed)
    transcript_ids = Counter(t.call_id for t in transcripts)
    qa_ids = Counter((m.key() or b"").decode() for m in by_topic["qa.findings"])
    expected = {key_for(PREFIX, r).rsplit(".", 1)[0] for r in night}
    lost = expected - set(transcript_ids) - dead_ids
    letter_ids = Counter(
        _letter_call(decode(m.value(), DeadLetter)) for t in ("router.dlq", "asr.dlq") for m in by_topic[t]
    )
    repeats = {  # every output counts: a letter published twice is a duplicate too
        name: sum(c - 1 for c in ids.values())
        for name, ids in (
            ("routed", routed_ids),
            ("transcripts", transcript_ids),
            ("qa_results", qa_ids),
            ("dead_letters", letter_ids),
        )
    }
    duplicates = sum(repeats.values())
    stamps = sorted(m.timestamp()[1] / 1000 for m in routed)
    router_rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 and stamps[-1] > stamps[0] else None
    routed_by_s = stamps[-1] - published_at if stamps else None  # the burst's last call routed
    ends = [m.timestamp()[1] / 1000 for m in by_topic["asr.transcripts"]]
    makespan_wall = (max(ends) - published_at) if ends else None
    good = [r for r in night if r.fault is None]
    longest = max((device_time([(r.duration_s, r.channels)], engine_opts).device_s for r in good), default=0.0)
    buckets = Buckets(settings.bucket_edges_s, settings.bucket_names)
    ideal = ideal_device_s(good, buckets, workers, engine_opts)
    makespan = makespan_wall * scale if makespan_wall else None
    skews = {}
    for b in settings.bucket_names:
        steady = [p.busy_s for p in sim.procs if p.stage == f"asr-{b}" and not p.killed and "-x" not in p.name]
        if len(steady) > 1 and max(steady) > 0:
            skews[b] = round((max(steady) - min(steady)) / (sum(steady) / len(steady)), 4)
    samples = lag.samples if lag else []
    # the ETA given the workers it has: from three samples after the night's last membership change on
    settled = max((e["at"] - published_at for e in sim.events), default=None)
    settle_s = 3 * lag.every_s if lag else 0.0
    eta = (
        eta_summary(samples, makespan_wall, None if settled is None else settled + settle_s) if makespan_wall else None
    )
    rebalance = _rebalance_pauses(sim)
    peak: dict[str, float] = defaultdict(float)
    for p in sim.procs:
        peak[p.stage if not p.stage.startswith("asr-") else "worker"] = max(
            peak[p.stage if not p.stage.startswith("asr-") else "worker"], round(p.peak_rss_mb, 1)
        )
    planned = state.planned
    # the model before batching costs (audio ÷ RTFx), for comparison
    audio_only = plan(
        planned.audio_h,
        planned.window_s,
        planned.rtfx_per_device,
        {b.bucket: b.audio_h / max(planned.audio_h, 1e-9) for b in planned.buckets},
    )
    result = {
        "calls": len(night),
        "routed": len(routed_ids),
        "transcribed": len(transcript_ids),
        "qa_results": len(qa_ids),
        "dead_lettered": len(dead_ids),
        "dead_lettered_by_topic": {"router.dlq": counts["router.dlq"], "asr.dlq": counts["asr.dlq"]},
        "planted_bad_inputs": sum(1 for r in night if r.fault),
        "duplicates": duplicates,
        "duplicates_by_output": repeats,
        "stamp_breaks": stamp_breaks(routed),
        "lost": len(lost),
        "lost_sample": sorted(lost)[:10],
        "router_arrivals_per_s": round(router_rate, 1) if router_rate else None,
        "router_processes": sum(1 for p in sim.procs if p.stage == "router"),
        "routed_by_s": round(routed_by_s, 1) if routed_by_s is not None else None,
        "makespan_s": round(makespan, 1) if makespan else None,
        "makespan_wall_s": round(makespan_wall, 1) if makespan_wall else None,
        "ideal_makespan_s": round(ideal + longest, 1),
        "makespan_ratio": round(makespan / (ideal + longest), 3) if makespan else None,
        "worker_skew": max(skews.values()) if skews else None,
        "worker_skew_by_bucket": skews,
        "eta_error_after_10pct": eta["worst"] if eta else None,
        "eta": eta,
        "lag_samples": [asdict(x) for x in samples],
        "lag_failures": lag.failures[:5] if lag else [],
        "rebalance_max_s": max(rebalance.values()) if rebalance else None,
        "rebalance_s": rebalance,
        "broker_restart": state.broker.figures() if state.broker else None,
        "peak_rss_mb": dict(peak),
        "audio_h": round(sum(audio_by_bucket.values()) / 3600, 2),
        "audio_h_by_bucket": {b: round(v / 3600, 2) for b, v in audio_by_bucket.items()},
        "plan": {
            "workers": {b.bucket: b.workers for b in planned.buckets},
            "busy_s": round(planned.busy_s, 1),
            "busy_s_audio_only": round(audio_only.busy_s, 1),
            "cost_factors": {b.bucket: b.cost_factor for b in planned.buckets},
            "window_s": planned.window_s,
            "routers": state.routers.routers,
            "router_arrivals_per_s_needed": round(state.routers.arrivals_per_s_needed, 1),
            "router_arrivals_per_s_planned": round(
                min(state.routers.routers, state.routers.arrivals_partitions) * state.routers.per_router_arrivals_per_s,
                1,
            ),
            "routed_in_s": round(state.routers.routed_in_s, 1),
            "route_within_s": state.routers.within_s,
            "arrivals_partitions": state.routers.arrivals_partitions,
            "router_warning": state.routers.warning,
        },
        "options": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
            "workers_per_bucket": workers,
            "bucket_partitions": state.partitions,
            "time_scale": round(scale, 3),
            "engine": spec,
        },
        "events": [{**e, "at_s": round(e["at"] - published_at, 2)} for e in sim.events],
        "workers": {
            p.name: {"busy_s": round(p.busy_s, 2), "peak_rss_mb": round(p.peak_rss_mb, 1)}
            for p in sim.procs
            if p.stage.startswith("asr-")
        },
        "rss_growth_mb": rss_growth(sim.procs, published_at, makespan_wall),
        "timeline": timeline,
        "machine": f"{os.cpu_count()} cores, shared with other engineers (wall times are loaded figures)",
    }
    (opts.out / "night.json").write_text(json.dumps(result, indent=1, default=str))
    (opts.out / "night.html").write_text(render(result))
    return result


def _rebalance_pauses(sim: Night) -> dict[str, float]:
    """Per membership change: seconds until the bucket's members last logged an assignment after it,
    before the bucket's next change (a SIGKILL's restart belongs to the kill's recovery): counting
    the rebalance of a scale-out 20 s later into a kill's once made a 7 s recovery read 31 s."""
    pauses = {}
    for n, event in enumerate(sim.events):
        if event["bucket"] is None:  # not a membership change (the broker restart)
            continue
        later = [e["at"] for e in sim.events[n + 1 :] if e["bucket"] == event["bucket"] and "restart" not in e["what"]]
        until = min([event["at"] + 120, *later])
        last = None
        for p in sim.procs:
            if p.stage != f"asr-{event['bucket']}" or not p.log.exists():
                continue
            for line in p.log.read_text(errors="replace").splitlines():
                if "partitions_assigned" not in line:
                    continue
                try:
                    at = _epoch(json.loads(line).get("timestamp"))
                except ValueError:
                    continue
                if at is not None and event["at"] <= at < until:
                    last = max(last or at, at)
        if last is not None:
            pauses[event["what"]] = round(last - event["at"], 2)
    return pauses


def _epoch(stamp: Any) -> float | None:
    from datetime import datetime

    if not isinstance(stamp, str):
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def render(result: dict[str, Any]) -> str:
    from html import escape

    timeline = result["timeline"]
    step = max(1, len(timeline) // 30)
    progress = [(f"{t:.0f}s", n) for t, n in timeline[::step]]
    workers = [(name, w["busy_s"], "#4a7") for name, w in result["workers"].items()]
    rss = [(stage, v, "#47a") for stage, v in result["peak_rss_mb"].items()]
    hidden = ("timeline", "workers", "options", "events", "lag_samples")
    head = {k: v for k, v in result.items() if k not in hidden}
    samples = result["lag_samples"]
    backlog = {
        b: [(x["at_s"], x["backlog_audio_s"][b] / 3600) for x in samples if b in x["backlog_audio_s"]]
        for b in dict.fromkeys(b for x in samples for b in x["backlog_audio_s"])
    }
    finish = result["makespan_wall_s"] or 0.0
    eta = {
        "predicted finish (at + ETA)": [(x["at_s"], x["at_s"] + x["eta_s"]) for x in samples if x["eta_s"] is not None],
        "actual finish": [(x["at_s"], finish) for x in samples],
    }
    rows = "".join(
        f"<tr><th>{escape(k)}</th><td>{escape(json.dumps(v, default=str))}</td></tr>" for k, v in head.items()
    )
    return (
        "<!doctype html><meta charset=utf-8><title>callqa simulated night</title>"
        "<h1>callqa night (SIMULATED storage and engines)</h1>"
        f"<table>{rows}</table>"
        + histogram_svg(progress, "calls finished (transcribed or dead-lettered) over wall time")
        + lines_svg(backlog, "backlog per bucket (callqa lag)", "wall s since the burst", "audio h behind")
        + lines_svg(eta, "callqa lag's ETA against the actual finish", "wall s since the burst", "wall s")
        + hbar_svg(workers, "engine busy seconds per worker (wall)", "s")
        + hbar_svg(rss, "peak RSS per stage", " MB")
        + f"<h2>events</h2><pre>{escape(json.dumps(result['events'], indent=1, default=str))}</pre>"
        + f"<h2>options</h2><pre>{escape(json.dumps(result['options'], indent=1, default=str))}</pre>"
    )


if __name__ == "__main__":
    main()

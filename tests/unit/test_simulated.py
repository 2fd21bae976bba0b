"""The simulated storage and engine (load tests only) against the real probe, fetch, router stage and schema."""

from __future__ import annotations

import jsonschema
import orjson
import pytest

from pipeline.adapters.fetch import Fetcher
from pipeline.catalog import load_schema
from pipeline.events import AudioArrived, ObjectRef, RoutedCall, encode
from pipeline.simulated.device_model import REFERENCE_COMPUTED_PER_AUDIO_S, batching_factor, spread_calls
from pipeline.simulated.engine import SimulatedEngine, SimulatedEngineOptions, device_time
from pipeline.simulated.storage import SimulatedRecording, SimulatedStore, etag_of, key_for, parse_key
from pipeline.stages.asr import AsrInput, AsrStage, Transcribed
from pipeline.stages.probe import HEAD_BYTES, probe_head
from pipeline.stages.router import ArrivalRouter, Dead, Routed
from pipeline.stages.routing import Buckets

BUCKET = "recordings"


def route(key: str):
    stage = ArrivalRouter(
        store=SimulatedStore(),
        buckets=Buckets((30, 120, 600), ("short", "medium", "long", "xlong")),
        partitions_of=lambda b: 6,
        max_duration_s=4 * 3600,
    )
    return stage.route(encode(AudioArrived(object=ObjectRef(bucket=BUCKET, key=key))), None, set())


@pytest.mark.parametrize("duration_s, channels, rate", [(12.345, 2, 8000), (3599.5, 1, 16000), (0.5, 2, 8000)])
def test_the_real_probe_reads_the_synthetic_header(duration_s: float, channels: int, rate: int) -> None:
    rec = SimulatedRecording(7, duration_s, channels, rate)
    key = key_for("night/a", rec)
    assert parse_key(key) == rec
    ref = ObjectRef(bucket=BUCKET, key=key)
    store = SimulatedStore()
    info = probe_head(store.read(ref, 0, HEAD_BYTES), store.stat(ref).size_bytes)
    assert (info.container, info.codec, info.channels, info.sample_rate_hz) == ("WAV", "ULAW", channels, rate)
    assert info.duration_s == pytest.approx(duration_s, abs=1 / rate)


def test_reads_are_ranges_of_one_object() -> None:
    rec = SimulatedRecording(1, 2.0, 2, 8000)
    whole = rec.read(0, None)
    assert len(whole) == rec.size_bytes == 44 + 2 * 8000 * 2
    assert rec.read(10, 100) == whole[10:110] and rec.read(40, 10) == whole[40:50]
    assert rec.read(rec.size_bytes, 5) == b""


def test_the_router_stage_routes_and_the_worker_fetch_decodes_a_simulated_call() -> None:
    key = key_for("night/b", SimulatedRecording(3, 95.0, 2, 8000))
    outcome = route(key)
    assert isinstance(outcome, Routed)
    call = outcome.call
    assert call.bucket == "medium" and call.duration_s == pytest.approx(95.0) and call.object.etag == etag_of(key)
    fetched = Fetcher(SimulatedStore()).fetch([AsrInput.of(None, encode(call), None)])[0]
    assert fetched.audio.samples.shape == (2, 95 * 8000)  # type: ignore[union-attr]


@pytest.mark.parametrize("fault, reason", [("empty", "empty_object"), ("trunc", "truncated"), ("noise", "not_audio")])
def test_planted_bad_inputs_are_dead_lettered_by_the_real_router_stage(fault: str, reason: str) -> None:
    outcome = route(key_for("night/c", SimulatedRecording(4, 40.0, 2, 8000, fault)))
    assert isinstance(outcome, Dead) and outcome.letter.reason == reason


def test_a_key_outside_the_night_is_a_missing_object() -> None:
    outcome = route("night/c/not-a-call.wav")
    assert isinstance(outcome, Dead) and outcome.letter.reason == "missing_object"


def test_full_model_batches_run_at_the_engine_rtfx() -> None:
    opts = SimulatedEngineOptions(rtfx=450.0, max_items=64)
    calls = [(579.0, 2)] * 64  # 64 reference stereo calls whose speech fills 10 windows a channel
    cost = device_time(calls, opts)
    assert cost.windows == 64 * 20 and cost.model_batches == 20
    assert 579 * 64 / cost.device_s == pytest.approx(450.0, rel=0.01)


def test_a_nearly_empty_model_batch_costs_its_floor() -> None:
    opts = SimulatedEngineOptions(rtfx=450.0, max_items=64, min_fill=0.25)
    one = device_time([(20.0, 2)], opts)  # 2 windows, charged as 16
    assert one.windows == 2 and one.model_batches == 1
    assert one.device_s == pytest.approx(device_time([(20.0, 2)] * 8, opts).device_s)
    assert 20.0 / one.device_s < 450.0 / 4


def test_the_engine_sleeps_the_device_time_over_the_time_scale() -> None:
    slept: list[float] = []
    opts = SimulatedEngineOptions.parse("simulated:rtfx=300,scale=60,max_items=32")
    assert (opts.rtfx, opts.time_scale, opts.max_items) == (300.0, 60.0, 32)
    engine = SimulatedEngine(opts, sleep=slept.append)
    key = key_for("night/d", SimulatedRecording(5, 300.0, 2, 8000))
    call = route(key).call  # type: ignore[union-attr]
    audio = Fetcher(SimulatedStore()).fetch([AsrInput.of(None, encode(call), None)])[0].audio  # type: ignore[union-attr]
    engine.transcribe_batch([audio])
    assert slept == [pytest.approx(device_time([(300.0, 2)], opts).device_s / 60)]
    assert engine.last_batch_stats[0].items == device_time([(300.0, 2)], opts).windows


@pytest.mark.parametrize("spec", ["simulated:rtfx=0", "simulated:speed=3", "real:rtfx=4"])
def test_a_bad_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        SimulatedEngineOptions.parse(spec)


def test_transcripts_validate_and_carry_planted_qa_events() -> None:
    engine = SimulatedEngine(SimulatedEngineOptions(time_scale=1e9))
    stage = AsrStage(Fetcher(SimulatedStore()), engine)
    calls: list[RoutedCall] = [
        route(key_for("night/e", SimulatedRecording(i, 45.0 + i, 2, 8000))).call  # type: ignore[union-attr]
        for i in range(40)
    ]
    batch = stage.transcribe(stage.prepare([AsrInput.of(None, encode(c), None) for c in calls]))
    done = [o for o in batch.outcomes if isinstance(o, Transcribed)]
    assert len(done) == 40
    schema = load_schema("transcript")
    for outcome in done:
        jsonschema.validate(orjson.loads(outcome.value), schema)
    texts = [" ".join(s.text for s in o.transcript.segments) for o in done]
    assert any("4111 1111 1111 1111" in t for t in texts), "some customers disclose a card"
    assert all("4111 1111 1111 1111" not in o.value.decode() for o in done), "published transcripts are redacted"
    assert any("guaranteed returns" in t for t in texts) and any("recorded" not in t for t in texts)


def test_the_batching_factor_is_the_window_round_up_of_full_batches() -> None:
    opts = SimulatedEngineOptions(rtfx=450.0)
    # a 100 s stereo call: 45 s of speech a channel fill 1.72 packed windows and compute 2
    calls = [(100.0, 2)] * 64
    assert batching_factor(calls, opts) == pytest.approx(4 * 30.0 / (100.0 * REFERENCE_COMPUTED_PER_AUDIO_S))
    assert batching_factor([(579.0, 2)] * 64, opts) == pytest.approx(1.0, abs=0.002)  # reference calls: none
    assert batching_factor([(20.0, 2)], opts) > batching_factor([(20.0, 2)] * 64, opts)  # the fill floor
    assert batching_factor([], opts) == 1.0
    spread = spread_calls(30.0, 120.0, count=3)
    assert spread == [(45.0, 2), (75.0, 2), (105.0, 2)]

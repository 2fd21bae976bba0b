"""The window estimate a worker sizes its micro-batches by (pure)."""

from __future__ import annotations

import pytest

from pipeline.simulated.device_model import SimulatedEngineOptions, device_time
from pipeline.stages.window_estimate import SpeechShares, estimated_windows, micro_batch_windows, speech_s


def test_a_stereo_call_rounds_each_channel_up_and_a_mono_mix_carries_both_parties() -> None:
    # 100 s stereo: 45 s of speech a channel, 26.1 s fill a window -> 2 a channel
    assert estimated_windows(100.0, 2) == 4
    # 100 s mono: 90 s of speech -> 4 windows
    assert estimated_windows(100.0, 1) == 4
    assert estimated_windows(0.0, 2) == 0
    assert speech_s(100.0, 2) == pytest.approx(90.0)
    assert estimated_windows(100.0, 2, SpeechShares(stereo=0.2)) == 2


def test_a_micro_batch_holds_whole_model_batches_and_at_least_one() -> None:
    # 1,800 s of stereo calls fill about 62 windows
    assert micro_batch_windows(16, 1800.0) == 48
    assert micro_batch_windows(64, 1800.0) == 64
    assert micro_batch_windows(64, 300.0) == 64
    with pytest.raises(ValueError):
        micro_batch_windows(0, 1800.0)


def test_capped_micro_batches_leave_no_part_filled_model_batch_in_the_device_model() -> None:
    opts = SimulatedEngineOptions()
    calls = [(250.0, 2)] * 56  # 10 windows each
    by_audio = [calls[i : i + 7] for i in range(0, len(calls), 7)]  # 1,750 s each: 70 windows
    by_windows = [calls[i : i + 6] for i in range(0, len(calls), 6)]  # 60 windows each
    ideal = device_time(calls, opts).device_s
    assert sum(device_time(b, opts).device_s for b in by_audio) / ideal == pytest.approx(80 / 70, rel=1e-3)
    assert sum(device_time(b, opts).device_s for b in by_windows) / ideal == pytest.approx(1.0, rel=1e-3)


def test_a_workers_cap_comes_from_its_engines_model_batch_unless_given() -> None:
    from pipeline.run.worker import WorkerOptions, micro_batch_cap

    assert micro_batch_cap(WorkerOptions(bucket="long"), 64) == 64
    assert micro_batch_cap(WorkerOptions(bucket="long"), 16) == 48
    assert micro_batch_cap(WorkerOptions(bucket="long"), None) is None  # an engine without model batches
    assert micro_batch_cap(WorkerOptions(bucket="long", max_windows=32), 64) == 32
    assert micro_batch_cap(WorkerOptions(bucket="long", max_windows=0), 64) is None

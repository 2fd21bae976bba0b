"""Small pieces: VAD window merging, log-mel features, text normalisation, devices, memory pool."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.asr.devices import resolve_device
from pipeline.asr.errors import DeviceError
from pipeline.asr.features import HOP, LogMel, mel_filters
from pipeline.asr.text import normalize_en, normalize_zh, to_simplified
from pipeline.asr.vad import VAD_RATE, merge_regions

S = VAD_RATE


def spans(windows):
    return [(w.start / S, w.end / S) for w in windows]


def test_regions_merge_across_short_pauses_only():
    regions = [(0, 2 * S), (int(2.5 * S), 4 * S), (7 * S, 8 * S)]
    assert spans(merge_regions(regions, max_gap_s=1.0, max_window_s=30)) == [(0, 4), (7, 8)]


def test_windows_never_exceed_limit_and_cut_at_pauses():
    # ten 5 s utterances with 0.5 s pauses: merged greedily, each window <= 12 s
    regions = [(int(i * 5.5 * S), int((i * 5.5 + 5) * S)) for i in range(10)]
    windows = merge_regions(regions, max_gap_s=1.0, max_window_s=12)
    assert all(w.duration_s <= 12 for w in windows)
    starts = {r[0] for r in regions}
    assert all(w.start in starts for w in windows)  # every cut falls in a pause
    assert sum(w.speech_s for w in windows) == pytest.approx(50)


def test_region_longer_than_limit_is_split():
    windows = merge_regions([(0, 70 * S)], max_gap_s=1.0, max_window_s=30)
    assert spans(windows) == [(0, 30), (30, 60), (60, 70)]


def test_vad_finds_speech_in_call_time(engine):
    from tests.unit.asr.speech import pad, speak

    audio = pad(speak("Hello there, this is a test.", S), S, 3.0, 2.0)
    windows = engine.vad.windows(audio)
    assert len(windows) == 1 and abs(windows[0].start_s - 3.0) < 0.4
    assert engine.vad.windows(np.zeros(5 * S, np.float32)) == []


def test_mel_filters_cover_the_spectrum():
    filters = mel_filters(80)
    assert filters.shape == (80, 201) and (filters >= 0).all() and (filters.sum(axis=1) > 0).all()


def test_log_mel_rows_are_independent():
    mel = LogMel(80, torch.device("cpu"))
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.standard_normal(1000 * HOP).astype(np.float32)) * 0.1
    b = torch.zeros(1000 * HOP)
    both = mel(torch.stack([a, b]), 1000)
    alone = mel(a[None], 1000)
    assert both.shape == (2, 80, 1000)
    torch.testing.assert_close(both[:1], alone)


def test_text_normalisation():
    assert to_simplified("這裡是客戶服務中心") == "这里是客户服务中心"
    assert normalize_zh("您好，這裡是 客戶服務中心！") == "您好这里是客户服务中心"
    assert normalize_en("Hello, World! It's a well-known fact.") == "hello world it's a well known fact"


def test_device_interface_resolves_cpu_and_refuses_unknown():
    cpu = resolve_device("cpu")
    assert cpu.kind == "cpu" and cpu.inference_dtype("auto") == torch.float32
    assert cpu.memory_bytes()["allocated"] > 0
    with pytest.raises(DeviceError):
        resolve_device("tpu")


def test_memory_pool_is_allocated_once_and_flat(engine, en_calls):
    before = [t.data_ptr() for t in (engine.pool._audio, engine.pool._self, engine.pool._cross)]
    engine.transcribe_batch(en_calls[:2])
    after = [t.data_ptr() for t in (engine.pool._audio, engine.pool._self, engine.pool._cross)]
    assert before == after and engine.pool.nbytes > 0
    cache = engine.pool.kv_cache(engine.buckets_s[0], 2)
    assert cache.cross_kv.data_ptr() == engine.pool._cross.data_ptr()

"""Small pieces: VAD regions, log-mel features, text normalisation, devices, memory pool."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.asr.devices import resolve_device
from pipeline.asr.errors import DeviceError
from pipeline.asr.features import HOP, LogMel, mel_filters
from pipeline.asr.text import normalize_en, normalize_zh, to_simplified
from pipeline.asr.vad import VAD_RATE

S = VAD_RATE


def test_vad_finds_speech_in_call_time(engine):
    from tests.unit.asr.speech import pad, speak

    audio = pad(speak("Hello there, this is a test.", S), S, 3.0, 2.0)
    found = engine.vad.regions(audio)
    assert abs(found[0][0] / S - 3.0) < 0.4 and found[-1][1] / S < audio.size / S - 1.5
    assert engine.vad.regions(np.zeros(5 * S, np.float32)) == []
    both = engine.vad.channel_regions(np.stack([audio, np.zeros_like(audio)]))
    assert both == [engine.vad.regions(audio), []]


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
    assert cpu.inference_dtype("float32") == torch.float32 and not cpu.wants_int8("none")
    assert cpu.memory_bytes()["allocated"] > 0
    with pytest.raises(DeviceError):
        resolve_device("tpu")


@pytest.mark.parametrize(("avx512_bf16", "amx", "narrowed"), [(False, False, False), (True, False, True), (False, True, True)])
def test_the_cross_attention_cache_is_bf16_only_on_a_cpu_with_bf16_instructions(monkeypatch, avx512_bf16, amx, narrowed):
    # plain AVX-512 (oneDNN "supports" bf16 there by conversion) decoded 1.2x slower with a bf16 cache
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    cpu = resolve_device("cpu")
    assert cpu.cross_kv_dtype(torch.float32, "auto") == (torch.bfloat16 if narrowed else torch.float32)
    assert cpu.cross_kv_dtype(torch.float32, "bfloat16") == torch.bfloat16  # asked for: always
    assert cpu.encoder_dtype(torch.float32, "auto") == (torch.bfloat16 if amx else torch.float32)


def test_memory_pool_is_allocated_once_and_flat(engine, en_calls):
    before = [t.data_ptr() for t in (engine.pool._audio, engine.pool._self, engine.pool._cross)]
    engine.transcribe_batch(en_calls[:2])
    after = [t.data_ptr() for t in (engine.pool._audio, engine.pool._self, engine.pool._cross)]
    assert before == after and engine.pool.nbytes > 0
    cache = engine.pool.kv_cache(engine.buckets_s[0], 2)
    assert cache.cross_kv.data_ptr() == engine.pool._cross.data_ptr()


@pytest.mark.parametrize("kind", [torch.bfloat16, "int8"])
def test_a_narrowed_vocabulary_projection_keeps_the_exact_logits_of_its_likeliest_tokens_and_timestamps(engine, kind):
    from pipeline.asr.model import TiedOutput

    output = TiedOutput(engine.model.decoder.token_embedding)
    weight = engine.model.decoder.token_embedding.weight
    tb = engine.tokenizer.special.timestamp_begin
    hidden = torch.randn(16, weight.shape[1], generator=torch.Generator().manual_seed(3)) * 2.0
    exact = output(hidden)
    output.narrow(kind, 32, exact_from=tb)
    narrowed = output(hidden)
    assert torch.equal(narrowed.argmax(dim=-1), exact.argmax(dim=-1))
    top = exact.topk(8, dim=-1).indices  # the candidates greedy decoding chooses between
    assert torch.allclose(narrowed.gather(1, top), exact.gather(1, top), atol=1e-4)
    assert torch.allclose(narrowed[:, tb:], exact[:, tb:], atol=1e-4)  # the timestamp rule's sum
    rest = (narrowed - exact).abs().max()
    assert 0 < rest < 0.5  # the rest is approximate, and only feeds the softmax's sum
    output.narrow(weight.dtype, 0)
    assert torch.equal(output(hidden), exact)

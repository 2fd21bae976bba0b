"""Model files: checksum pinning, CTranslate2 parsing and a complete conversion."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.asr import ChecksumError, Engine, WeightsError
from pipeline.asr.convert import ct2_to_state_dict, load_converted, name_map
from pipeline.asr.model import Whisper
from pipeline.asr.registry import ModelEntry, lookup, register
from pipeline.asr.weights import join_parts, local_model_dir, package_data_dir, read_ct2, verify_file

PINNED = lookup("whisper-base").sha256


@pytest.fixture(scope="module")
def parts() -> list[Path]:
    pkgs = lookup("whisper-base").part_packages
    return [package_data_dir(p) / f"model.bin.part{i + 1}" for i, p in enumerate(pkgs)]


@pytest.fixture(scope="module")
def ct2(engine):  # the engine fixture guarantees the cache holds the joined model
    return read_ct2(Path(engine.opts.cache_dir).expanduser() / "whisper-base" / PINNED[:16] / "model.bin")


def test_tampered_part_fails_checksum_and_leaves_nothing(tmp_path, parts):
    bad = tmp_path / "model.bin.part2"
    shutil.copyfile(parts[1], bad)
    with open(bad, "r+b") as fh:
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    dest = tmp_path / "out" / "model.bin"
    with pytest.raises(ChecksumError, match="tampered"):
        join_parts([parts[0], bad], dest, PINNED)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_tampered_model_directory_fails_engine_load(tmp_path, engine):
    source = Path(engine.opts.cache_dir).expanduser() / "whisper-base" / PINNED[:16]
    model_dir = tmp_path / "my-whisper"
    model_dir.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(source / name, model_dir / name)
    with open(source / "model.bin", "rb") as src, open(model_dir / "model.bin", "wb") as dst:
        dst.write(src.read()[:-1] + b"\x01")
    with pytest.raises(ChecksumError, match=PINNED):
        Engine.load(replace(engine.opts, model=str(model_dir), model_sha256=PINNED))
    with pytest.raises(ChecksumError):
        verify_file(model_dir / "model.bin", PINNED)


def test_every_ct2_variable_is_used_and_every_parameter_filled(ct2):
    dims, state = ct2_to_state_dict(ct2)
    assert (dims.n_encoder_layers, dims.n_decoder_layers, dims.d_model, dims.n_heads) == (6, 6, 512, 8)
    assert set(state) == set(Whisper(dims).state_dict())
    mapped = set(name_map(dims).values())
    flags = {n for n in ct2.variables if ct2.variables[n].ndim == 0 or "alignment" in n}
    assert set(ct2.variables) == mapped | flags
    q, k, v = np.split(ct2.get("encoder/layer_0/self_attention/linear_0/bias"), 3)
    assert not k.any() and q.any() and v.any()  # fused Q,K,V with a zero key bias


def test_conversion_rejects_unknown_or_missing_variables(ct2):
    extra = replace(ct2, variables={**ct2.variables, "decoder/mystery/weight": np.zeros(3, np.float16)})
    with pytest.raises(WeightsError, match="not used"):
        ct2_to_state_dict(extra)
    missing = dict(ct2.variables)
    del missing["decoder/layer_5/ffn/linear_1/bias"]
    with pytest.raises(WeightsError, match="no variable"):
        ct2_to_state_dict(replace(ct2, variables=missing))


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(WeightsError, match="unknown model"):
        lookup("whisper-galactic")


def test_operator_checkpoint_by_directory_or_registry_entry(engine, en_calls, en_batched):
    model_dir = Path(engine.opts.cache_dir).expanduser() / "whisper-base" / PINNED[:16]
    register(ModelEntry(name="site-whisper", version="site/7", loader="ct2-whisper", sha256=PINNED, directory=model_dir))
    plugged = Engine.load(replace(engine.opts, model="site-whisper"))
    result = plugged.transcribe(en_calls[0])
    assert result.model_name == "site-whisper" and result.model_version.startswith("site/7@d01c3014")
    assert result.text == en_batched[0].text
    assert lookup(str(model_dir)).directory == model_dir  # a bare directory works too


def test_converted_cache_is_float32_and_never_reused_once_edited(tmp_path, engine, ct2):
    source = Path(engine.opts.cache_dir).expanduser() / "whisper-base" / PINNED[:16]
    for name in ("config.json", "tokenizer.json", "model.bin"):
        shutil.copyfile(source / name, tmp_path / name)
    files = local_model_dir(tmp_path, PINNED)
    _, expected = ct2_to_state_dict(ct2)
    _, converted = load_converted(files)  # converts and writes the cache
    _, mapped = load_converted(files)  # maps the cache
    name = "decoder.token_embedding.weight"
    assert all(v.dtype == torch.float32 for v in mapped.values())
    assert torch.equal(mapped[name], expected[name].float()) and torch.equal(converted[name], mapped[name])
    cache = next(p for p in tmp_path.iterdir() if p.suffix == ".pt")
    with open(cache, "r+b") as fh:  # an edited cache is converted again, not loaded
        fh.seek(cache.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(cache.stat().st_size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    _, again = load_converted(files)
    assert all(torch.equal(again[k], expected[k].float()) for k in expected)

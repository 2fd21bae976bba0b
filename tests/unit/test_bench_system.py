"""The engine ablations of tools/bench_system.py change only what they name in the shipped options."""

from __future__ import annotations

from dataclasses import fields, replace

from pipeline.asr.engine import EngineOptions
from pipeline.asr.presets import shipped
from pipeline.asr.vad import VadOptions
from pipeline.config import Settings
from tools.bench_system import CONFIGS, changed


def test_a_vad_ablation_keeps_the_shipped_vad_options_it_does_not_name() -> None:
    opts = replace(EngineOptions(device="cpu"), vad=VadOptions(threshold=0.6, min_silence_ms=300))
    vad = changed(opts, CONFIGS["callqa-onset60"]).vad
    assert vad == VadOptions(threshold=0.6, min_silence_ms=300, onset_pad_ms=60)


def test_every_ablation_applies_to_the_shipped_engine_and_changes_only_what_it_names() -> None:
    opts = shipped(Settings(), "cpu")
    for name, changes in CONFIGS.items():
        other = changed(opts, changes)  # an unknown field raises
        assert {f.name for f in fields(other) if getattr(other, f.name) != getattr(opts, f.name)} <= set(changes), name

"""The engine presets: the shipped engine is the settings' (number pass included), the device's
batch budget; the tests' engine differs from it only where its docstring says so."""

from __future__ import annotations

from dataclasses import fields

from pipeline.asr.presets import for_tests, shipped
from pipeline.config import Settings


def test_the_shipped_engine_is_the_settings_with_the_number_pass_and_the_cpu_budget() -> None:
    cfg = Settings(asr_language="en", asr_threads=3, asr_number_languages=("en",), asr_word_timestamps="all")
    options = shipped(cfg, "cpu", initial_prompt="Platinum Plus", agent_phrases=("my name is",))
    assert (options.model, options.device, options.language, options.threads) == (cfg.asr_model, "cpu", "en", 3)
    assert options.cache_dir == cfg.cache_dir / "models"
    assert (options.max_batch_items, options.max_batch_audio_s) == (16, 480.0)
    assert options.number_languages == ("en",) and options.word_timestamps == "all"
    assert (options.initial_prompt, options.agent_phrases) == ("Platinum Plus", ("my name is",))
    assert shipped(Settings(), "cpu").number_languages == Settings().asr_number_languages != ()
    assert shipped(Settings(), "cpu", number_languages=()).number_languages == ()  # first pass only


def test_the_tests_engine_differs_from_the_shipped_one_only_where_it_says() -> None:
    ours, theirs = for_tests(), shipped(Settings(), "cpu")
    differ = {f.name for f in fields(ours) if getattr(ours, f.name) != getattr(theirs, f.name)}
    # smaller batch, no number pass (no prompt and no agent phrases: shipped() got none here), and
    # the default model cache rather than the settings' (the same folder unless CALLQA_CACHE_DIR moves it)
    assert differ <= {"max_batch_items", "max_batch_audio_s", "number_languages", "cache_dir"}
    assert {"max_batch_items", "max_batch_audio_s", "number_languages"} <= differ
    assert for_tests(max_batch_items=2).max_batch_items == 2

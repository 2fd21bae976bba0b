"""The engine configurations the project builds, in one place: the shipped engine (``callqa run``,
``callqa worker`` and the tools that measure what they run) and the lighter one the tests share.

The rule packs feed the shipped engine (its initial prompt, the agent's phrases on mono calls), but
the engine does not read packs (:mod:`pipeline.asr` imports nothing from :mod:`pipeline.qa`): the
caller passes what it drew from them; :func:`pipeline.run.shipped_engine.load_engine` does that for
the CLI and the tools. ``EngineOptions`` is imported inside the functions, so importing this module
loads no torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.asr.engine import EngineOptions
    from pipeline.config import Settings

# The model-batch budget, in 30 s windows: on CPU bigger batches buy nothing; an accelerator
# wants many windows per forward pass
CPU_WINDOWS = 16
ACCELERATOR_WINDOWS = 64
WINDOW_S = 30.0


def batch_budget(device: str = "auto") -> dict[str, Any]:
    """``max_batch_items`` / ``max_batch_audio_s`` for the device (16 windows, 480 padded seconds,
    on CPU; 64 on an accelerator)."""
    from pipeline.asr.devices import resolve_device

    windows = CPU_WINDOWS if resolve_device(device).kind == "cpu" else ACCELERATOR_WINDOWS
    return {"max_batch_items": windows, "max_batch_audio_s": WINDOW_S * windows}


def shipped(
    cfg: Settings,
    device: str = "auto",
    *,
    initial_prompt: str | None = None,
    agent_phrases: tuple[str, ...] = (),
    number_languages: tuple[str, ...] | None = None,
) -> EngineOptions:
    """The engine ``callqa run`` and ``callqa worker`` build: the settings' model, language,
    threads, number pass (``number_languages``, default the settings' ``asr_number_languages``;
    ``()``: first pass only) and word times, the device's batch budget, and what the caller drew
    from the rule packs (the decoder's prompt, the agent's phrases for mono calls)."""
    from pipeline.asr.engine import EngineOptions

    return EngineOptions(
        model=cfg.asr_model,
        cache_dir=cfg.cache_dir / "models",
        device=device,
        language=cfg.asr_language,
        threads=cfg.asr_threads,
        **batch_budget(device),
        initial_prompt=initial_prompt,
        agent_phrases=agent_phrases,
        number_languages=cfg.asr_number_languages if number_languages is None else number_languages,
        word_timestamps=cfg.asr_word_timestamps,
    )


def for_tests(**changes: Any) -> EngineOptions:
    """The engine the tests share (tests/conftest.py), with ``changes``. Deliberately lighter than
    :func:`shipped`, for speed on a CPU shared by many tests: a smaller batch (8 windows, 120 s),
    no number pass (a second decode of every number region), no rule-pack prompt and no agent
    phrases (so mono calls stay ``mixed``); the model cache is the default one. Tests of the number
    pass or of separation turn those on over the shared engine's model (tests/unit/asr)."""
    from pipeline.asr.engine import EngineOptions

    return replace(EngineOptions(device="cpu", max_batch_items=8, max_batch_audio_s=120.0), **changes)

"""Session fixtures for the ASR tests: one speech corpus (the engine is tests/conftest.py's)."""

from __future__ import annotations

import pytest

from pipeline.asr import BatchStats, CallAudio, CallTranscript, Engine
from pipeline.asr.presets import for_tests
from tests.unit.asr.speech import Clip, english_clips, mandarin_clips, pad

ENGINE_OPTIONS = for_tests()  # the shared engine's (tests/conftest.py)


def as_call(call_id: str, clip: Clip) -> CallAudio:
    samples = pad(clip.samples, clip.sample_rate, 0.5, 0.5)
    return CallAudio(call_id, samples[None, :].copy(), clip.sample_rate, ("mixed",))


@pytest.fixture(scope="session")
def en_clips() -> list[Clip]:
    return english_clips()


@pytest.fixture(scope="session")
def zh_clips() -> list[Clip]:
    return mandarin_clips()


@pytest.fixture(scope="session")
def en_calls(en_clips: list[Clip]) -> list[CallAudio]:
    return [as_call(f"en{i}", c) for i, c in enumerate(en_clips)]


@pytest.fixture(scope="session")
def zh_calls(zh_clips: list[Clip]) -> list[CallAudio]:
    return [as_call(f"zh{i}", c) for i, c in enumerate(zh_clips)]


@pytest.fixture(scope="session")
def en_batched(engine: Engine, en_calls: list[CallAudio]) -> list[CallTranscript]:
    return engine.transcribe_batch(en_calls)


@pytest.fixture(scope="session")
def zh_run(engine: Engine, zh_calls: list[CallAudio]) -> tuple[list[CallTranscript], list[BatchStats]]:
    """The Mandarin set transcribed in one call, with that call's batch statistics."""
    results = engine.transcribe_batch(zh_calls)
    return results, list(engine.last_batch_stats)


@pytest.fixture(scope="session")
def zh_batched(zh_run) -> list[CallTranscript]:
    return zh_run[0]

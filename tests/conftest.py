"""Shared test harness.

Integration tests get a real Kafka broker and MinIO server, started once per test
session in a temporary state directory and stopped at the end. There is no skip:
if the stack cannot start, every integration test fails with the reason.

Markers are applied here: ``integration`` (tests/integration), ``model`` (any test using
the real ``engine``, loaded once per session), ``browser`` (headless chromium), and
``unit`` for every other test (fast: ``bash tools/test.sh -m unit``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import stack
from pipeline.config import Settings, read_env_file


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if any(item.get_closest_marker(m) for m in ("model", "browser", "integration")):
            continue  # marked by hand (e.g. a test that runs the CLI, which loads the engine itself)
        if "integration" in path.parts:
            item.add_marker(pytest.mark.integration)
        elif "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
        elif path.name.endswith("_browser.py"):
            item.add_marker(pytest.mark.browser)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def engine() -> Any:
    """The real Whisper engine on CPU, loaded once for every test that needs it: the tests' preset
    (:func:`pipeline.asr.presets.for_tests`), lighter than the shipped engine on purpose (no
    number pass, no rule-pack prompt, a smaller batch; its docstring says why)."""
    from pipeline.asr import Engine
    from pipeline.asr.presets import for_tests

    return Engine.load(for_tests())


@pytest.fixture(scope="session")
def stack_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings pointing at a fresh local stack for this test session."""
    state_dir = tmp_path_factory.mktemp("stack")
    base = Settings(state_dir=state_dir)
    stack.up(base)
    try:
        conn = read_env_file(state_dir / "stack.env")
        yield Settings(state_dir=state_dir, **conn)
    finally:
        stack.down(base)


@pytest.fixture
def unique() -> str:
    """A short unique name part, so tests sharing the session's stack never see each other's data."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def isolated_settings(stack_settings: Settings, unique: str) -> Settings:
    """The session's stack with a private topic prefix and recordings bucket."""
    return stack_settings.model_copy(update={"topic_prefix": f"t{unique}.", "recordings_bucket": f"rec-{unique}"})


FIXTURES = Path(__file__).parent / "fixtures"

"""Shared test harness.

Integration tests get a real Kafka broker and MinIO server, started once per test
session in a temporary state directory and stopped at the end. There is no skip:
if the stack cannot start, every integration test fails with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import stack
from pipeline.config import Settings, read_env_file


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

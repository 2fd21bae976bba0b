"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.fakes import fake_worker

if TYPE_CHECKING:  # importing the worker costs a second
    from pipeline.run.worker import AsrWorker


@pytest.fixture
def worker() -> Iterator[AsrWorker]:
    """An ASR worker on fake Kafka clients, fetcher and engine (tests.fakes)."""
    yield from fake_worker()

"""A Faust stage's commit waits for the outputs in flight (GatedConsumer): no broker needed.

Under SIGKILL the redaction stage once published an event twice: a commit took its offsets while
the agent's send was in flight, committed the transaction holding the output without its input,
and the input was read again. The commit now takes the same gate the agents send under.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pipeline.adapters.faust_app import GatedConsumer, create_faust_app
from pipeline.config import Settings


def test_every_stage_app_commits_through_the_gated_consumer(tmp_path: Path) -> None:
    app = create_faust_app(Settings(state_dir=tmp_path), "gate-test")
    assert isinstance(app.consumer, GatedConsumer)


def test_a_commit_waits_while_outputs_are_in_flight_and_runs_once_they_are_acknowledged(tmp_path: Path) -> None:
    app = create_faust_app(Settings(state_dir=tmp_path), "gate-test-2")
    consumer = app.consumer
    assert isinstance(consumer, GatedConsumer)

    async def scenario() -> list[str]:
        order: list[str] = []
        async with consumer.commit_gate:  # an agent sending a batch
            commit = asyncio.ensure_future(consumer.force_commit())
            await asyncio.sleep(0.05)
            order.append("commit done" if commit.done() else "commit waiting")
            order.append("inputs acknowledged")
        await asyncio.wait_for(commit, timeout=5)
        order.append("commit done")
        return order

    assert asyncio.run(scenario()) == ["commit waiting", "inputs acknowledged", "commit done"]

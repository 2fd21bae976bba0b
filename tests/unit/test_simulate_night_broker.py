"""The simulated night's broker restart figures (tools/simulate_night.py)."""

from __future__ import annotations

from pipeline.config import Settings
from tools.simulate_night import BrokerRestart


def test_outputs_count_from_the_broker_back_and_only_the_first_per_bucket() -> None:
    events = [{"at": 100.0, "what": "broker restart", "bucket": None}]
    drill = BrokerRestart(Settings(), events)
    drill.saw("long")  # still down: a transcript read from before the stop does not count
    assert drill.first_output_at == {}
    drill.back_at = 112.5
    drill.first_output_at = {"long": 115.0, "xlong": 121.25}
    drill.saw("long")  # a later one: the first stays
    assert drill.figures() == {"down_s": 12.5, "error": None, "outputs_again_s": {"long": 2.5, "xlong": 8.75}}


def test_a_broker_that_never_came_back_says_so() -> None:
    drill = BrokerRestart(Settings(), [{"at": 100.0, "what": "broker restart", "bucket": None}])
    drill.error = "StackError: broker did not start"
    assert drill.figures() == {"down_s": None, "error": "StackError: broker did not start", "outputs_again_s": {}}

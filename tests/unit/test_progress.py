"""The embedded run's progress bar counts exactly what its total counts (no overshoot, no negative ETA)."""

from __future__ import annotations

import io
import random
import warnings

from tqdm import tqdm

from pipeline.events import RoutedCall
from pipeline.run.progress_bar import audio_ms
from tests.fakes import routed


def call(i: int, duration_s: float) -> RoutedCall:
    return routed(f"c{i}", duration_s)


def test_batches_in_any_order_add_up_to_the_total_exactly() -> None:
    rng = random.Random(7)
    calls = [call(i, rng.lognormvariate(4, 1.2)) for i in range(500)]
    batches = [calls[i : i + 7] for i in range(0, len(calls), 7)]
    rng.shuffle(batches)  # the runner finishes buckets longest-first, not in input order
    assert sum(sum(c.duration_s for c in b) for b in batches) != sum(c.duration_s for c in calls)  # floats drift
    bar = tqdm(total=audio_ms(calls), unit_scale=1 / 1000, file=io.StringIO(), mininterval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm warns "clamping frac" when n passes the total
        for batch in batches:
            bar.update(audio_ms(batch))
        assert bar.n == bar.total
        bar.close()


def test_the_bar_moves_while_a_long_batch_is_in_the_engine() -> None:
    """One batch can be minutes of engine time: the heartbeat redraws the elapsed time meanwhile."""
    import time

    from pipeline.run.progress_bar import AudioProgress

    out = io.StringIO()
    progress = AudioProgress([call(0, 700.0), call(1, 13.0)], file=out, heartbeat_s=0.05)
    try:
        drawn = out.getvalue().count("\r")
        deadline = time.monotonic() + 10
        while out.getvalue().count("\r") < drawn + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.getvalue().count("\r") >= drawn + 3  # redrawn with no batch finished
        assert "0/713 audio-s" in out.getvalue() and "calls done 0/2" in out.getvalue()
        progress.done([call(1, 13.0)])
        assert "calls done 1/2" in out.getvalue()
    finally:
        progress.close()
    assert "713/713" not in out.getvalue() and not progress._beat.is_alive()

from pipeline.qa import metrics

from .helpers import call, seg


def test_silence_only_between_speech():
    c = call(seg("agent", 5, 10, "a"), seg("customer", 12, 20, "b"), seg("agent", 40, 45, "c"), duration_s=90)
    assert metrics.silences(c, min_s=15) == [(20, 40)]
    assert metrics.silences(c) == [(10, 12), (20, 40)]


def test_talk_over_needs_stereo():
    segments = (seg("agent", 0, 10, "a"), seg("customer", 6, 12, "b"), seg("customer", 20, 21, "c"))
    assert metrics.overlaps(call(*segments), min_s=3) == [(6, 10)]
    mono = call(*(seg("mixed", s.start_s, s.end_s, s.text, channel=0) for s in segments), channels=1)
    assert metrics.overlaps(mono) == []


def test_speech_rate_units():
    c = call(seg("agent", 0, 30, "您好" * 50), seg("agent", 30, 60, "hello there " * 50), lang=None)
    rates = metrics.speech_rates(c, c.segments)
    assert rates["zh"].per_min == 200
    assert rates["en"].per_min == 200


def test_talk_ratio():
    c = call(seg("agent", 0, 30, "a"), seg("customer", 30, 40, "b"))
    ratio, total = metrics.talk_ratio(c)
    assert (round(ratio, 2), total) == (0.75, 40)
    assert metrics.talk_ratio(call(seg("mixed", 0, 10, "x"), channels=1)) is None

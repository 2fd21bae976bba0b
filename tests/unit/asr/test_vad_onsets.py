"""Speech kept before each VAD region: earlier starts, never before the audio nor into the previous region."""

from pipeline.asr.vad import VadOptions, onsets_widened


def test_each_region_starts_earlier_by_the_extra_onset() -> None:
    assert onsets_widened([(5_000, 9_000), (20_000, 30_000)], 1_000) == [(4_000, 9_000), (19_000, 30_000)]


def test_a_widened_start_stops_at_the_audio_start_and_at_the_previous_region_end() -> None:
    assert onsets_widened([(300, 9_000), (9_500, 12_000)], 1_000) == [(0, 9_000), (9_000, 12_000)]


def test_no_extra_leaves_the_regions_as_they_are() -> None:
    regions = [(100, 200), (300, 400)]
    assert onsets_widened(regions, 0) == regions and onsets_widened(regions, -50) == regions


def test_the_default_keeps_more_speech_before_a_region_than_after_it() -> None:
    opts = VadOptions()
    assert opts.onset_pad_ms > opts.speech_pad_ms

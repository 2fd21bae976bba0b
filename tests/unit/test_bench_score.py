"""The benchmark's speech-coverage figure and its English scoring normalisation."""

import math

import pytest

from tools.bench_score import Coverage, error_rate, lost_turns, score_text_en, score_text_zh, speech_coverage


def test_coverage_is_the_share_of_reference_time_inside_output_segments():
    cov = speech_coverage([(0.0, 2.0), (5.0, 7.0)], [(1.0, 3.0), (5.5, 6.0)])
    assert cov.speech_s == pytest.approx(4.0)
    assert cov.covered_s == pytest.approx(1.5)
    assert cov.share == pytest.approx(0.375)
    assert (cov.turns, cov.empty_turns) == (2, 0)


def test_overlapping_output_segments_are_not_counted_twice():
    cov = speech_coverage([(0.0, 4.0)], [(0.0, 3.0), (1.0, 3.5), (2.0, 2.5)])
    assert cov.covered_s == pytest.approx(3.5)


def test_a_turn_no_segment_overlaps_is_empty_even_when_a_segment_touches_it():
    cov = speech_coverage([(0.0, 1.0), (2.0, 3.0), (4.0, 5.0)], [(0.5, 2.0), (5.0, 6.0)])
    assert (cov.turns, cov.empty_turns) == (3, 2)
    assert cov.share == pytest.approx(0.5 / 3)


def test_no_output_covers_nothing_and_no_reference_has_no_share():
    assert speech_coverage([(0.0, 1.0)], []).share == 0.0
    assert speech_coverage([(0.0, 1.0)], []).empty_turns == 1
    assert math.isnan(speech_coverage([], [(0.0, 1.0)]).share)


def test_coverage_pools_by_time_not_by_turn():
    pooled = speech_coverage([(0.0, 9.0)], [(0.0, 9.0)]) + speech_coverage([(0.0, 1.0)], [])
    assert pooled == Coverage(speech_s=10.0, covered_s=9.0, turns=2, empty_turns=1)
    assert pooled.share == pytest.approx(0.9)


def test_digits_read_one_token_however_they_are_written():
    assert score_text_en("Reference 7 4 2 9, right?") == "reference 7429 right"
    assert score_text_en("reference seven four two nine right") == "reference 7429 right"
    assert score_text_en("Reference 7429. Right.") == "reference 7429 right"


def test_a_mandarin_number_scores_the_same_in_numerals_or_digits_and_a_wrong_one_is_one_error():
    assert score_text_zh("这个月的账单金额是一百二十八元。") == score_text_zh("这个月的账单金额是128元")
    assert score_text_zh("我想查询一下") == "我想查询一下"  # 一 in a word stays
    ref = "手机号是一三九零零二一四五六七"
    assert error_rate("zh", [ref], ["手机号是13900214567"]) == 0.0
    assert error_rate("zh", [ref], ["手机号是13900214568"]) == pytest.approx(1 / len(score_text_zh(ref)))


def test_error_rates_pool_channels_and_skip_empty_references():
    assert error_rate("en", ["a b c d", ""], ["a b c x", "noise"]) == pytest.approx(0.25)
    assert error_rate("zh", ["你好", "再见"], ["你好", ""]) == pytest.approx(0.5)
    assert math.isnan(error_rate("en", [""], ["x"]))


def test_a_turn_whose_time_is_spanned_by_other_turns_words_is_lost():
    turns = [((0.0, 3.0), "Great, that sorts it out, goodbye."), ((4.0, 7.0), "I am free after two on weekdays.")]
    # the second turn's words written from time 0 over both: the first turn is covered yet lost
    ran_ahead = [((0.0, 7.0), "I am free after 2 on weekdays.")]
    assert lost_turns("en", turns, ran_ahead) == 1
    # a turn read badly is read: one word in five is enough; no output at all is lost too
    badly = [((0.0, 3.0), "straight and I thought it out, done by."), ((4.0, 7.0), "I am three after two on weekends.")]
    assert lost_turns("en", turns, badly) == 0
    assert lost_turns("en", turns, []) == 2
    # Mandarin by characters, numbers as one character either way
    zh = [((0.0, 3.0), "您的套餐每个月包含三十个G的流量")]
    assert lost_turns("zh", zh, [((0.5, 2.5), "您的套餐每个月包含30个G流量")]) == 0
    assert lost_turns("zh", zh, [((0.5, 2.5), "请稍等我帮您转接")]) == 1

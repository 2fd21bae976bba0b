"""Chinese rule phrases matched by sound: ASR homophones count, near-homophones do not."""

import pytest

from pipeline.numbers.normalize import normalize
from pipeline.numbers.spoken import cue_type, cued_type
from pipeline.qa import QAEngine, load_packs
from tools.eval_pinyin import DEV, HELD_OUT, long_call, score

from .helpers import call, pack_of, seg

KEYWORD = {"id": "said", "kind": "keyword", "min_similarity": 0.8}


def said(phrases, text, **rule):
    engine = QAEngine(pack_of({**KEYWORD, "phrases": phrases, **rule}))
    return [f.confidence for f in engine.evaluate(call(seg("agent", 0, 5, text))).findings]


def default_flags(rule_id, text):
    result = QAEngine(load_packs()).evaluate(call(seg("agent", 0.5, 6, text), duration_s=60))
    return any(f.rule_id == rule_id for f in result.findings)


def test_a_short_phrase_matches_its_homophone_but_not_a_near_homophone():
    assert said(["工号"], "您好，公号幺三五七为您服务。") == [1.0]  # gong hao, same sound, 号 in common
    assert said(["工号"], "您好，工耗小王为您服务。") == [1.0]
    assert said(["工号"], "请您关注我们的公众号。") == []  # gong zhong hao: not the phrase's sound
    assert said(["工号"], "您好，功耗很低。") == []  # gong hao, but not one character in common
    assert said(["工号"], "您好，公告已经发了。") == []  # gong gao: one syllable apart in two
    assert said(["工号"], "公号幺三五七", min_similarity=None) == []  # a rule without tolerance: exact only


def test_a_sound_alike_that_is_a_word_of_its_own_is_that_word():
    assert said(["我是"], "您好，我是小王。") == [1.0]
    assert said(["我是"], "我市的营业厅周末也营业。") == []  # wo shi, "our city": a word, not a mishearing
    assert said(["白痴"], "你真是个百痴。") == [1.0]  # 百痴 is no word: the recogniser's homophone
    assert said(["白痴"], "这是一盏白炽灯。") == []  # 白炽, incandescent


@pytest.mark.parametrize(
    ("phrases", "text"),
    [
        (["工号"], "您好，公号幺三五七为您服务。"),  # engine output: 公号 for 工号
        (["客服"], "您好，这里是信用卡中心可服。"),  # 可服 for 客服
        (["帮您查询一下"], "好的，我帮您查醒一下。"),  # 查醒 for 查询: one syllable off in six
        (["短信订购"], "您可以通过短心定够办理。"),  # 短心定够 for 短信订购: three characters, same sound
    ],
)
def test_the_homophone_errors_seen_on_engine_output(phrases, text):
    assert said(phrases, text)


def test_one_syllable_off_is_a_different_short_phrase():
    assert said(["查询"], "我帮您查醒一下。") == []  # two syllables, one different: another word


def test_default_pack_takes_homophones_of_agent_identification_and_abuse():
    assert not default_flags("disclosure.agent_identification", "您好，公号幺三五七为您服务。")
    assert default_flags("abuse.agent", "百痴，我都说了好几遍了。")
    assert default_flags("abuse.agent", "你这个人啊，神经兵，自己不会看吗。")
    assert default_flags("misselling.pressure", "这个优惠仅限今添。")


@pytest.mark.parametrize(
    "text",
    [
        "这个优惠您白吃白喝都行。",  # bai chi, as 白痴
        "您可以去四楼的营业厅办理。",  # qu si, as 去死
        "这个是本单的金额。",  # ben dan, as 笨蛋, nothing in common
        "您放心，逼真的效果图已经发给您了。",
    ],
)
def test_harmless_near_homophones_of_abuse_stay_clear(text):
    assert not default_flags("abuse.agent", text)


def test_an_exclusion_cancels_its_own_homophone():
    rule = {"id": "f", "kind": "forbidden_phrase", "min_similarity": 0.85, "phrases": ["保本"], "exclude": ["不能保本"],
            "ignore_negated": False}  # fmt: skip
    engine = QAEngine(pack_of(rule))
    assert len(engine.evaluate(call(seg("agent", 0, 5, "这个产品报本。"))).findings) == 1
    assert engine.evaluate(call(seg("agent", 0, 5, "这个产品嗯不能报本的。"))).findings == ()


@pytest.mark.parametrize(
    ("text", "kind"),
    [("我的咖号是", "bank_card"), ("我的身份正号码是", "cn_resident_id"), ("我的手鸡号是", "phone")],
)
def test_pii_cue_words_by_sound(text, kind):
    assert cue_type(normalize(text).text) == kind
    assert cued_type(normalize(text).text, "6264791636" if kind != "phone" else "157478857") == kind


def test_a_cue_sound_with_no_character_in_common_is_not_a_cue():
    assert cue_type(normalize("收集好了").text) is None  # shou ji, as 手机


@pytest.mark.parametrize(("part", "min_precision"), [(DEV, 0.95), (HELD_OUT, 0.9)])
def test_homophone_evaluation_meets_the_targets(part, min_precision):
    # held out (never tuned on): 我市 (wo shi) still counts as 我是, 真本事 as 真笨 (0.923, 0.968)
    for kind, s in score(part).items():
        assert s.recall >= 0.95, (kind, s.misses)
        assert s.precision >= min_precision, (kind, s.false_alarms)


def test_matching_by_sound_keeps_a_long_call_fast():
    import time

    engine, long = QAEngine(load_packs()), long_call()
    start = time.perf_counter()
    engine.evaluate(long)
    assert time.perf_counter() - start < 1.0  # 240 segments; measured 0.04 s before sound matching

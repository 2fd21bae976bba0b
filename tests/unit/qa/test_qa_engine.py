"""Each rule kind on hand-written calls, in Mandarin and English, with near misses."""

import json
from types import SimpleNamespace

import pytest

from pipeline.qa import CallQAResult, CallTextError, QAEngine, call_text_from, load_packs

from .helpers import INVALID_CARD, VALID_CARD, VISA_CARD, call, pack_of, seg, spoken_en, spoken_zh

RECORDING = {
    "id": "disclosure.recording", "kind": "required_disclosure", "within_first_s": 15,
    "phrases": ["本次通话将被录音", "this call is recorded"], "exclude": ["不会被录音"],
}  # fmt: skip


def run(rule: dict, *segments, **call_options) -> list:
    return list(QAEngine(pack_of(rule)).evaluate(call(*segments, **call_options)).findings)


# --- required disclosure ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["您好，本次通话将被录音。", "Hi, this call is recorded for quality."])
def test_disclosure_said_in_time_by_the_agent(text):
    assert run(RECORDING, seg("agent", 1, 6, text), seg("customer", 7, 9, "ok")) == []


def test_disclosure_missing():
    (finding,) = run(RECORDING, seg("agent", 1, 6, "您好，请问有什么可以帮您"), duration_s=60)
    assert (finding.rule_id, finding.kind, finding.role) == (
        "disclosure.recording",
        "required_disclosure",
        "agent",
    )
    assert (finding.start_s, finding.end_s) == (0.0, 15.0)
    assert "not said within the first 15 s" in finding.message


def test_disclosure_said_by_the_customer_does_not_count():
    (finding,) = run(RECORDING, seg("agent", 1, 4, "您好"), seg("customer", 5, 9, "我知道本次通话将被录音"))
    assert "by the customer" in finding.message
    assert finding.evidence == "我知道本次通话将被录音"


def test_disclosure_said_too_late_does_not_count():
    (finding,) = run(
        RECORDING, seg("agent", 1, 4, "hello"), seg("agent", 40, 45, "Sorry, this call is recorded.")
    )
    assert "said at 41.1 s" in finding.message and "not within the first 15 s" in finding.message
    assert (finding.start_s, finding.end_s) == (40.0, 45.0)


def test_disclosure_cancelled_by_exclusion():
    (finding,) = run(RECORDING, seg("agent", 1, 5, "放心，本次通话不会被录音"))
    assert "not said" in finding.message


def test_disclosure_at_the_end_of_a_long_first_segment_is_late():
    # The phrase is at the end of a 0-30 s segment: its estimated time (~27 s) is past 15 s.
    text = "您好" * 40 + "本次通话将被录音"
    (finding,) = run(RECORDING, seg("agent", 0, 30, text))
    assert "said at 2" in finding.message


def test_disclosure_on_an_undiarised_mono_call():
    mono = seg("mixed", 1, 6, "本次通话将被录音", channel=0)
    assert run(RECORDING, mono, channels=1) == []


# --- forbidden phrases -----------------------------------------------------------------

MISSELLING = {
    "id": "misselling", "kind": "forbidden_phrase", "category": "mis_selling", "severity": "critical",
    "phrases": ["保本保息", "稳赚不赔", "保本", "guaranteed returns", "no risk"],
    "exclude": ["不保本", "not guaranteed"],
}  # fmt: skip


def test_forbidden_phrases_in_both_languages_and_traditional_script():
    findings = run(
        MISSELLING,
        seg("agent", 10, 15, "這款產品保本保息，穩賺不賠"),
        seg("agent", 20, 25, "There is NO RISK, it has guaranteed returns!"),
    )
    assert [(f.start_s, f.severity) for f in findings] == [(10, "critical"), (20, "critical")]
    assert "保本保息" in findings[0].message and "稳赚不赔" in findings[0].message
    assert findings[0].evidence == "這款產品保本保息，穩賺不賠"  # evidence is the original text


def test_forbidden_phrase_near_misses():
    assert run(MISSELLING, seg("agent", 10, 15, "这个产品不保本，有风险")) == []  # negation excluded
    assert run(MISSELLING, seg("agent", 10, 15, "there is some risk")) == []
    assert run(MISSELLING, seg("customer", 10, 15, "你们是不是保本保息？")) == []  # the customer asking
    (finding,) = run(MISSELLING, seg("agent", 10, 15, "这个不保本，但那个保本保息"))
    assert "保本保息" in finding.message


def test_english_phrases_match_whole_words_only():
    rule = {"id": "abuse", "kind": "forbidden_phrase", "category": "abuse", "phrases": ["idiot"]}
    assert run(rule, seg("agent", 0, 3, "what an idiotic form")) == []
    assert len(run(rule, seg("agent", 0, 3, "you IDIOT"))) == 1


# --- keyword any_of / all_of / none_of, regex ----------------------------------------------


def test_keyword_any_of_scoped_to_the_customer():
    rule = {
        "id": "complaint",
        "kind": "keyword",
        "role": "customer",
        "severity": "info",
        "phrases": ["投诉", "complaint"],
    }
    findings = run(
        rule, seg("agent", 0, 3, "您要投诉吗"), seg("customer", 4, 8, "I want to file a complaint")
    )
    assert [(f.role, f.start_s) for f in findings] == [("customer", 4)]


def test_keyword_all_of():
    rule = {
        "id": "fee",
        "kind": "keyword",
        "match": "all_of",
        "role": "agent",
        "phrases": ["免息", "没有手续费"],
    }
    assert run(rule, seg("agent", 0, 3, "分期免息")) == []
    (finding,) = run(rule, seg("agent", 0, 3, "分期免息"), seg("agent", 10, 14, "而且没有手续费"))
    assert (finding.start_s, finding.end_s) == (0, 14)


def test_keyword_none_of_in_the_last_seconds():
    rule = {"id": "closing", "kind": "keyword", "match": "none_of", "role": "agent", "within_last_s": 20,
            "phrases": ["再见", "thank you"]}  # fmt: skip
    assert run(rule, seg("agent", 0, 5, "hi"), seg("agent", 50, 55, "Thank you, bye"), duration_s=60) == []
    # Said, but early: the window is the last 20 s.
    (finding,) = run(rule, seg("agent", 0, 5, "再见"), seg("agent", 50, 55, "好的"), duration_s=60)
    assert (finding.start_s, finding.end_s) == (40.0, 60.0)


def test_regex_on_normalised_text():
    rule = {"id": "secret", "kind": "regex", "role": "agent", "severity": "critical",
            "phrases": [r"(告诉|提供)(我)?(您|你)的?(密码|验证码)", r"tell me your (pin|cvv)"]}  # fmt: skip
    findings = run(
        rule, seg("agent", 0, 4, "請告訴我您的密碼"), seg("agent", 5, 9, "Tell me your PIN please")
    )
    assert len(findings) == 2
    assert run(rule, seg("agent", 0, 4, "请不要把密码告诉任何人")) == []


# --- PII ----------------------------------------------------------------------------------


def test_pii_rule_and_redaction_everywhere():
    rule = {"id": "pii.readback", "kind": "pii", "role": "agent", "types": ["bank_card"], "severity": "high"}
    engine = QAEngine(pack_of(rule))
    result = engine.evaluate(call(
        seg("customer", 0, 5, f"卡号{spoken_zh(VALID_CARD)}"),
        seg("agent", 6, 12, f"I'll repeat: {spoken_en(VISA_CARD)}"),
        seg("agent", 13, 16, f"卡号{spoken_zh(INVALID_CARD)}"),
    ))  # fmt: skip
    # the third number fails Luhn: still a (likely) card, masked and flagged with less confidence
    assert [(p.type, p.role) for p in result.pii] == [
        ("bank_card", "customer"), ("bank_card", "agent"), ("bank_card", "agent")
    ]  # fmt: skip
    exact, likely = result.findings
    assert (exact.role, exact.start_s, exact.evidence, exact.confidence) == ("agent", 6, "I'll repeat: [CARD]", 1.0)
    assert (likely.start_s, likely.evidence, likely.confidence) == (13, "卡号[CARD]", 0.6)
    assert "likely bank_card" in likely.message
    assert [s.text for s in result.redacted_segments] == ["卡号[CARD]", "I'll repeat: [CARD]", "卡号[CARD]"]
    dumped = json.dumps(result.to_dict(), ensure_ascii=False)
    assert VISA_CARD not in dumped and spoken_zh(VALID_CARD) not in dumped and "four five" not in dumped


def test_evidence_of_other_rules_is_redacted():
    rule = {"id": "card.talk", "kind": "keyword", "phrases": ["卡号"]}
    (finding,) = run(rule, seg("customer", 0, 5, f"我的卡号是{VALID_CARD}"))
    assert finding.evidence == "我的卡号是[CARD]"


# --- metrics ------------------------------------------------------------------------------


def test_long_silence_and_talk_over():
    silence = {"id": "silence", "kind": "long_silence", "max_silence_s": 10}
    (finding,) = run(silence, seg("agent", 0, 5, "a"), seg("customer", 4, 8, "b"), seg("agent", 30, 35, "c"))
    assert (finding.start_s, finding.end_s) == (8, 30)
    assert run(silence, seg("agent", 0, 5, "a"), seg("agent", 14, 15, "b")) == []
    over = {"id": "over", "kind": "talk_over", "max_overlap_s": 2}
    (finding,) = run(over, seg("agent", 0, 10, "a"), seg("customer", 5, 12, "b"))
    assert (finding.start_s, finding.end_s) == (5, 10)
    assert run(over, seg("agent", 0, 10, "a"), seg("customer", 9, 12, "b")) == []  # 1 s: fine
    mono = (seg("mixed", 0, 10, "a", channel=0), seg("mixed", 5, 12, "b", channel=0))
    assert run(over, *mono, channels=1) == []


def test_speech_rate_in_both_languages():
    rule = {"id": "rate", "kind": "speech_rate", "min_speech_s": 10,
            "bounds": {"zh": {"max_per_min": 300}, "en": {"min_per_min": 100}}}  # fmt: skip
    fast_zh = seg("agent", 0, 20, "您好" * 60)  # 120 chars in 20 s = 360/min
    slow_en = seg("agent", 30, 50, "hello " * 20)  # 20 words in 20 s = 60/min
    findings = run(rule, fast_zh, slow_en, seg("customer", 55, 60, "好" * 200))
    assert [f.message for f in findings] == [
        "agent speech rate 360 chars/min above 300",
        "agent speech rate 60 words/min below 100",
    ]
    assert run(rule, seg("agent", 0, 20, "您好" * 40)) == []  # 240/min


def test_talk_ratio():
    rule = {"id": "ratio", "kind": "talk_ratio", "max_ratio": 0.8, "min_speech_s": 10}
    (finding,) = run(rule, seg("agent", 0, 90, "a"), seg("customer", 90, 95, "b"))
    assert finding.message == "agent talk ratio 95% above 80%"
    assert run(rule, seg("agent", 0, 60, "a"), seg("customer", 60, 90, "b")) == []


# --- the default pack end to end -------------------------------------------------------------


def test_default_pack_on_a_clean_and_a_bad_call():
    engine = QAEngine(load_packs())
    clean = engine.evaluate(call(
        seg("agent", 0.5, 6, "您好，我是信用卡中心客服，工号幺二三四，本次通话将被录音。"),
        seg("customer", 6.5, 12, "你好，我想查一下这个月的信用卡账单是多少钱"),
        seg("agent", 12.5, 30, "好的，您本期账单是三千五百元，最后还款日是十五号，还有什么可以帮您？"),
        seg("customer", 31, 33, "没有了，谢谢"),
        seg("agent", 33.5, 36, "感谢您的来电，再见"),
        lang="zh",
    ))  # fmt: skip
    assert clean.findings == () and clean.score == 100
    bad = engine.evaluate(call(
        seg("agent", 0.5, 5, "Yeah, what do you want?"),
        seg("customer", 6, 12, f"My card is {spoken_en(VISA_CARD)}, I want to invest"),
        seg("agent", 13, 30, "This fund has guaranteed returns and no risk, you cannot lose. Tell me your PIN."),
        seg("customer", 31, 34, "I will file a complaint"),
        lang="en",
    ))  # fmt: skip
    ids = {f.rule_id for f in bad.findings}
    assert {"disclosure.recording_notice", "disclosure.agent_identification", "courtesy.closing",
            "misselling.guaranteed_returns", "misselling.asks_for_secret", "escalation.customer_complaint",
            "pii.customer_discloses"} <= ids  # fmt: skip
    assert bad.score == 0
    assert [p.type for p in bad.pii] == ["bank_card"]


def test_the_default_pack_flags_a_social_security_number_read_back_and_says_nothing_checks_it():
    engine = QAEngine(load_packs())
    result = engine.evaluate(call(
        seg("customer", 0, 5, "My social security number is five two three, four five, six seven eight nine."),
        seg("agent", 6, 10, "So that is 523-45-6789, and your account number is 44710093?"),
        lang="en",
    ))  # fmt: skip
    flagged = {(f.rule_id, f.role): f for f in result.findings if f.rule_id.startswith("pii.")}
    assert set(flagged) == {("pii.customer_discloses", "customer"), ("pii.agent_reads_back", "agent")}
    assert "likely us_ssn (no check exists)" in flagged["pii.agent_reads_back", "agent"].message
    assert sorted((p.type, p.role) for p in result.pii) == [
        ("account_number", "agent"), ("us_ssn", "agent"), ("us_ssn", "customer")]
    assert [s.text for s in result.redacted_segments] == [
        "My social security number is [SSN].", "So that is [SSN], and your account number is [ACCOUNT]?"]


def test_result_round_trips_through_json():
    engine = QAEngine(load_packs())
    result = engine.evaluate(call(seg("agent", 0, 5, f"卡号{VALID_CARD}, no risk")))
    again = CallQAResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert set(result.to_dict()) == {
        "call_id",
        "agent_id",
        "score",
        "findings",
        "pii",
        "redacted_segments",
        "rule_packs",
        "no_speech",
        "judged",
        "unsupported_language",
    }
    foreign = engine.evaluate(call(seg("agent", 0, 5, "Bonjour"), lang="fr"))
    assert CallQAResult.from_dict(json.loads(json.dumps(foreign.to_dict()))) == foreign


def test_call_text_from_any_transcript_like_object():
    transcript = SimpleNamespace(
        call_id="c9", agent_id=None, duration_s=10.0, channels=1, languages={"0": "en"}, metadata={},
        segments=[SimpleNamespace(role="mixed", channel=0, start_s=5.0, end_s=6.0, text="b"),
                  SimpleNamespace(role="mixed", channel=0, start_s=1.0, end_s=2.0, text="a")],
    )  # fmt: skip
    text = call_text_from(transcript)
    assert [s.text for s in text.segments] == ["a", "b"]
    assert QAEngine(load_packs()).evaluate(transcript).call_id == "c9"
    with pytest.raises(CallTextError, match="impossible"):
        call_text_from(
            {
                "call_id": "x",
                "segments": [{"role": "agent", "channel": 0, "start_s": 5, "end_s": 1, "text": ""}],
            }
        )
    with pytest.raises(CallTextError, match="call_id"):
        call_text_from({"segments": []})


def test_result_fits_the_qa_findings_event():
    from pipeline.stages.qa import from_event, to_event

    engine = QAEngine(load_packs())
    result = engine.evaluate(call(seg("agent", 0, 5, "no risk"), seg("customer", 6, 9, VISA_CARD)))
    event = to_event(result)
    assert event.call_id == result.call_id and len(event.findings) == len(result.findings)
    assert from_event(event) == result


def test_disclosure_said_late_by_the_agent_is_preferred_to_the_customer():
    (finding,) = run(
        RECORDING, seg("customer", 1, 4, "本次通话将被录音吗"), seg("agent", 40, 45, "本次通话将被录音")
    )
    assert "said at 40" in finding.message


def test_regex_written_in_traditional_script_still_matches():
    rule = {"id": "secret", "kind": "regex", "phrases": ["告訴我.{0,3}密碼"]}
    assert len(run(rule, seg("agent", 0, 4, "请告诉我您的密码"))) == 1


def test_an_announced_hold_may_last_longer():
    rule = {"id": "silence", "kind": "long_silence", "max_silence_s": 10, "hold_phrases": ["请稍等", "please hold"],
            "max_hold_s": 60}  # fmt: skip
    announced = (seg("agent", 0, 5, "我帮您查一下，请稍等"), seg("customer", 5.5, 6, "好的"))
    assert run(rule, *announced, seg("agent", 50, 55, "让您久等了")) == []
    (too_long,) = run(rule, *announced, seg("agent", 90, 95, "让您久等了"))
    assert "hold of 84.0 s" in too_long.message
    (dead_air,) = run(rule, seg("agent", 0, 5, "我帮您查一下"), seg("agent", 50, 55, "好了"))
    assert "no speech for 45.0 s" in dead_air.message


def test_on_a_mono_call_a_number_said_once_is_the_customers_and_a_repeat_is_a_read_back():
    engine = QAEngine(load_packs())
    given = seg("mixed", 5, 10, f"My card number is {spoken_en(VISA_CARD)}.", channel=0)
    once = engine.evaluate(call(seg("mixed", 0.5, 4, "Thank you for calling, my name is Anna.", channel=0), given,
                                channels=1, lang="en"))
    pii = [(f.rule_id, f.message) for f in once.findings if f.rule_id.startswith("pii.")]
    assert pii == [("pii.customer_discloses", "bank_card spoken (mono recording: speaker not known)")]
    again = engine.evaluate(call(given, seg("mixed", 11, 16, f"So that is {spoken_en(VISA_CARD)}.", channel=0),
                                 channels=1, lang="en"))
    read_back = [f for f in again.findings if f.rule_id == "pii.agent_reads_back"]
    assert [f.start_s for f in read_back] == [11] and "a read-back" in read_back[0].message


def test_a_rude_customer_on_a_mono_call_is_not_a_critical_finding_against_the_agent():
    engine = QAEngine(load_packs())
    rude = seg("mixed", 5, 9, "This is ridiculous, your service is stupid.", channel=0)
    mono = engine.evaluate(call(seg("mixed", 0.5, 4, "Thank you for calling, my name is Anna.", channel=0), rude,
                                channels=1, lang="en"))
    assert {f.rule_id for f in mono.findings if f.rule_id.startswith("abuse.")} == {"abuse.customer"}
    stereo = engine.evaluate(call(seg("agent", 0.5, 4, "Thank you for calling, my name is Anna."),
                                  seg("agent", 5, 9, "This is ridiculous, you are stupid."), lang="en"))
    assert {f.rule_id for f in stereo.findings if f.rule_id.startswith("abuse.")} == {"abuse.agent"}
    with pytest.raises(Exception, match="unknown_speaker"):
        pack_of({"id": "x", "kind": "keyword", "phrases": ["a"], "unknown_speaker": "maybe"})


def test_a_call_in_a_language_no_pack_is_written_for_is_not_judged():
    from pipeline.events import ModelInfo, ObjectRef, Segment, Transcript, UnsupportedLanguage

    segments = [Segment(role="agent", channel=0, start_s=0.0, end_s=3.0, text="Bonjour, je suis Marie."),
                Segment(role="customer", channel=1, start_s=3.5, end_s=6.0, text="Ma carte 4532015112830366.")]
    base = dict(call_id="fr-1", object=ObjectRef(bucket="b", key="fr-1.wav"), duration_s=6.0, channels=2,
                segments=segments, model=ModelInfo(name="m", version="1"))
    flagged = Transcript(**base, languages={"0": "fr", "1": "fr"},
                         unsupported_language=UnsupportedLanguage(language="fr", probability=0.97, channels=[0, 1]))
    from_elsewhere = Transcript(**base, languages={"0": "fr", "1": "fr"})  # another producer: no flag, a code
    engine = QAEngine.from_paths()
    for transcript in (flagged, from_elsewhere):
        result = engine.evaluate(transcript)
        assert not result.judged and result.findings == () and result.score == 0.0
        assert result.unsupported_language is not None and result.unsupported_language.language == "fr"
        assert "4532" not in " ".join(s.text for s in result.redacted_segments)  # still redacted
    assert engine.evaluate(Transcript(**base, languages={"0": "en", "1": "en"})).judged
    from pipeline.stages.qa import to_event

    event = to_event(engine.evaluate(flagged))
    assert event.judged is False and event.unsupported_language.probability == 0.97

"""QA on text as ASR writes it: disclosures with small errors, negated and asked forbidden
phrases, the abuse lexicon, and calls with no speech."""

import pytest

from pipeline.qa import QAEngine, load_packs

from .helpers import call, pack_of, seg

DISCLOSURE = {
    "id": "notice", "kind": "required_disclosure", "within_first_s": 30,
    "phrases": ["this call is being recorded", "您的通话将会被录音"],
    "exclude": ["not being recorded"],
}  # fmt: skip


def findings(rule, *segments, **options):
    return list(QAEngine(pack_of(rule)).evaluate(call(*segments, **options)).findings)


def default_pack_flags(rule_id, text, start_s=0, duration_s=5):
    """Does the default pack's rule have a finding on one agent turn?"""
    result = QAEngine(load_packs()).evaluate(call(seg("agent", start_s, start_s + 5, text), duration_s=duration_s))
    return any(f.rule_id == rule_id for f in result.findings)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, this call is been recorder for quality.",  # two words misheard
        "Hi, this call is being record.",
        "为了保证服务质量，您的通话将会被路音。",  # a homophone: same pinyin
        "您的通话将被录音。",  # one character dropped
    ],
)
def test_a_disclosure_with_small_asr_errors_still_counts(text):
    assert findings(DISCLOSURE, seg("agent", 1, 6, text), duration_s=60) == []


@pytest.mark.parametrize(
    "text",
    [
        "Hello, this call is about your card.",
        "Hello, this call is not being recorded.",  # the exclusion still cancels it
        "您的包裹已经从上海发出。",
        "您的通话不会录音。",
    ],
)
def test_a_different_sentence_is_still_a_missing_disclosure(text):
    (finding,) = findings(DISCLOSURE, seg("agent", 1, 6, text), duration_s=60)
    assert "not said" in finding.message
    assert 0 < finding.confidence <= 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Hi, this call will be recorded.", True),
        ("Calls may be monitored or recorded for training.", True),
        ("您好，本次通话会录音。", True),
        ("您的通话将被录制。", True),
        ("This call is not recorded.", False),
        ("本次通话不会录音。", False),
        ("I have recorded your new address.", False),
    ],
)
def test_default_pack_recording_notice_in_other_words(text, said):
    assert default_pack_flags("disclosure.recording_notice", text, start_s=1, duration_s=60) is not said


def test_a_fuzzy_match_reports_its_similarity_as_confidence():
    late = findings(DISCLOSURE, seg("agent", 40, 45, "this call is been recorded"), duration_s=60)
    assert [f.message for f in late] == ["required disclosure said at 40.0 s, not within the first 30 s"]
    assert 0.8 <= late[0].confidence < 1.0
    exact = findings(DISCLOSURE, seg("agent", 40, 45, "this call is being recorded"), duration_s=60)
    assert exact[0].confidence == 1.0


def test_exact_only_when_the_rule_asks_for_it():
    rule = {**DISCLOSURE, "min_similarity": None}
    assert len(findings(rule, seg("agent", 1, 6, "this call is been recorded"), duration_s=60)) == 1
    strict = {**DISCLOSURE, "min_similarity": 0.99}
    assert len(findings(strict, seg("agent", 1, 6, "this call is been recorded"), duration_s=60)) == 1


FORBIDDEN = {"id": "promise", "kind": "forbidden_phrase", "phrases": ["guaranteed returns", "guarantee returns", "risk free", "保证收益", "保本", "零风险"]}


@pytest.mark.parametrize(
    "text",
    [
        "We cannot guarantee returns, the market goes up and down.",
        "I can't promise guaranteed returns.",
        "Nobody offers guaranteed returns on this.",
        "Is it risk free?",
        "Are these guaranteed returns",
        "我们不能保证收益。",
        "这个产品并非零风险。",
        "这个产品保本吗？",
        "这个是不是零风险",
    ],
)
def test_negated_or_asked_is_not_a_violation(text):
    assert findings(FORBIDDEN, seg("agent", 0, 5, text)) == []


@pytest.mark.parametrize(
    "text",
    [
        "This fund has guaranteed returns.",
        "We guarantee returns of five percent.",
        "Yes, it is risk free.",
        "这个产品保本，收益很高。",
        "我们不收手续费，保证收益。",  # the negation belongs to the clause before the comma
        "这个产品不错，零风险。",
    ],
)
def test_asserted_is_a_violation(text):
    assert len(findings(FORBIDDEN, seg("agent", 0, 5, text))) == 1


def test_a_phrase_with_every_word_slightly_misheard_is_still_aligned():
    # no word of "guarantee your returns" is said exactly, yet each is nearly: one phrase
    rule = {"id": "promise", "kind": "forbidden_phrase", "min_similarity": 0.85, "phrases": ["guarantee your returns"]}
    (finding,) = findings(rule, seg("agent", 0, 5, "With this plan we guarantee you return some time."))
    assert 0.85 <= finding.confidence < 1.0
    assert findings(rule, seg("agent", 0, 5, "We guarantee you will get a reply by email.")) == []


def test_context_can_be_switched_off_per_rule():
    rule = {**FORBIDDEN, "ignore_negated": False, "ignore_questions": False}
    assert len(findings(rule, seg("agent", 0, 5, "We cannot guarantee returns."))) == 1
    assert len(findings(rule, seg("agent", 0, 5, "Is it risk free?"))) == 1


@pytest.mark.parametrize(
    ("text", "promised"),
    [
        ("Honestly, the returns are guaranteed with this fund.", True),
        ("Trust me, you won't lose money on this.", True),
        ("这款产品收益有保证，一定赚钱。", True),
        ("放心，这个不会亏本。", True),
        ("Are the returns guaranteed?", False),
        ("The returns are not guaranteed, you may lose money.", False),
        ("I can't say you won't lose money.", False),
        ("收益有保证吗？", False),
        ("我们不能说不会亏本。", False),
    ],
)
def test_default_pack_promises_said_in_other_words(text, promised):
    assert default_pack_flags("misselling.guaranteed_returns", text) is promised


@pytest.mark.parametrize(
    ("text", "abusive"),
    [
        ("Are you deaf? I told you already.", True),
        ("Don't be stupid.", True),
        ("How many times do I have to tell you", True),
        ("你聋了吗？我说过了。", True),
        ("烦死了，有完没完。", True),
        ("爱办不办。", True),
        ("我都说了多少遍了，你懂不懂？", True),
        ("Look, you're wasting my time.", True),
        ("What is the problem with your card?", False),
        ("我帮您查一下，您稍等。", False),
        ("I don't want to waste your time, so let me check.", False),
        ("Sorry, the stupid system is slow today.", False),
        ("There are no stupid questions.", False),
        ("I understand, let me check that for you.", False),
        ("好的，我帮您查一下。", False),
    ],
)
def test_default_abuse_lexicon(text, abusive):
    assert default_pack_flags("abuse.agent", text) is abusive


def test_a_call_with_no_speech_is_one_dead_air_finding():
    engine = QAEngine(load_packs())
    result = engine.evaluate(call(duration_s=60.0))
    assert [f.rule_id for f in result.findings] == ["metric.long_silence"]
    assert "may not have connected" in result.findings[0].message
    assert result.no_speech and result.to_dict()["no_speech"] is True
    blank = engine.evaluate(call(seg("agent", 3, 5, " "), seg("customer", 7, 9, "…"), duration_s=60.0))
    assert [f.rule_id for f in blank.findings] == ["metric.long_silence"]


def test_silence_at_the_start_and_end_of_a_call():
    rule = {"id": "dead", "kind": "long_silence", "max_silence_s": 15, "max_edge_silence_s": 20}
    found = findings(rule, seg("agent", 25, 30, "hello"), seg("customer", 31, 33, "hi"), duration_s=60)
    assert [(f.start_s, f.end_s) for f in found] == [(0.0, 25.0), (33.0, 60.0)]
    assert findings({**rule, "max_edge_silence_s": None}, seg("agent", 25, 30, "hello"), duration_s=60) == []


def test_talk_over_bridges_a_breath_between_segments():
    rule = {"id": "over", "kind": "talk_over", "max_overlap_s": 3}
    agent = [seg("agent", 10, 12.0, "I can see your account"), seg("agent", 12.3, 16, "and the charges")]
    customer = seg("customer", 11, 15.0, "wait, I already told you")
    assert [(f.start_s, f.end_s) for f in findings(rule, *agent, customer)] == [(11, 15.0)]
    assert findings({**rule, "bridge_pause_s": 0}, *agent, customer) == []


def test_homophones_of_a_forbidden_chinese_phrase():
    rule = {**FORBIDDEN, "min_similarity": 0.85, "phrases": ["保本保息", "稳赚不赔"]}
    assert len(findings(rule, seg("agent", 0, 5, "这个理财产品报本保溪。"))) == 1  # same pinyin
    assert findings(rule, seg("agent", 0, 5, "这个产品不能报本保息。")) == []  # negated still
    assert findings(rule, seg("agent", 0, 5, "这个理财产品保障很好。")) == []


def test_a_question_particle_belongs_to_its_own_sentence():
    # ASR runs sentences together without marks: "吧" / a later "吗" is not this phrase's question
    assert len(findings(FORBIDDEN, seg("agent", 0, 5, "买这个产品零风险 保证收益 闭嘴 你有病吧"))) == 1
    assert len(findings(FORBIDDEN, seg("agent", 0, 5, "这个产品保本 您还有别的问题吗"))) == 1
    assert findings(FORBIDDEN, seg("agent", 0, 5, "这个产品是零风险的吗")) == []


@pytest.mark.parametrize(
    "text",
    [
        "Thank you for calling, my name in honor.",  # engine output for "my name is Anna"
        "Hi, my name's Mark, how can I help?",
        "Good morning, this is Lisa.",
    ],
)
def test_the_agent_naming_themself_counts_as_identification_as_asr_writes_it(text):
    assert not default_pack_flags("disclosure.agent_identification", text, duration_s=60)


def test_identification_missing_when_the_agent_gives_no_name():
    assert default_pack_flags("disclosure.agent_identification", "Thank you for calling, how can I help?", duration_s=60)

"""Scripts of the synthetic QA evaluation calls: planted events and near misses, from a seed.

Each call is a list of turns ``(role, text, gap_s)``: ``gap_s`` is the pause before the
turn (negative: the turn starts that long before the previous one ends, i.e. talk-over).
``expected`` says, per kind, whether the QA should flag the call. Near misses are
planted as well, and must not be flagged: a reworded disclosure, a negated or asked
forbidden phrase, an amount or order number, a short pause, a short overlap, a
customer's (not the agent's) rudeness.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = ("disclosure", "forbidden", "pii", "silence", "talk_over", "abuse", "no_speech")
EN_DIGITS = "zero one two three four five six seven eight nine".split()
ZH_DIGITS = "零一二三四五六七八九"
_ID_WEIGHTS = [pow(2, 17 - i, 11) for i in range(17)]

EN = {
    "greet": ["Thank you for calling, my name is Anna, how can I help you?", "Good morning, this is Mark speaking."],
    "notice": ["This call is recorded for quality purposes.", "Please note this call may be recorded for training.",
               "Before we start, this call is being recorded."],
    "forbidden": ["This fund has guaranteed returns and there is no risk at all.",
                  "With this plan we guarantee returns of five percent every year."],
    "negated": ["I cannot promise guaranteed returns, the value can go down.",
                "We do not offer guaranteed returns on any investment."],
    "asked": ["Is this investment risk free?", "Are the returns guaranteed?"],
    "abuse": ["Are you deaf? How many times do I have to tell you.", "Shut up and listen to me, you idiot."],
    "rude_customer": ["This is ridiculous, your service is stupid."],
    "amount": ["My last bill was two hundred and forty dollars.", "The order number is four five one two."],
    "hold": ["Let me check that for you."],
    "close": ["Is there anything else? Thank you for calling, goodbye."],
    "card": "My card number is {}.", "id": "My ID number is {}.", "mobile": "My mobile number is {}.",
    "long_customer": ["Wait, wait, I already told you twice that I never made that payment and I want my money back now."],
    "long_agent": [("I can see your account here and I will go through the charges on your last statement one by one "
                    "so that we can find the payment you are asking about.")],
}
ZH = {
    "greet": ["您好，我是客服专员小王，请问有什么可以帮您？"],
    "notice": ["为了保证服务质量，您的通话将会被录音。", "您好，本次通话全程录音。"],
    "forbidden": ["这个理财产品保本保息，稳赚不赔。", "买这个产品零风险，保证收益。"],
    "negated": ["这个产品不能保证收益，投资有风险。", "我们不保证收益，请您谨慎考虑。"],
    "asked": ["这个产品保本吗？", "是不是零风险？"],
    "abuse": ["你聋了吗？烦死了，有完没完。", "闭嘴，听我说，你有病吧。"],
    "rude_customer": ["你们这个服务太差了，真是白痴。"],
    "amount": ["我这个月的账单是一千二百八十元。", "订单尾号是四五一二。"],
    "hold": ["好的，我帮您查一下。"],
    "close": ["感谢您的耐心等待，祝您生活愉快，再见。"],
    "card": "我的卡号是{}。", "id": "我的身份证号是{}。", "mobile": "我的手机号是{}。",
    "long_customer": ["等一下，我已经跟你说了两遍了，这笔钱不是我花的，你们必须马上把钱退给我。"],
    "long_agent": ["我这边看到您的账户上个月有三笔消费，我现在一笔一笔帮您核对，请您稍微听我说完，然后告诉我哪一笔有问题。"],
}


@dataclass
class CallScript:
    name: str
    language: str
    turns: list[tuple[str, str, float]] = field(default_factory=list)  # (role, text, gap_s)
    expected: dict[str, bool] = field(default_factory=dict)
    planted: dict[str, str] = field(default_factory=dict)  # kind -> variant, for the report
    silent_s: float = 0.0  # a call with no speech: its length


def luhn_card(rng: random.Random) -> str:
    body = rng.choice(["4", "5", "62"]) + "".join(rng.choice("123456789") for _ in range(14))
    body = body[:15]
    for check in "0123456789":
        digits = body + check
        total = sum((d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d for i, d in enumerate(map(int, reversed(digits))))
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def resident_id(rng: random.Random) -> str:
    region = rng.choice(["110105", "310104", "440301", "320102"])
    born = f"{rng.randint(1950, 2002)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = region + born + f"{rng.randint(0, 999):03d}"
    check = "10X98765432"[sum(int(d) * w for d, w in zip(body, _ID_WEIGHTS)) % 11]
    return body + check


def mobile(rng: random.Random) -> str:
    return "1" + rng.choice("3589") + "".join(rng.choice("0123456789") for _ in range(9))


def spoken(number: str, language: str, kind: str) -> str:
    """Read in groups, the way people say them: cards 4-4-4-4, IDs 6-8-4, mobiles 3-4-4."""
    sizes = {"card": [4, 4, 4, 4], "id": [6, 8, 4], "mobile": [3, 4, 4]}[kind]
    groups, pos = [], 0
    for size in sizes:
        groups.append(number[pos : pos + size])
        pos += size
    if language == "zh":
        one = "幺" if kind == "mobile" else "一"
        return "，".join("".join(one if d == "1" else ZH_DIGITS[int(d)] if d.isdigit() else "叉" for d in g) for g in groups)
    return ", ".join(", ".join(EN_DIGITS[int(d)] if d.isdigit() else "X" for d in g) for g in groups)


def make_scripts(seed: int, n_calls: int, silent_calls: int = 3) -> list[CallScript]:
    rng = random.Random(seed)
    scripts = []
    for i in range(n_calls):
        if i < silent_calls:
            call = CallScript(f"s{seed}-{i:02d}-silent", "none", silent_s=rng.uniform(30, 60))
            call.expected = {k: k in ("silence", "no_speech") for k in KINDS}
            scripts.append(call)
            continue
        scripts.append(_speech_call(rng, seed, i, "en" if i % 2 else "zh"))
    return scripts


def _speech_call(rng: random.Random, seed: int, i: int, lang: str) -> CallScript:
    lex, fill = (EN, "en") if lang == "en" else (ZH, "zh")
    call = CallScript(f"s{seed}-{i:02d}-{lang}", lang)
    choose = {
        "disclosure": rng.choice(["in_time", "in_time", "missing", "late"]),
        "forbidden": rng.choice(["assert", "negated", "asked", "none"]),
        "pii": rng.choice(["card", "id", "mobile", "amount", "none"]),
        "silence": rng.choice(["long", "short", "none"]),
        "talk_over": rng.choice(["long", "short", "none"]),
        "abuse": rng.choice(["agent", "customer", "none", "none"]),
    }
    call.planted = dict(choose)
    t = call.turns
    t.append(("agent", rng.choice(lex["greet"]), 0.5))
    if choose["disclosure"] == "in_time":
        t.append(("agent", rng.choice(lex["notice"]), 0.4))
    t.append(("customer", f"<{fill}>", 0.6))
    t.append(("agent", f"<{fill}>", 0.6))
    if choose["pii"] in ("card", "id", "mobile"):
        number = {"card": luhn_card, "id": resident_id, "mobile": mobile}[choose["pii"]](rng)
        t.append(("customer", lex[choose["pii"]].format(spoken(number, lang, choose["pii"])), 0.6))
    elif choose["pii"] == "amount":
        t.append(("customer", rng.choice(lex["amount"]), 0.6))
    t.append(("agent", rng.choice(lex["hold"]), 0.6))
    gap = {"long": rng.uniform(19, 24), "short": rng.uniform(6, 9), "none": 0.8}[choose["silence"]]
    t.append(("agent", f"<{fill}>", gap))
    if choose["talk_over"] != "none":
        t.append(("agent", lex["long_agent"][0], 0.6))
        overlap = rng.uniform(4.5, 5.5) if choose["talk_over"] == "long" else rng.uniform(0.8, 1.5)
        t.append(("customer", lex["long_customer"][0], -overlap))
    else:
        t.append(("customer", f"<{fill}>", 0.6))
    if choose["forbidden"] in ("assert", "negated"):
        t.append(("agent", rng.choice(lex["forbidden" if choose["forbidden"] == "assert" else "negated"]), 0.6))
    elif choose["forbidden"] == "asked":
        t.append(("customer", rng.choice(lex["asked"]), 0.6))
        t.append(("agent", rng.choice(lex["negated"]), 0.6))
    if choose["abuse"] == "agent":
        t.append(("agent", rng.choice(lex["abuse"]), 0.6))
    elif choose["abuse"] == "customer":
        t.append(("customer", rng.choice(lex["rude_customer"]), 0.6))
    if choose["disclosure"] == "late":
        t.append(("agent", f"<{fill}>", 0.6))
        t.append(("agent", "<late-notice>", 0.6))
    t.append(("customer", f"<{fill}>", 0.6))
    t.append(("agent", rng.choice(lex["close"]), 0.6))
    call.expected = {
        "disclosure": choose["disclosure"] in ("missing", "late"),
        "forbidden": choose["forbidden"] == "assert",
        "pii": choose["pii"] in ("card", "id", "mobile"),
        "silence": choose["silence"] == "long",
        "talk_over": choose["talk_over"] == "long",
        "abuse": choose["abuse"] == "agent",
        "no_speech": False,
    }
    return call

"""Evaluate Mandarin QA on transcripts with homophone errors, the kind Mandarin ASR makes.

Each case is a one-turn agent call judged by the default pack. Positives say a recording
notice, an agent identification or abuse with characters of the rule phrase replaced by
common characters of the same toneless pinyin (a seeded draw from the 3755 level-1 GB2312
characters, grouped by pypinyin's reading), plus the errors seen on engine output (公号 for
工号, 可服 for 客服). Negatives are harmless sentences that sound close: hand-written
near-homophones, and the short rule phrases with one syllable changed. Recall and
precision are printed per kind, for the dev part (tuned on) and the held-out part (other
phrases, other sentence frames, another seed; never tuned on).

    python -m tools.eval_pinyin            # figures for both parts
    python -m tools.eval_pinyin --timing   # also QAEngine.evaluate time on a long Mandarin call
"""

from __future__ import annotations

import argparse
import functools
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from pypinyin import lazy_pinyin
from pypinyin.pinyin_dict import pinyin_dict

from pipeline.numbers.model import SegmentText
from pipeline.qa import QAEngine, load_packs
from pipeline.qa.model import CallText

KINDS = ("disclosure", "agent_id", "abuse")
RULE = {
    "disclosure": "disclosure.recording_notice",
    "agent_id": "disclosure.agent_identification",
    "abuse": "abuse.agent",
}


@dataclass(frozen=True)
class Part:
    seed: int
    phrases: dict[str, tuple[str, ...]]
    frames: dict[str, tuple[str, ...]]  # "{p}": where the phrase goes; no other rule phrase in them
    near_misses: dict[str, tuple[str, ...]]  # harmless sentences that sound close to a rule phrase


DEV = Part(
    seed=1,
    phrases={
        "disclosure": ("通话录音", "全程录音", "将被录音", "本次通话全程录音", "您的通话将会被录音"),
        "agent_id": ("工号", "客服专员"),
        "abuse": ("白痴", "神经病", "闭嘴", "有完没完", "烦死了", "你有病", "蠢货", "滚蛋", "听不懂人话", "你聋了吗"),
    },
    frames={
        "disclosure": ("您好，{p}，请问有什么可以帮您？", "先跟您说一下，{p}，请放心。"),
        "agent_id": ("您好，{p}幺三五七为您服务。", "您好，这里是信用卡中心，{p}小王为您服务。"),
        "abuse": ("{p}，我都说了好几遍了。", "你这个人啊，{p}，自己不会看吗。"),
    },
    near_misses={
        "disclosure": ("您好，您的通话套餐已经升级。", "您好，这边帮您记录一下，请稍等。", "我们会录用您的申请材料。"),
        "agent_id": ("您好，请问是王先生吗？", "请您关注我们的公众号。", "您好，这边是回访电话。"),
        "abuse": (
            "这个优惠您白吃白喝都行。",
            "您放心，逼真的效果图已经发给您了。",
            "这个是本单的金额。",
            "有完整的资料就可以办。",
            "他生病了，今天请假。",
            "您先别着急，存货还有很多。",
        ),
    },
)

HELD_OUT = Part(
    seed=2,
    phrases={
        "disclosure": ("会被录音", "正在录音", "进行录音", "通话将被录音"),
        "agent_id": ("客服代表", "工号"),
        "abuse": ("笨蛋", "废物", "脑子进水", "少废话", "给我滚", "你烦不烦", "去死", "活该", "真笨", "爱办不办"),
    },
    frames={
        "disclosure": ("为了服务质量，本次通话{p}。", "提醒您，{p}，谢谢配合。"),
        "agent_id": ("喂您好，{p}二四六八，很高兴为您服务。", "您好，我们是银行的{p}李明。"),
        "abuse": ("我跟你讲，{p}，听明白没有。", "{p}，这点事都办不好。"),
    },
    near_misses={
        "disclosure": ("您的通话记录可以在手机上查。", "我们正在路上，马上就到。", "这次会议的录像已经发给您了。"),
        "agent_id": ("您好，请问您现在方便接听电话吗？", "您好，这个是我们的公告。", "我市的营业厅周末也营业。"),
        "abuse": (
            "您可以去四楼的营业厅办理。",
            "这位师傅很有真本事。",
            "废物回收站在小区门口。",
            "您的脑子里有什么想法都可以说。",
            "工作很忙，活儿该做还得做。",
            "少数客户会遇到这个问题。",
        ),
    },
)


@functools.cache
def homophones() -> dict[str, tuple[str, ...]]:
    """Toneless pinyin -> the common characters (level-1 GB2312) pypinyin reads that way."""
    table: dict[str, list[str]] = defaultdict(list)
    for code in sorted(pinyin_dict):
        ch = chr(code)
        try:
            raw = ch.encode("gb2312")
        except UnicodeEncodeError:
            continue
        if len(raw) == 2 and 0xB0 <= raw[0] <= 0xD7:
            table[lazy_pinyin(ch)[0]].append(ch)
    return {syllable: tuple(chars) for syllable, chars in table.items()}


def plant_homophones(phrase: str, rng: random.Random) -> str | None:
    """The phrase with one character (two in phrases of 5 or more) replaced by a common
    character of the same toneless pinyin; None when no character of it has one."""
    table = homophones()
    options = [i for i, ch in enumerate(phrase) if len(table.get(lazy_pinyin(ch)[0], ())) > 1]
    if not options:
        return None
    chars = list(phrase)
    for i in rng.sample(options, min(len(options), 2 if len(phrase) >= 5 else 1)):
        chars[i] = rng.choice([c for c in table[lazy_pinyin(phrase[i])[0]] if c != phrase[i]])
    return "".join(chars)


def change_one_syllable(phrase: str, rng: random.Random) -> str:
    """The phrase with one character replaced by a common one of another syllable with the
    same first letter: a near-homophone (闭嘴 bi zui -> 闭醉? no: bi zui -> bi zhui, 闭追)."""
    table = homophones()
    i = rng.randrange(len(phrase))
    syllable = lazy_pinyin(phrase[i])[0]
    near = sorted(s for s in table if s != syllable and s[0] == syllable[0])
    return phrase[:i] + rng.choice(table[rng.choice(near)]) + phrase[i + 1 :]


ISSUE_CASES = {"agent_id": ("您好，公号幺三五七为您服务。", "您好，我是可服专员小王。")}  # seen on engine output


@dataclass(frozen=True)
class Case:
    kind: str
    text: str
    said: bool  # the rule phrase was said (with ASR errors); False: a harmless near miss


def cases(part: Part, variants: int = 3) -> Iterator[Case]:
    rng = random.Random(part.seed)
    for kind in KINDS:
        for phrase in part.phrases[kind]:
            for frame in part.frames[kind]:
                for _ in range(variants):
                    heard = plant_homophones(phrase, rng)
                    if heard is not None:
                        yield Case(kind, frame.format(p=heard), True)
            if len(phrase) <= 4:  # longer phrasings tolerate one syllable by design
                yield Case(kind, part.frames[kind][0].format(p=change_one_syllable(phrase, rng)), False)
        for text in part.near_misses[kind]:
            yield Case(kind, text, False)
    if part is DEV:
        for kind, texts in ISSUE_CASES.items():
            yield from (Case(kind, text, True) for text in texts)


def detected(engine: QAEngine, case: Case) -> bool:
    """Did the QA take the phrase as said: a disclosure counted, abuse reported?"""
    call = CallText("eval", "agent-1", 60.0, 2, (SegmentText("agent", 0, 0.5, 6.0, case.text),), {})
    found = any(f.rule_id == RULE[case.kind] for f in engine.evaluate(call).findings)
    return found if case.kind == "abuse" else not found


@dataclass(frozen=True)
class Score:
    positives: int
    negatives: int
    recall: float
    precision: float
    misses: tuple[str, ...]
    false_alarms: tuple[str, ...]


def score(part: Part, engine: QAEngine | None = None) -> dict[str, Score]:
    engine = engine or QAEngine(load_packs())
    out = {}
    for kind in KINDS:
        judged = [(c, detected(engine, c)) for c in cases(part) if c.kind == kind]
        tp = sum(c.said and d for c, d in judged)
        fp = sum(not c.said and d for c, d in judged)
        positives = sum(c.said for c, _ in judged)
        out[kind] = Score(
            positives,
            len(judged) - positives,
            tp / positives if positives else 1.0,
            tp / (tp + fp) if tp + fp else 1.0,
            tuple(c.text for c, d in judged if c.said and not d),
            tuple(c.text for c, d in judged if not c.said and d),
        )
    return out


def long_call(turns: int = 240) -> CallText:
    """A 20-minute Mandarin call: the eval's sentences and filler, alternating parties."""
    texts = [c.text for c in cases(DEV)] + ["我想查询一下我上个月的话费账单，麻烦您帮我看看。"] * 20
    segs = []
    for i in range(turns):
        role = "agent" if i % 2 == 0 else "customer"
        segs.append(SegmentText(role, i % 2, i * 5.0, i * 5.0 + 4.5, texts[i % len(texts)]))
    return CallText("long", "agent-1", turns * 5.0, 2, tuple(segs), {})


def timing(repeats: int = 5) -> float:
    """Median seconds of QAEngine.evaluate on the long call (a fresh engine each time: cold caches)."""
    call = long_call()
    times = []
    for _ in range(repeats):
        engine = QAEngine(load_packs())
        start = time.perf_counter()
        engine.evaluate(call)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timing", action="store_true", help="also time QAEngine.evaluate on a long Mandarin call")
    parser.add_argument("--show", action="store_true", help="print the misses and false alarms")
    args = parser.parse_args()
    for name, part in (("dev", DEV), ("held-out", HELD_OUT)):
        for kind, s in score(part).items():
            print(
                f"{name:8} {kind:10} positives {s.positives:3} negatives {s.negatives:2} "
                f"recall {s.recall:.3f} precision {s.precision:.3f}"
            )
            if args.show:
                for text in s.misses:
                    print(f"    miss: {text}")
                for text in s.false_alarms:
                    print(f"    false alarm: {text}")
    if args.timing:
        print(f"QAEngine.evaluate, {len(long_call().segments)}-segment Mandarin call: {timing():.3f} s (median of 5)")


if __name__ == "__main__":
    main()

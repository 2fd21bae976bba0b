"""The engine benchmark's corpus and its scoring: synthetic two-party calls with a log-normal
length mix (median 2 min, 45 s to 6 min), stereo 8 kHz G.711 (agent left, customer right) or,
for a share, the same conversation mixed to 16 kHz mono. English turns are spoken by espeak-ng,
Mandarin turns are the neural-voice clips in tests/fixtures/zh. Each call keeps its reference
text per channel, so any recogniser's output can be scored against it (English WER, Mandarin CER).

Used by tools.bench_engine, tools.soak_engine and tools.eval_qa; imports no torch.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import jiwer
import numpy as np
import soundfile as sf
import soxr

from pipeline.asr.text import normalize_en, normalize_zh

RATE = 8_000
ZH_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "zh"
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


@dataclass
class Call:
    wav: bytes
    duration_s: float
    language: str
    mono: bool
    refs: dict[int, list[str]] = field(default_factory=lambda: {0: [], 1: []})


VOICES = ("en-us", "en-us+m3", "en-gb+f2", "en-us+f3")


def espeak(text: str, voice: str = "en-us") -> np.ndarray:
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", "165", "--stdout", text],
                         check=True, capture_output=True).stdout
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(samples, rate, 16_000).astype(np.float32)


def zh_clips() -> list[tuple[str, np.ndarray]]:
    manifest = json.loads((ZH_DIR / "manifest.json").read_text())
    out = []
    for entry in manifest["clips"]:
        samples, rate = sf.read(ZH_DIR / entry["file"], dtype="float32")
        out.append((entry["text"], soxr.resample(samples, rate, 16_000).astype(np.float32)))
    return out


def _encode(audio: np.ndarray, mono: bool) -> bytes:
    """(frames, 2) float32 at 16 kHz -> 8 kHz G.711 u-law stereo WAV, or 16 kHz PCM mono."""
    buf = io.BytesIO()
    if mono:
        sf.write(buf, np.clip(audio.sum(axis=1), -1, 1), 16_000, format="WAV", subtype="PCM_16")
    else:
        sf.write(buf, soxr.resample(audio, 16_000, RATE), RATE, format="WAV", subtype="ULAW")
    return buf.getvalue()


def make_corpus(total_s: float, seed: int, mono_share: float = 0.25) -> list[Call]:
    """Two-party calls with log-normal lengths (median 2 min, 45 s..6 min) until total_s is reached."""
    rng = np.random.default_rng(seed)
    en = [(t, espeak(t, VOICES[i % len(VOICES)])) for i, t in enumerate(EN_POOL)]
    zh = zh_clips()
    calls, total = [], 0.0
    while total < total_s:
        target_s = float(np.clip(rng.lognormal(np.log(120), 0.6), 45, 360))
        language = "zh" if rng.random() < 0.4 else "en"
        mono = bool(rng.random() < mono_share)
        pool = zh if language == "zh" else en
        call = Call(b"", 0.0, language, mono)
        turns, t, channel = [], 0.5, 0
        order = list(rng.permutation(len(pool)))  # no sentence twice in a row of a call
        while t < target_s:
            if not order:
                order = list(rng.permutation(len(pool)))
            text, speech = pool[order.pop()]
            turns.append((channel, t, speech))
            call.refs[0 if mono else channel].append(text)
            t += speech.size / 16_000 + float(rng.uniform(0.3, 1.5))
            if rng.random() < 0.7:  # mostly turn-taking, sometimes the same party goes on
                channel = 1 - channel
        audio = np.zeros((int((t + 0.5) * 16_000), 2), np.float32)
        for ch, start_s, speech in turns:
            begin = int(start_s * 16_000)
            audio[begin : begin + speech.size, ch] += speech
        call.wav, call.duration_s = _encode(audio, mono), audio.shape[0] / 16_000
        calls.append(call)
        total += call.duration_s
    return calls


def save_corpus(calls: list[Call], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, call in enumerate(calls):
        (folder / f"call{i:03d}.wav").write_bytes(call.wav)
        entries.append({"file": f"call{i:03d}.wav", "duration_s": call.duration_s, "language": call.language,
                        "mono": call.mono, "refs": {str(ch): texts for ch, texts in call.refs.items()}})
    (folder / "corpus.json").write_text(json.dumps(entries, ensure_ascii=False, indent=1))


def load_corpus(folder: Path) -> list[Call]:
    return [Call((folder / e["file"]).read_bytes(), e["duration_s"], e["language"], e["mono"],
                 {int(ch): texts for ch, texts in e["refs"].items()})
            for e in json.loads((folder / "corpus.json").read_text())]


def score(calls: list[Call], hyps: list[dict[int, str]]) -> dict[str, float]:
    """English WER and Mandarin CER over call channels."""
    out = {}
    for lang, norm, metric in (("en", normalize_en, jiwer.wer), ("zh", normalize_zh, jiwer.cer)):
        refs, outs = [], []
        for call, hyp in zip(calls, hyps):
            if call.language != lang:
                continue
            for ch in (0, 1):
                if call.refs[ch]:
                    refs.append(norm(" ".join(call.refs[ch])))
                    outs.append(norm(hyp.get(ch, "")))
        if refs:
            out["wer_en" if lang == "en" else "cer_zh"] = float(metric(refs, outs))
    return out

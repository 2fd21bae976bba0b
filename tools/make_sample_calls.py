"""Make the bundled sample calls: short synthetic stereo 8 kHz µ-law calls, agent left, customer right.

Each turn is spoken by espeak-ng (Debian package) with a different voice per party,
resampled to 8 kHz and placed on its party's channel with pauses between turns,
the way call-centre recorders store calls. Run:

    python tools/make_sample_calls.py tests/fixtures/calls

The scripts exercise the default QA pack: a clean call, a missing recording notice,
mis-selling, a card number spoken by the customer, and a long silence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

RATE = 8000
VOICES = {"agent": "en-us+f2", "customer": "en-us+m3"}

CALLS: dict[str, list[tuple[str, str]]] = {
    "sample-01-clean": [
        ("agent", "Thank you for calling, my name is Anna. This call is recorded for quality purposes."),
        ("customer", "Hello, I would like to check the balance of my credit card."),
        ("agent", "Of course. Your current balance is two hundred dollars."),
        ("customer", "Great, thank you very much."),
        ("agent", "Is there anything else I can help you with today? Have a nice day."),
    ],
    "sample-02-no-notice": [
        ("agent", "Hello, my name is Mark, how can I help you?"),
        ("customer", "I want to raise the limit on my card."),
        ("agent", "I can do that for you right now."),
        ("customer", "Thanks, goodbye."),
    ],
    "sample-03-mis-selling": [
        ("agent", "Hello, my name is Lisa. This call is recorded for quality purposes."),
        ("customer", "Tell me about your investment product."),
        ("agent", "This fund has guaranteed returns and there is no risk at all."),
        ("customer", "That sounds good, I will think about it."),
    ],
    "sample-04-card-number": [
        ("agent", "Good morning, my name is Tom. This call is recorded for quality purposes."),
        ("customer", "My card number is. four. five. three. nine. one. four. eight. eight. one. two. three. four. five. six. seven. five."),
        ("agent", "Thank you, please do not read your card number on the phone. How else can I help?"),
        ("customer", "That is all, thank you."),
    ],
    "sample-05-long-silence": [
        ("agent", "Hello, my name is Anna. This call is recorded for quality purposes."),
        ("customer", "I lost my card yesterday."),
        ("agent", "I am blocking your card now."),
        ("pause", "20"),
        ("agent", "Your card is blocked and a new one is on its way."),
        ("customer", "Thank you."),
    ],
}


def speak(text: str, voice: str) -> np.ndarray:
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", tmp.name, text], check=True)
        audio, rate = sf.read(tmp.name, dtype="float32")
    return soxr.resample(audio, rate, RATE).astype(np.float32)


def make_call(turns: list[tuple[str, str]]) -> tuple[np.ndarray, list[dict[str, object]]]:
    pieces: list[tuple[int, np.ndarray]] = []
    script = []
    cursor = int(0.5 * RATE)
    for role, text in turns:
        if role == "pause":
            cursor += int(float(text) * RATE)
            continue
        audio = speak(text, VOICES[role])
        channel = 0 if role == "agent" else 1
        pieces.append((channel, np.pad(audio, (cursor, 0))))
        script.append({"role": role, "start_s": round(cursor / RATE, 2),
                       "end_s": round((cursor + len(audio)) / RATE, 2), "text": text})
        cursor += len(audio) + int(0.6 * RATE)
    stereo = np.zeros((cursor + RATE // 2, 2), dtype=np.float32)
    for channel, audio in pieces:
        stereo[: len(audio), channel] += audio
    return stereo, script


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, turns in CALLS.items():
        stereo, script = make_call(turns)
        sf.write(out_dir / f"{name}.wav", stereo, RATE, subtype="ULAW")
        manifest[name] = {"duration_s": round(len(stereo) / RATE, 2), "turns": script}
        print(f"{name}.wav  {len(stereo) / RATE:5.1f} s")
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/calls"))

"""Test speech: English spoken by espeak-ng, Mandarin neural-voice clips from tests/fixtures/zh."""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

ZH_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "zh"

# Call-centre sentences without digits or names, so scoring needs no number normalisation.
EN_SENTENCES = (
    "Thank you for calling customer service, how can I help you today?",
    "I would like to check the balance of my savings account.",
    "Please hold the line while I look up your order.",
    "Your package was shipped yesterday and should arrive tomorrow afternoon.",
    "This call may be recorded for quality and training purposes.",
    "I am sorry for the inconvenience, let me fix that for you.",
    "Could you please confirm your email address?",
    "The payment did not go through because the card has expired.",
)


@dataclass(frozen=True)
class Clip:
    text: str
    samples: np.ndarray  # float32 mono
    sample_rate: int


def speak(text: str, rate: int = 16_000, voice: str = "en-us") -> np.ndarray:
    """espeak-ng speech of text as float32 mono at ``rate``."""
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", "160", "--stdout", text], check=True, capture_output=True
    ).stdout
    samples, native = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(samples, native, rate).astype(np.float32)


def english_clips(rate: int = 16_000) -> list[Clip]:
    return [Clip(t, speak(t, rate), rate) for t in EN_SENTENCES]


def mandarin_clips() -> list[Clip]:
    manifest = json.loads((ZH_DIR / "manifest.json").read_text())
    clips = []
    for entry in manifest["clips"]:
        samples, rate = sf.read(ZH_DIR / entry["file"], dtype="float32")
        clips.append(Clip(entry["text"], samples, rate))
    return clips


def pad(samples: np.ndarray, rate: int, before_s: float, after_s: float) -> np.ndarray:
    return np.concatenate(
        [np.zeros(int(before_s * rate), np.float32), samples, np.zeros(int(after_s * rate), np.float32)]
    )

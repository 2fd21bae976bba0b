"""Render a planned benchmark call (tools/bench_corpus.py's CallPlan) into WAV bytes.

Speech: espeak-ng for English (voice, rate, pitch of the party), the Mandarin fixture clips
pitch-shifted by sox; then the party's tempo (sox ``tempo`` or ``speed``). Each turn is trimmed
to its speech and set to -20 dBFS RMS, the quiet party lower by its drawn dB; hold music, noise,
band-limiting and the codec follow, in that order, as a telephone line would add them. Everything
random comes from the plan's seed, so a plan renders to the same bytes every time.
"""

from __future__ import annotations

import functools
import io
import subprocess

import numpy as np
import soundfile as sf
import soxr

from tools.bench_corpus import RATE, SPEECH_RMS_DBFS, SR, Call, CallPlan, TurnPlan, Voice, espeak, zh_clips


def sox(samples: np.ndarray, *effects: str) -> np.ndarray:
    """float32 mono at 16 kHz through sox effects, back at 16 kHz."""
    raw = ["-t", "f32", "-r", str(SR), "-c", "1"]
    out = subprocess.run(
        ["sox", "-q", *raw, "-", *raw, "-", *effects, "rate", str(SR)],
        input=samples.astype(np.float32).tobytes(),
        check=True,
        capture_output=True,
    ).stdout
    return np.frombuffer(out, np.float32).copy()


@functools.lru_cache(maxsize=1)
def _zh() -> list[tuple[str, np.ndarray]]:
    return zh_clips()


def _db(db: float) -> float:
    return float(10 ** (db / 20))


def speech(turn: TurnPlan, voice: Voice) -> np.ndarray:
    """One turn's speech at 16 kHz, trimmed to where it is audible, at -20 dBFS RMS."""
    if turn.clip >= 0:
        audio = sox(_zh()[turn.clip][1], "pitch", str(voice.cents))
    else:
        audio = espeak(turn.text, voice.espeak, voice.wpm, voice.pitch)
    if voice.tempo != 1.0:
        audio = sox(audio, voice.tempo_effect, f"{voice.tempo:.2f}")
    loud = np.flatnonzero(np.abs(audio) > 0.02 * np.abs(audio).max())
    audio = audio[loud[0] : loud[-1] + 1]
    return audio * np.float32(_db(SPEECH_RMS_DBFS) / max(float(np.sqrt(np.mean(audio**2))), 1e-9))


def hold_music(duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """A synthetic tone sequence: notes of a pentatonic scale, 0.25-0.5 s each, with two overtones."""
    out = []
    for _ in range(int(duration_s / 0.25) + 1):
        f0 = 261.6 * 2 ** (int(rng.choice([0, 2, 4, 7, 9, 12, 14])) / 12)
        t = np.arange(int(SR * float(rng.uniform(0.25, 0.5)))) / SR
        note = sum(a * np.sin(2 * np.pi * f0 * k * t) for k, a in ((1, 1.0), (2, 0.4), (3, 0.2)))
        out.append(note * np.minimum(1, np.minimum(t, t[::-1]) / 0.02))
    tone = np.concatenate(out)[: int(duration_s * SR)]
    return (tone * _db(SPEECH_RMS_DBFS - 6) / np.sqrt(np.mean(tone**2))).astype(np.float32)


def line_noise(frames: int, cond: dict, rng: np.random.Generator) -> np.ndarray:
    """White noise or mains hum (fundamental, 3rd and 5th harmonics over faint hiss) at the drawn SNR."""
    level = _db(SPEECH_RMS_DBFS - cond["snr_db"])
    hiss = rng.standard_normal(frames)
    if cond["noise"] == "line":
        return (hiss * level).astype(np.float32)
    t = np.arange(frames) / SR
    hum = sum(a * np.sin(2 * np.pi * cond["hum_hz"] * k * t) for k, a in ((1, 1.0), (3, 0.5), (5, 0.25)))
    hum = hum / np.sqrt(np.mean(hum**2)) + 0.3 * hiss
    return (hum * level).astype(np.float32)


def _layout(plan: CallPlan) -> tuple[list[tuple[int, float, np.ndarray]], dict[int, list[tuple[float, float]]]]:
    """Where each turn (and hold music, as party -1) sits in call time."""
    rng = np.random.default_rng([plan.seed, 1])
    cond = plan.conditions
    placed, spans, t = [], {0: [], 1: []}, 0.5
    for i, turn in enumerate(plan.turns):
        audio = speech(turn, plan.voices[turn.party])
        if cond["quiet_party"] == turn.party:
            audio = audio * np.float32(_db(-cond["quiet_db"]))
        t += turn.gap_s
        placed.append((turn.party, t, audio))
        spans[turn.party].append((round(t, 3), round(t + audio.size / SR, 3)))
        t += audio.size / SR
        if i == plan.hold_after:
            hold_s = float(rng.uniform(8, 20))
            placed.append((-1, t + 0.5, hold_music(hold_s, rng)))
            t += hold_s + 1.0
    return placed, spans


def _encode(audio: np.ndarray, codec: str) -> bytes:
    """(frames, channels) float32 at 16 kHz in the call's codec."""
    buf = io.BytesIO()
    if codec == "pcm16k":
        sf.write(buf, audio, SR, format="WAV", subtype="PCM_16")
        return buf.getvalue()
    narrow = soxr.resample(audio, SR, RATE).astype(np.float32)
    if codec == "gsm" and narrow.shape[1] == 2:  # GSM 6.10 WAV is mono: code each channel, keep PCM
        narrow = np.stack([_gsm_round_trip(narrow[:, ch]) for ch in (0, 1)], axis=1)
        sf.write(buf, narrow, RATE, format="WAV", subtype="PCM_16")
    else:
        sf.write(buf, narrow, RATE, format="WAV", subtype={"ulaw": "ULAW", "alaw": "ALAW", "gsm": "GSM610"}[codec])
    return buf.getvalue()


def _gsm_round_trip(samples: np.ndarray) -> np.ndarray:
    buf = io.BytesIO()
    sf.write(buf, samples, RATE, format="WAV", subtype="GSM610")
    buf.seek(0)
    coded, _ = sf.read(buf, dtype="float32")
    return coded[: samples.size]


def render(plan: CallPlan) -> Call:
    """The planned call as WAV bytes with its references and turn times."""
    cond = plan.conditions
    mono = cond["layout"] == "mono"
    placed, spans = _layout(plan)
    frames = int((max(s + a.size / SR for _, s, a in placed) + 0.5) * SR)
    audio = np.zeros((frames, 2), np.float32)
    for party, start_s, samples in placed:
        begin = int(start_s * SR)
        audio[begin : begin + samples.size, max(party, 0)] += samples
    if mono:
        audio = audio.sum(axis=1, keepdims=True)
    rng = np.random.default_rng([plan.seed, 2])
    if cond["noise"] != "none":
        for ch in range(audio.shape[1]):
            audio[:, ch] += line_noise(frames, cond, rng)
    if cond["band"] == "telephone":
        audio = np.stack([sox(audio[:, ch], "sinc", "300-3400")[:frames] for ch in range(audio.shape[1])], axis=1)
    audio /= max(1.0, float(np.abs(audio).max()) / 0.95)  # no clipping; relative levels kept
    refs: dict[int, list[str]] = {0: [], 1: []}
    for turn in plan.turns:
        refs[0 if mono else turn.party].append(turn.text)
    return Call(_encode(audio, cond["codec"]), frames / SR, plan.language, mono, refs, spans, dict(cond))

"""Word-timing accuracy and cost on synthetic calls whose every word time is known.

Each English word is spoken on its own by espeak-ng, trimmed to its voiced samples and joined
with short gaps, so each word's true start and end are exact. Two parties take turns; the call
is written as 8 kHz u-law stereo (one party per channel) and as 16 kHz mono (both summed), and
transcribed with word times on every segment ("all"). Words are matched to the truth by text
(difflib over normalised words); the report gives the absolute start error (median, p95) over
matched words. Mandarin: the fixture clips are whole sentences, so only each clip's first
character has a known start (its clip's voiced start): reported at that granularity.

Cost: CPU seconds of ``transcribe_batch`` with word timing off, "pii" and "all".

    python -m tools.eval_words [--seed 7 | --seeds 7,8,9] [--out words.json]
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from pipeline.asr.audio import CallAudio
from pipeline.asr.engine import Engine, EngineOptions

RATE = 16_000
VOICED = 0.02  # a sample louder than this is speech (espeak's silence is digital zero)
AGENT = (
    "Thank you for calling, may I have the card number please?",
    "Thank you, and the security code on the back?",
    "Perfect, the payment of forty dollars is now complete.",
)
CUSTOMER = (
    "Sure, my card number is four five three two zero one five one one two eight three zero three six six",
    "The code is seven three one",
    "Great, thanks a lot for your help today.",
)
DIGITS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())}
ZH_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "zh"


def speak_word(word: str, rng: np.random.Generator) -> np.ndarray:
    wav = subprocess.run(
        ["espeak-ng", "-v", "en-us", "-s", "165", "--stdout", word], check=True, capture_output=True
    ).stdout
    samples, native = sf.read(io.BytesIO(wav), dtype="float32")
    samples = soxr.resample(samples, native, RATE).astype(np.float32)
    loud = np.flatnonzero(np.abs(samples) > VOICED)
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


def sentence(text: str, rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    """Words joined with 40-120 ms gaps -> audio and (start_s, end_s, word) from its start."""
    parts, truth, at = [], [], 0
    for word in text.split():
        clean = re.sub(r"[^\w']", "", word)
        audio = speak_word(clean, rng)
        truth.append((at / RATE, (at + len(audio)) / RATE, clean.lower()))
        gap = np.zeros(int(rng.uniform(0.04, 0.12) * RATE), dtype=np.float32)
        parts += [audio, gap]
        at += len(audio) + len(gap)
    return np.concatenate(parts), truth


def english_call(rng: np.random.Generator) -> tuple[np.ndarray, list[list[tuple[float, float, str]]]]:
    """(2, frames) turns agent, customer, ... with 0.6-1 s between turns; per-channel truths."""
    total = 0.5
    chunks, truths = [], [[], []]
    for a, c in zip(AGENT, CUSTOMER, strict=True):
        for ch, text in ((0, a), (1, c)):
            audio, truth = sentence(text, rng)
            chunks.append((ch, int(total * RATE), audio))
            truths[ch] += [(s + total, e + total, w) for s, e, w in truth]
            total += len(audio) / RATE + rng.uniform(0.6, 1.0)
    out = np.zeros((2, int((total + 0.5) * RATE)), dtype=np.float32)
    for ch, at, audio in chunks:
        out[ch, at : at + len(audio)] = audio * 0.6
    return out, truths


def norm_words(text: str) -> list[str]:
    return [DIGITS.get(w, w) for w in re.sub(r"[^\w' ]", " ", text.lower()).split()]


def match_errors(words: list[tuple[float, float, str]], truth: list[tuple[float, float, str]]) -> list[float]:
    """Start errors of hypothesis words matched to true words by normalised text. A written
    number ("4532") against spoken digits is matched through its first digit."""
    hyp = []
    for s, _, w in words:
        for piece in norm_words(w):
            hyp.append((s, piece[0] if piece.isdigit() else piece))
            s = float("nan")  # only a word's first piece has a known start
    ref = [(s, DIGITS.get(w, w)) for s, _, w in truth]
    sm = difflib.SequenceMatcher(a=[w for _, w in hyp], b=[w for _, w in ref], autojunk=False)
    errors = []
    for block in sm.get_matching_blocks():
        for k in range(block.size):
            h, r = hyp[block.a + k][0], ref[block.b + k][0]
            if not np.isnan(h):
                errors.append(abs(h - r))
    return errors


def to_ulaw_8k(stereo: np.ndarray) -> np.ndarray:
    """The 8 kHz u-law recording as the engine would read it back (float32, (2, frames))."""
    buf = io.BytesIO()
    sf.write(buf, soxr.resample(stereo.T, RATE, 8000), 8000, format="WAV", subtype="ULAW")
    buf.seek(0)
    frames, _ = sf.read(buf, dtype="float32", always_2d=True)
    return np.ascontiguousarray(frames.T)


def summary(errors: list[float]) -> dict[str, float]:
    e = np.array(errors) * 1000
    return {"n": len(e), "median_ms": round(float(np.median(e)), 1), "p95_ms": round(float(np.percentile(e, 95)), 1)}


def mandarin_call() -> tuple[np.ndarray, list[float]]:
    """The fixture clips joined on one channel with 0.8 s gaps; each clip's voiced start."""
    manifest = json.loads((ZH_DIR / "manifest.json").read_text())
    parts, starts, at = [np.zeros(int(0.5 * RATE), dtype=np.float32)], [], int(0.5 * RATE)
    for entry in manifest["clips"][:6]:
        samples, rate = sf.read(ZH_DIR / entry["file"], dtype="float32")
        samples = soxr.resample(samples, rate, RATE).astype(np.float32) if rate != RATE else samples
        loud = np.flatnonzero(np.abs(samples) > VOICED)
        starts.append((at + loud[0]) / RATE)
        gap = np.zeros(int(0.8 * RATE), dtype=np.float32)
        parts += [samples, gap]
        at += len(samples) + len(gap)
    return np.concatenate(parts)[None, :], starts


def cpu_run(engine: Engine, calls: list[CallAudio]) -> tuple[float, list]:
    t0 = time.process_time()
    out = engine.transcribe_batch(calls)
    return time.process_time() - t0, out


def evaluate(engines: dict[str, Engine], seed: int) -> dict[str, object]:
    """One seed's synthetic calls through the three engines -> its report."""
    rng = np.random.default_rng(seed)
    stereo, truths = english_call(rng)
    mono = stereo.sum(axis=0, keepdims=True)
    mono_truth = sorted(truths[0] + truths[1])
    zh, zh_starts = mandarin_call()
    calls = {
        "en_8k_ulaw_stereo": CallAudio("en8", to_ulaw_8k(stereo), 8000, ("agent", "customer")),
        "en_16k_mono": CallAudio("en16", mono, RATE, ("mixed",)),
        "zh_16k_mono": CallAudio("zh16", zh.astype(np.float32), RATE, ("mixed",)),
    }
    report: dict[str, object] = {}
    cost = {}
    for mode, engine in engines.items():
        seconds, out = cpu_run(engine, list(calls.values()))
        cost[mode] = round(seconds, 2)
        if mode == "all":
            results = dict(zip(calls, out, strict=True))
    report["cpu_s"] = cost
    report["cost_ratio"] = {m: round(cost[m] / cost["off"], 3) for m in ("pii", "all")}
    words8 = [
        [w for s in results["en_8k_ulaw_stereo"].segments if s.channel == ch for w in (s.words or ())] for ch in (0, 1)
    ]
    report["en_8k_ulaw_stereo"] = summary(match_errors(words8[0], truths[0]) + match_errors(words8[1], truths[1]))
    words16 = [w for s in results["en_16k_mono"].segments for w in (s.words or ())]
    report["en_16k_mono"] = summary(match_errors(words16, mono_truth))
    zh_first = []
    zh_words = sorted(w[0] for s in results["zh_16k_mono"].segments for w in (s.words or ()))
    for start in zh_starts:  # the first word timed after the middle of the 0.8 s gap before the clip
        later = [t for t in zh_words if t > start - 0.4]
        zh_first.append(abs(later[0] - start) if later else float("nan"))
    report["zh_16k_mono_clip_starts"] = summary(zh_first)
    report["true_words"] = {"en_stereo": len(truths[0]) + len(truths[1]), "zh_clips": len(zh_starts)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seeds", help="comma-separated seeds, one report each (overrides --seed)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    base = EngineOptions(device="cpu", word_timestamps="off")
    engines = {mode: Engine.load(replace(base, word_timestamps=mode)) for mode in ("off", "pii", "all")}
    warm = CallAudio(
        "warm", english_call(np.random.default_rng(seeds[0]))[0].sum(axis=0, keepdims=True), RATE, ("mixed",)
    )
    for engine in engines.values():  # warm-up: first-use costs out of the timing
        engine.transcribe(warm)
    reports = []
    for seed in seeds:
        report = evaluate(engines, seed)
        print(json.dumps(report if len(seeds) == 1 else {"seed": seed, **report}, indent=1), flush=True)
        reports.append(report)
    if args.out:
        args.out.write_text(
            json.dumps(reports[0] if len(seeds) == 1 else dict(zip(map(str, seeds), reports)), indent=1)
        )


if __name__ == "__main__":
    main()

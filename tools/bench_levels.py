"""Accuracy on quiet calls: the engine with and without raising quiet calls to speech level.

The engine benchmark's corpus (tools/bench_corpus.py: stereo 8 kHz G.711 u-law and 16 kHz PCM
mono, English and Mandarin) is played again at lower levels, each call re-encoded in its own
format after the gain (so u-law's coarser steps at low levels are in the audio, as a quiet line
records them). Both configurations transcribe the same audio in one process; the first pass
only (no number pass), greedy, CPU.

  python -m tools.bench_levels --minutes 6 --seed 81 --levels 0,-20,-30,-40
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from dataclasses import replace

import numpy as np
import soundfile as sf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.asr import Engine, EngineOptions, load_call_audio  # noqa: E402
from tools.bench_corpus import Call, make_corpus, score  # noqa: E402

ROLES = {0: "agent", 1: "customer"}


def at_level(call: Call, gain_db: float) -> bytes:
    """The call's recording ``gain_db`` down, in its own format and sample coding."""
    info = sf.info(io.BytesIO(call.wav))
    audio, rate = sf.read(io.BytesIO(call.wav), dtype="float32", always_2d=True)
    buf = io.BytesIO()
    sf.write(buf, audio * np.float32(10 ** (gain_db / 20)), rate, format=info.format, subtype=info.subtype)
    return buf.getvalue()


def peak_dbfs(wav: bytes) -> float:
    audio, _ = sf.read(io.BytesIO(wav), dtype="float32", always_2d=True)
    return 20 * np.log10(max(float(np.abs(audio).max()), 1e-9))


def transcribe(engine: Engine, wavs: list[bytes]) -> tuple[list[dict[int, str]], float]:
    t0 = time.perf_counter()
    results = engine.transcribe_batch([load_call_audio(w, roles=ROLES, call_id=f"c{i}") for i, w in enumerate(wavs)])
    hyps = [{ch: " ".join(s.text for s in r.segments if s.channel == ch) for ch in (0, 1)} for r in results]
    return hyps, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=81)
    parser.add_argument("--levels", default="0,-20,-30,-40", help="gains in dB, comma-separated")
    args = parser.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    calls = make_corpus(args.minutes * 60, args.seed)
    audio_s = sum(c.duration_s for c in calls)
    peaks = [peak_dbfs(c.wav) for c in calls]
    print(f"{len(calls)} calls, {audio_s / 60:.1f} min; peaks as made {min(peaks):.1f} to {max(peaks):.1f} dBFS")
    base = EngineOptions(number_languages=())
    engines = {"as recorded": Engine.load(replace(base, raise_quiet_calls=False)),
               "raised": Engine.load(replace(base, raise_quiet_calls=True))}
    rows = []
    for gain in levels:
        wavs = [at_level(c, gain) if gain else c.wav for c in calls]
        for name, engine in engines.items():
            hyps, wall_s = transcribe(engine, wavs)
            rows.append((gain, name, score(calls, hyps), wall_s))
            print(f"  {gain:+5.0f} dB  {name:12s} {rows[-1][2]}  {wall_s:.0f} s", flush=True)
    print("\ngain dB | config      | WER en | CER zh | wall s")
    for gain, name, s, wall_s in rows:
        print(f"{gain:+7.0f} | {name:11s} | {s.get('wer_en', float('nan')):.3f}  | "
              f"{s.get('cer_zh', float('nan')):.3f}  | {wall_s:.0f}")


if __name__ == "__main__":
    main()

"""Word-timing accuracy and cost on synthetic calls whose every word time is known (issue 31).

The calls are tools/word_calls.py's: each English word, Mandarin clause and digit synthesised on
its own and joined, two parties with their own voices and levels, line noise; ``--part dev`` calls
come from the templates, voices and clips tuned on, ``--part check`` from the held-out ones. Each
call is transcribed twice, as 8 kHz u-law stereo (one party per channel) and as 16 kHz mono (both
summed), by the shipped engine with word times on every segment ("all"). Recognised words are
matched to the true units by their tokens (difflib); reported per language and layout: the
absolute start error's median and 95th percentile over matched words (target <= 60 / 200 ms), the
same over digits only (what audio redaction cuts), and how many known starts were matched.

Cost: CPU seconds of ``transcribe_batch`` over all calls with word times off, "pii" and "all".

    python -m tools.eval_words --part check --seeds 1,2 [--en 4 --zh 2] [--out words.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pipeline.asr.audio import CallAudio
from pipeline.asr.engine import Engine
from pipeline.config import Settings
from pipeline.run.shipped_engine import load_engine
from tools.word_calls import RATE, Word, WordCall, calls, known_starts, match_errors, matched_starts, to_ulaw_8k

LAYOUTS = ("8k_ulaw_stereo", "16k_mono")


def layouts(call: WordCall) -> dict[str, tuple[CallAudio, list[list[Word]]]]:
    """The call as the engine reads each layout, with the truth per channel of that layout."""
    mono_truth = sorted(call.truth[0] + call.truth[1])
    return {
        "8k_ulaw_stereo": (
            CallAudio(f"{call.name}-8k", to_ulaw_8k(call.audio), 8000, ("agent", "customer")),
            [call.truth[0], call.truth[1]],
        ),
        "16k_mono": (
            CallAudio(f"{call.name}-16k", call.audio.sum(axis=0, keepdims=True), RATE, ("mixed",)),
            [mono_truth],
        ),
    }


def summary(errors: list[float], known: int) -> dict[str, float]:
    e = np.array(errors) * 1000
    if not e.size:
        return {"n": 0, "known": known}
    return {
        "n": int(e.size),
        "known": known,
        "median_ms": round(float(np.median(e)), 1),
        "p95_ms": round(float(np.percentile(e, 95)), 1),
        "over_200ms": int((e > 200).sum()),
    }


def words_of(transcript, channel: int | None) -> list[Word]:
    return [w for s in transcript.segments if channel is None or s.channel == channel for w in (s.words or ())]


def evaluate(engines: dict[str, Engine], items: list[WordCall], worst: int = 0) -> dict[str, object]:
    inputs, truths = [], []
    for call in items:
        for layout, (audio, truth) in layouts(call).items():
            inputs.append(audio)
            truths.append((call.language, layout, truth))
    cost: dict[str, float] = {}
    for mode, engine in engines.items():
        t0 = time.process_time()
        out = engine.transcribe_batch(inputs)
        cost[mode] = round(time.process_time() - t0, 2)
        if mode == "all":
            results = out
    errors: dict[tuple[str, str, bool], list[float]] = {}
    known: dict[tuple[str, str, bool], int] = {}
    for (language, layout, truth), transcript in zip(truths, results, strict=True):
        for digits in (False, True):
            key = (language, layout, digits)
            for ch, channel_truth in enumerate(truth):
                words = words_of(transcript, ch if len(truth) == 2 else None)
                errors.setdefault(key, []).extend(match_errors(words, channel_truth, digits))
                known[key] = known.get(key, 0) + known_starts(channel_truth, digits)
                if worst and not digits:
                    _print_worst(transcript.call_id, words, channel_truth, worst)
    report: dict[str, object] = {
        f"{lang}_{layout}{'_digits' if digits else ''}": summary(errs, known[(lang, layout, digits)])
        for (lang, layout, digits), errs in sorted(errors.items())
    }
    report["cpu_s"] = cost
    if "off" in cost:
        report["cost_ratio"] = {m: round(cost[m] / cost["off"], 3) for m in cost if m != "off"}
    return report


def _print_worst(name: str, words: list[Word], truth: list[Word], n: int) -> None:
    """The n matched tokens with the largest start error over 200 ms (for development)."""
    pairs = sorted(matched_starts(words, truth), key=lambda p: -abs(p[0] - p[1]))
    for h, r, tok in pairs[:n]:
        if abs(h - r) > 0.2:
            print(f"  {name}: {tok!r} at {h:.2f} s, truly {r:.2f} s ({(h - r) * 1000:+.0f} ms)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("dev", "check"), default="dev")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds, one report each")
    parser.add_argument("--en", type=int, default=4, help="English calls per seed")
    parser.add_argument("--zh", type=int, default=2, help="Mandarin calls per seed")
    parser.add_argument("--modes", default="off,pii,all", help="word-time modes to run (cost); 'all' is scored")
    parser.add_argument("--worst", type=int, default=0, help="print each call's N worst-timed words")
    parser.add_argument("--out")
    args = parser.parse_args()
    cfg = Settings()
    engines = {
        mode: load_engine(cfg.model_copy(update={"asr_word_timestamps": mode}), "cpu") for mode in args.modes.split(",")
    }
    warm = calls(args.part, 0, 1, 0)[0]
    for engine in engines.values():  # first-use costs out of the timing
        engine.transcribe(layouts(warm)["16k_mono"][0])
    reports = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        report = evaluate(engines, calls(args.part, seed, args.en, args.zh), args.worst)
        print(json.dumps({"part": args.part, "seed": seed, **report}), flush=True)
        reports[str(seed)] = report
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"part": args.part, "reports": reports}, fh, indent=1)


if __name__ == "__main__":
    main()

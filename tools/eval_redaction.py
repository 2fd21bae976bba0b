"""Audio redaction recall and precision on synthetic calls whose every word time is known, run as a
user runs it: ``callqa run IN --out OUT --redact-audio``, then ``callqa run`` again on the copies.

The calls are tools/word_calls.py's (``--part dev`` to tune on, ``check`` held out): every English
word, Mandarin clause and digit synthesised on its own and joined, so each unit's true start and end
are exact; the customer reads a Luhn-valid card number and a security code (English) or a card
number or resident ID (Mandarin), digit by digit. Two layouts per call: 8 kHz u-law stereo (the
customer on the right channel) and 16 kHz mono (both parties summed).

Figures per call, from the redacted spans the transcript carries (each cut with the 80 ms guard,
on the channels ``pipeline.stages.audio_redaction.channels_for`` names):
  recall     share of the true audio time of the planted numbers' digits that is cut (target >=
             99.5 %), also per number
  collateral share of the other units' true audio time that is cut (target <= 2 %); digits the
             templates say (an account or reference number) count on neither side
  pii_after  PII spans of a kind callqa finds when it transcribes the redacted copy again (target 0;
             the backstop's ``unclassified_number`` spans name no kind and are not counted)

    python -m tools.eval_redaction --part check --seeds 1,2 [--en 2 --zh 1] [--out redaction.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.stages.audio_redaction import GUARD_S  # noqa: E402
from pipeline.stages.redaction import BACKSTOP_TYPE  # noqa: E402
from tools.word_calls import RATE, calls, is_digit, to_ulaw_8k  # noqa: E402

Word = tuple[float, float, str]


def callqa_run(inputs: Path, out: Path) -> list[dict]:
    """``callqa run`` over a folder (QA on, audio redaction on); its transcripts by file name."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "run", str(inputs), "--out", str(out), "--redact-audio"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines() if line.strip()]


def cut_intervals(transcript: dict, channels: int) -> list[list[tuple[float, float]]]:
    """Per channel, the intervals the copy is cut over (each PII span plus its guard)."""
    roles = {"agent": 0, "customer": 1}
    out: list[list[tuple[float, float]]] = [[] for _ in range(channels)]
    for span in transcript.get("pii", []):
        chans = [roles[span["role"]]] if channels == 2 and span["role"] in roles else range(channels)
        for ch in chans:
            out[ch].append((span["start_s"] - GUARD_S, span["end_s"] + GUARD_S))
    return out


def covered_s(words: list[Word], cuts: list[tuple[float, float]]) -> float:
    """Seconds of the words' audio inside any cut (cuts may overlap: measured on a 1 ms grid)."""
    if not words:
        return 0.0
    end = max(e for _, e, _ in words) + 1
    grid = np.zeros(int(end * 1000) + 1, dtype=bool)
    for lo, hi in cuts:
        grid[max(0, int(lo * 1000)) : max(0, int(hi * 1000))] = True
    return sum(float(grid[int(s * 1000) : int(e * 1000)].sum()) / 1000 for s, e, _ in words)


def by_condition(files: dict[str, dict]) -> dict[str, dict]:
    """Per language and layout ("en 8k-ulaw-stereo"): files, numbers fully cut, mean recall per
    file, mean and worst collateral."""
    groups: dict[str, list[dict]] = {}
    for name, r in files.items():
        language, layout = name.split("-", 1)[0], name.split("-", 4)[-1].removesuffix(".wav")
        groups.setdefault(f"{language} {layout}", []).append(r)
    return {
        key: {
            "files": len(rs),
            "numbers_fully_cut": f"{sum(x == 1.0 for r in rs for _, x in r['recall_per_number'])}"
            f"/{sum(len(r['recall_per_number']) for r in rs)}",
            "mean_recall": round(float(np.mean([r["recall"] for r in rs if r["recall"] is not None])), 4),
            "mean_collateral": round(float(np.mean([r["collateral"] for r in rs])), 4),
            "max_collateral": max(r["collateral"] for r in rs),
        }
        for key, rs in sorted(groups.items())
    }


def _kinds_found(transcript: dict) -> int:
    """PII spans of a kind (a finding QA would judge); ``unclassified_number`` spans (a number the
    backstop masked, or one said but not heard, pipeline.numbers.unheard) name none: a copy's cut
    answer to a question for the code is still an answer."""
    return sum(span["type"] != BACKSTOP_TYPE for span in transcript.get("pii", []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("dev", "check"), default="dev")
    parser.add_argument("--seeds", default="1", help="comma-separated; each makes its own calls")
    parser.add_argument("--en", type=int, default=2, help="English calls per seed")
    parser.add_argument("--zh", type=int, default=1, help="Mandarin calls per seed")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--work", type=Path, help="keep the calls, transcripts and copies here")
    args = parser.parse_args()
    report: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.work or Path(scratch)
        inputs = Path(tmp) / "calls"
        inputs.mkdir(parents=True)
        truths: dict[str, list[list[Word]]] = {}
        numbers: dict[str, list[tuple[int, tuple[Word, ...]]]] = {}
        for seed in (int(s) for s in args.seeds.split(",")):
            for call in calls(args.part, seed, args.en, args.zh):
                stereo, mono = f"{call.name}-8k-ulaw-stereo.wav", f"{call.name}-16k-mono.wav"
                sf.write(inputs / stereo, to_ulaw_8k(call.audio).T, 8000, subtype="ULAW")
                sf.write(inputs / mono, np.clip(call.audio.sum(axis=0), -1, 1), RATE, subtype="PCM_16")
                truths[stereo], numbers[stereo] = list(call.truth), list(call.numbers)
                truths[mono], numbers[mono] = [sorted(call.truth[0] + call.truth[1])], [(0, n) for _, n in call.numbers]
        first = callqa_run(inputs, Path(tmp) / "out")
        again = {
            Path(t["object"]["key"]).name: t for t in callqa_run(Path(tmp) / "out" / "redacted", Path(tmp) / "again")
        }
        for t in first:
            name = Path(t["object"]["key"]).name
            truth = truths[name]
            cuts = cut_intervals(t, len(truth))
            pii = other = pii_cut = other_cut = 0.0
            per_number, uncut = [], []
            for ch, run in numbers[name]:
                seconds, cut = covered_s(list(run), [(0.0, 1e9)]), covered_s(list(run), cuts[ch])  # both on the grid
                per_number.append(("".join(w for _, _, w in run), round(cut / seconds, 4)))
                pii, pii_cut = pii + seconds, pii_cut + cut
                for k, digit in enumerate(run):  # where a number's audio is left: (digit's place, its time, share left)
                    left = 1 - covered_s([digit], cuts[ch]) / covered_s([digit], [(0.0, 1e9)])
                    if left > 0.001:
                        uncut.append((k, len(run), round(digit[0], 2), round(left, 3)))
            for ch, words in enumerate(truth):
                rest = [w for w in words if not is_digit(w[2])]
                other += covered_s(rest, [(0.0, 1e9)])
                other_cut += covered_s(rest, cuts[ch])
            report[name] = {
                "spans": [(p["type"], p["role"], p["start_s"], p["end_s"], p["word_timed"]) for p in t.get("pii", [])],
                "recall_per_number": per_number,
                "digits_left": uncut,
                "recall": round(pii_cut / pii, 4) if pii else None,
                "collateral": round(other_cut / other, 4) if other else None,
                "pii_after": _kinds_found(again[name]) if name in again else None,
            }
    files = dict(report)
    report["all"] = {
        "min_recall": min(r["recall"] for r in files.values() if r["recall"] is not None),
        "numbers_fully_cut": f"{sum(r == 1.0 for x in files.values() for _, r in x['recall_per_number'])}"
        f"/{sum(len(x['recall_per_number']) for x in files.values())}",
        "max_collateral": max(r["collateral"] for r in files.values()),
        "pii_after": sum(r["pii_after"] or 0 for r in files.values()),
        "copies_missing": sum(r["pii_after"] is None for r in files.values()),
    }
    report["by_condition"] = by_condition(files)
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
